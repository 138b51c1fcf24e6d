package p2ptest

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards TCP connections to a target with faults chosen at run time. Every knob
// applies to connections already open and to new ones. The zero state forwards
// faithfully.
type Proxy struct {
	ln     net.Listener
	target string
	dial   func(network, addr string, timeout time.Duration) (net.Conn, error)

	latency   atomic.Int64 // ns added to every chunk, each way
	bandwidth atomic.Int64 // bytes/s each way per connection; 0 unlimited
	stalled   atomic.Bool  // hold bytes (the sender sees backpressure)
	blackhole atomic.Bool  // accept, read and discard, never answer, never dial
	refuse    atomic.Bool  // reset new connections at once
	corrupt   atomic.Int64 // flip the low bit of every n-th forwarded byte; 0 off

	accepted, up, down, corrupted atomic.Uint64

	mu     sync.Mutex
	conns  map[*proxied]struct{}
	closed bool
	wg     sync.WaitGroup
}

// ProxyStats counts what the proxy saw.
type ProxyStats struct {
	Accepted  uint64 // connections accepted
	Active    int    // connections open now
	BytesUp   uint64 // client → target bytes forwarded
	BytesDown uint64 // target → client bytes forwarded
	Corrupted uint64 // bytes altered
}

// NewProxy listens on 127.0.0.1 (a free port) and forwards to target.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return ServeProxy(ln, target, nil), nil
}

// ServeProxy forwards the connections ln accepts to target, dialed with dial (nil:
// net.DialTimeout), so a proxy can listen and dial in different namespaces.
func ServeProxy(ln net.Listener, target string, dial func(network, addr string, timeout time.Duration) (net.Conn, error)) *Proxy {
	if dial == nil {
		dial = net.DialTimeout
	}
	p := &Proxy{ln: ln, target: target, dial: dial, conns: map[*proxied]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetLatency delays every forwarded chunk by d, each way (pipelined: throughput stays).
func (p *Proxy) SetLatency(d time.Duration) { p.latency.Store(int64(d)) }

// SetBandwidth caps each direction of each connection at bytesPerSec; 0 removes the cap.
func (p *Proxy) SetBandwidth(bytesPerSec int64) { p.bandwidth.Store(bytesPerSec) }

// Stall stops (true) or resumes (false) forwarding; held bytes are delivered on resume.
func (p *Proxy) Stall(on bool) { p.stalled.Store(on) }

// Blackhole makes the proxy swallow everything: new connections are accepted but never
// dialed through, and bytes of open ones are discarded.
func (p *Proxy) Blackhole(on bool) { p.blackhole.Store(on) }

// Refuse resets new connections as soon as they are accepted.
func (p *Proxy) Refuse(on bool) { p.refuse.Store(on) }

// CorruptEvery flips the low bit of every n-th byte forwarded each way; 0 stops.
func (p *Proxy) CorruptEvery(n int64) { p.corrupt.Store(n) }

// ResetAll resets every open connection (RST to both ends).
func (p *Proxy) ResetAll() {
	p.mu.Lock()
	conns := make([]*proxied, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.reset()
	}
}

// Stats reads the counters.
func (p *Proxy) Stats() ProxyStats {
	p.mu.Lock()
	active := len(p.conns)
	p.mu.Unlock()
	return ProxyStats{Accepted: p.accepted.Load(), Active: active, BytesUp: p.up.Load(),
		BytesDown: p.down.Load(), Corrupted: p.corrupted.Load()}
}

// Close stops listening and resets every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.ResetAll()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		if p.refuse.Load() {
			resetConn(conn)
			continue
		}
		c := &proxied{client: conn, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			resetConn(conn)
			return
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go p.serve(c)
	}
}

// proxied is one client connection and its upstream.
type proxied struct {
	client, server net.Conn
	mu             sync.Mutex
	done           chan struct{}
	once           sync.Once
}

func (c *proxied) close(reset bool) {
	c.once.Do(func() {
		close(c.done)
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, conn := range []net.Conn{c.client, c.server} {
			if conn == nil {
				continue
			}
			if reset {
				resetConn(conn)
			} else {
				conn.Close()
			}
		}
	})
}

func (c *proxied) reset() { c.close(true) }

func resetConn(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

func (p *Proxy) serve(c *proxied) {
	defer p.wg.Done()
	defer func() {
		c.close(false)
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	if p.blackhole.Load() {
		io.Copy(io.Discard, c.client)
		return
	}
	server, err := p.dial("tcp", p.target, 5*time.Second)
	if err != nil {
		resetConn(c.client)
		return
	}
	c.mu.Lock()
	c.server = server
	c.mu.Unlock()
	select {
	case <-c.done: // reset while dialing
		server.Close()
		return
	default:
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(c, c.client, server, &p.up) }()
	go func() { defer wg.Done(); p.pipe(c, server, c.client, &p.down) }()
	wg.Wait()
}

type chunk struct {
	b  []byte
	at time.Time
}

// pipe forwards src to dst: a reader stamps chunks as they arrive, a writer releases each
// at its stamp plus the latency, paced by the bandwidth cap and held while stalled.
func (p *Proxy) pipe(c *proxied, src, dst net.Conn, count *atomic.Uint64) {
	q := make(chan chunk, 64)
	go func() {
		defer close(q)
		for {
			b := make([]byte, 32<<10)
			n, err := src.Read(b)
			if n > 0 {
				select {
				case q <- chunk{b[:n], time.Now()}:
				case <-c.done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	var next time.Time // bandwidth pacing
	var sent int64     // bytes seen, for CorruptEvery
	for ch := range q {
		if !p.wait(c, ch.at.Add(time.Duration(p.latency.Load()))) {
			return
		}
		for p.stalled.Load() {
			if !p.wait(c, time.Now().Add(5*time.Millisecond)) {
				return
			}
		}
		if p.blackhole.Load() {
			continue
		}
		if n := p.corrupt.Load(); n > 0 {
			for i := range ch.b {
				if (sent+int64(i)+1)%n == 0 {
					ch.b[i] ^= 1
					p.corrupted.Add(1)
				}
			}
		}
		sent += int64(len(ch.b))
		if bw := p.bandwidth.Load(); bw > 0 {
			now := time.Now()
			if next.Before(now) {
				next = now
			}
			next = next.Add(time.Duration(int64(len(ch.b)) * int64(time.Second) / bw))
			if !p.wait(c, next) {
				return
			}
		}
		if _, err := dst.Write(ch.b); err != nil {
			c.close(false)
			return
		}
		count.Add(uint64(len(ch.b)))
	}
	// The source closed: pass the half close on, and end the pair if the other way is done.
	if tc, ok := dst.(*net.TCPConn); ok {
		if err := tc.CloseWrite(); err != nil && !errors.Is(err, net.ErrClosed) {
			c.close(false)
		}
	} else {
		c.close(false)
	}
}

// wait sleeps until t; false when the connection was closed meanwhile.
func (p *Proxy) wait(c *proxied, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		select {
		case <-c.done:
			return false
		default:
			return true
		}
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-c.done:
		return false
	}
}
