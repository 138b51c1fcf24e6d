package dataplane

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Source is what a server sends from: the node's lease table over its engine.
type Source interface {
	// ReadChunk reads chunk index of lease into buf (len(buf) is the server's MaxChunk) and
	// returns the payload (a prefix of buf) with the CRC-32C the source stored for it.
	ReadChunk(lease uint64, index uint32, buf []byte) (payload []byte, crc uint32, st Status)
}

// LeaseWaiter is a Source that can wait for a lease still being granted (FlagWait: the
// client sent its request alongside the control-plane call that takes the lease). It
// returns whether the lease is live, at once when the source knows the lease will not come
// (refused, or released already).
type LeaseWaiter interface {
	AwaitLease(lease uint64, max time.Duration) bool
}

// LeaseReleaser is a Source that releases a lease when its client says it is done with it
// (FlagRelease), instead of an Unlock on the control plane.
type LeaseReleaser interface {
	ReleaseLease(lease uint64)
}

// ServerConfig bounds what peers can make a server do. Zero fields take the defaults.
type ServerConfig struct {
	MaxChunk         int           // largest payload sent (the engine's slot payload); required
	MaxConns         int           // concurrent connections (default 64); more are closed at once
	MaxInflightBytes int64         // chunk buffers in use at once, in bytes (default 64 MiB, at least one chunk)
	HandshakeTimeout time.Duration // default 5 s
	IdleTimeout      time.Duration // a connection with no request for this long is closed (default 2 min)
	WriteTimeout     time.Duration // per chunk (default 10 s)
	BusyWait         time.Duration // how long a request waits for a buffer before StatusBusy (default 1 s)
	LeaseWait        time.Duration // how long a FlagWait request waits for its lease (default 2 s), holding no buffer
	// Admission (admit.go): Reserved of MaxConns slots are kept for known peers (default a
	// quarter); a stranger must fetch a chunk within ProveTimeout of its hello (default 5 s)
	// and one address holds at most StrangersPerIP stranger slots (default 8). Trusted
	// names the addresses of known peers (cluster members); nil: none beyond the proven.
	Reserved       int
	ProveTimeout   time.Duration
	StrangersPerIP int
	Trusted        func(netip.Addr) bool
	// Tamper, when set, may change a chunk's bytes after its checksum was taken (tests:
	// a corrupting peer).
	Tamper func(index uint32, payload []byte)
	// TLS, when set, wraps every connection in TLS before the hello (tls.go); the
	// handshake counts against HandshakeTimeout. nil: plain TCP.
	TLS *tls.Config
	// NoLookups keeps the server from announcing lookup requests (lookup.go) even when
	// its Source takes them: clients then take their leases on the control plane.
	NoLookups bool
}

func (c *ServerConfig) defaults() error {
	if c.MaxChunk <= 0 || c.MaxChunk > MaxChunkLimit {
		return fmt.Errorf("data plane: max chunk %d outside 1..%d", c.MaxChunk, MaxChunkLimit)
	}
	if c.MaxConns <= 0 {
		c.MaxConns = 64
	}
	if c.Reserved <= 0 {
		c.Reserved = c.MaxConns / 4
	}
	if c.Reserved >= c.MaxConns {
		return fmt.Errorf("data plane: %d reserved connections of %d leave none for new peers", c.Reserved, c.MaxConns)
	}
	if c.StrangersPerIP <= 0 {
		c.StrangersPerIP = 8
	}
	if c.MaxInflightBytes <= 0 {
		c.MaxInflightBytes = 64 << 20
	}
	for _, d := range []struct {
		p *time.Duration
		v time.Duration
	}{{&c.HandshakeTimeout, 5 * time.Second}, {&c.IdleTimeout, 2 * time.Minute}, {&c.WriteTimeout, 10 * time.Second}, {&c.BusyWait, time.Second}, {&c.LeaseWait, 2 * time.Second}, {&c.ProveTimeout, 5 * time.Second}} {
		if *d.p <= 0 {
			*d.p = d.v
		}
	}
	return nil
}

// ServerStats are a server's cumulative counters.
type ServerStats struct {
	Conns, ConnsRefused, BadFrames int64
	Chunks, Bytes, Busy, Failed    int64
	Requests                       int64 // requests answered (a fetch of up to MaxBatch chunks each)
	Lookups, LookupsRefused        int64 // of them lookup requests; those refused (StatusRefused)
	TLSFailed                      int64 // connections whose TLS handshake failed
	// Unproven: stranger connections closed for sending no valid request in time.
	Unproven int64
}

// Server answers fetches on its listeners.
type Server struct {
	src      Source
	cfg      ServerConfig
	waiter   LeaseWaiter   // nil: the source takes no request flags
	releaser LeaseReleaser // set when waiter is
	leaser   KeyLeaser     // nil: the server takes no lookup requests

	bufs chan []byte   // free chunk buffers (allocated on first use)
	sem  chan struct{} // one token per buffer
	cons chan struct{} // one token per connection
	adm  *admission

	mu     sync.Mutex
	lns    map[net.Listener]struct{}
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup

	accepted, refused, badFrames, chunks, sentBytes, busy, failed, unproven atomic.Int64
	tlsFailed, requests, lookups, refusedLookups                            atomic.Int64
}

// NewServer builds a server over src.
func NewServer(src Source, cfg ServerConfig) (*Server, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	n := max(1, int(cfg.MaxInflightBytes/int64(cfg.MaxChunk)))
	s := &Server{
		src: src, cfg: cfg,
		bufs: make(chan []byte, n), sem: make(chan struct{}, n), cons: make(chan struct{}, cfg.MaxConns),
		lns: map[net.Listener]struct{}{}, conns: map[net.Conn]struct{}{},
	}
	s.adm = newAdmission(&s.cfg)
	w, wok := src.(LeaseWaiter)
	r, rok := src.(LeaseReleaser)
	if wok && rok {
		s.waiter, s.releaser = w, r
		if kl, ok := src.(KeyLeaser); ok && !cfg.NoLookups {
			s.leaser = kl
		}
	}
	return s, nil
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("data plane: server closed")

// Serve accepts connections on ln until Close; it closes ln when it returns.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	defer ln.Close()
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.isClosed() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		cs := &connState{ip: remoteIP(c)}
		if !s.adm.known(cs.ip) {
			if cs.stranger = s.adm.stranger(cs.ip); !cs.stranger {
				s.refused.Add(1)
				c.Close()
				continue
			}
		}
		select {
		case s.cons <- struct{}{}:
		default:
			s.refused.Add(1)
			c.Close()
			if cs.stranger {
				s.adm.release(cs.ip)
			}
			continue
		}
		if !s.track(c) {
			<-s.cons
			c.Close()
			return ErrServerClosed
		}
		s.wg.Go(func() {
			defer func() { <-s.cons }()
			defer s.untrack(c)
			s.serveConn(c, cs)
			if cs.stranger {
				s.adm.release(cs.ip)
			}
		})
	}
}

func (s *Server) isClosed() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.closed }

func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.Close()
}

// Close stops every listener and drops every connection at once (a transfer in progress
// ends with a short read on the other side), then waits for the handlers.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// Stats returns the counters.
func (s *Server) Stats() ServerStats {
	return ServerStats{Conns: s.accepted.Load(), ConnsRefused: s.refused.Load(), BadFrames: s.badFrames.Load(),
		Chunks: s.chunks.Load(), Bytes: s.sentBytes.Load(), Busy: s.busy.Load(), Failed: s.failed.Load(),
		TLSFailed: s.tlsFailed.Load(), Unproven: s.unproven.Load(), Requests: s.requests.Load(),
		Lookups: s.lookups.Load(), LookupsRefused: s.refusedLookups.Load()}
}

func (s *Server) serveConn(c net.Conn, cs *connState) {
	s.accepted.Add(1)
	c.SetDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	if s.cfg.TLS != nil {
		if c = s.handshake(c); c == nil {
			return
		}
	}
	var hello [helloLen]byte
	if _, err := io.ReadFull(c, hello[:]); err != nil {
		return
	}
	if err := parseHello(hello[:]); err != nil {
		s.badFrames.Add(1)
		return
	}
	var feat uint16
	if s.waiter != nil {
		feat |= featLeaseFlags
	}
	if s.leaser != nil {
		feat |= featLookups
	}
	if _, err := c.Write(appendHelloAckFlags(nil, feat, uint32(s.cfg.MaxChunk))); err != nil {
		return
	}
	cs.proveBy = time.Now().Add(s.cfg.ProveTimeout)
	br := bufio.NewReaderSize(c, 4096)
	fw := newFrameWriter(c)
	for {
		c.SetDeadline(cs.deadline(s.cfg.IdleTimeout))
		req, err := ReadRequest(br)
		if err != nil {
			var ne net.Error
			switch {
			case cs.stranger && errors.As(err, &ne) && ne.Timeout():
				s.unproven.Add(1)
			case !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed):
				s.badFrames.Add(1)
			}
			return
		}
		s.requests.Add(1)
		if req.Keys != nil {
			if s.leaser == nil {
				s.badFrames.Add(1) // a request this server never announced
				return
			}
			if err := s.answerLookup(c, fw, req, cs); err != nil {
				return
			}
			if cs.stranger && !time.Now().Before(cs.proveBy) {
				s.unproven.Add(1)
				return
			}
			continue
		}
		if req.Flags != 0 && s.waiter == nil {
			s.badFrames.Add(1) // flags this server never announced
			return
		}
		if req.Flags&FlagWait != 0 {
			s.waiter.AwaitLease(req.Lease, s.cfg.LeaseWait) // "no such lease" below if not
		}
		err = s.answer(c, fw, req, cs)
		if req.Flags&FlagRelease != 0 {
			s.releaser.ReleaseLease(req.Lease)
		}
		if err != nil {
			return
		}
		if cs.stranger && !time.Now().Before(cs.proveBy) {
			s.unproven.Add(1)
			return
		}
	}
}

// answer sends every requested chunk through one buffer taken from the byte budget. A
// stranger that asked for a chunk of a live lease is a peer the control plane let in: its
// address is proven before the chunk is written, so that once the requester has the chunk
// its next connections are admitted as a known peer's.
func (s *Server) answer(c net.Conn, fw *frameWriter, req Request, cs *connState) error {
	buf := s.acquire()
	if buf == nil {
		for _, idx := range req.Indexes {
			s.busy.Add(1)
			if err := s.send(c, fw, ChunkHeader{Status: StatusBusy, Index: idx}, nil, cs); err != nil {
				return err
			}
		}
		return fw.flush()
	}
	defer s.release(buf)
	// Read ahead: with a second buffer free in the budget, the next chunk is read while this
	// one is written to the socket. A third, taken only while the budget stays at least half
	// free for other requests' first buffers, lets the reader run two chunks ahead: it then
	// waits for the writer less often (a memory device at 256 KiB, one Get in flight: rr
	// ratio median 0.91 against 0.83 with two, ten alternated pairs, docs/p2p.md).
	if len(req.Indexes) > 1 {
		if ahead := s.tryAcquire(); ahead != nil {
			defer s.release(ahead)
			if len(req.Indexes) > 2 {
				if third := s.tryAcquireSpare(); third != nil {
					defer s.release(third)
					return s.answerAhead(c, fw, req, cs, buf, ahead, third)
				}
			}
			return s.answerAhead(c, fw, req, cs, buf, ahead)
		}
	}
	for _, idx := range req.Indexes {
		h, p := s.read(req.Lease, idx, buf)
		if err := s.send(c, fw, h, p, cs); err != nil {
			return err
		}
	}
	return fw.flush()
}

// answerAhead answers req with two or more buffers: a goroutine reads the next chunks into
// the free ones while chunk i is written from another. It returns only once the reader has stopped, so the
// caller can release both buffers.
func (s *Server) answerAhead(c net.Conn, fw *frameWriter, req Request, cs *connState, bufs ...[]byte) error {
	type chunk struct {
		h   ChunkHeader
		p   []byte
		buf []byte
	}
	free := make(chan []byte, len(bufs))
	for _, b := range bufs {
		free <- b
	}
	ready := make(chan chunk, len(bufs))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, idx := range req.Indexes {
			var b []byte
			select {
			case b = <-free:
			case <-stop:
				return
			}
			h, p := s.read(req.Lease, idx, b)
			ready <- chunk{h, p, b} // buffered: never blocks
		}
	})
	defer wg.Wait()
	defer close(stop)
	for range req.Indexes {
		ch := <-ready
		if err := s.send(c, fw, ch.h, ch.p, cs); err != nil {
			return err
		}
		// A payload written out whole is done with; one held in the frame writer's batch
		// (small payloads are copied into it) is too.
		free <- ch.buf
	}
	return fw.flush()
}

// read reads chunk idx of lease into buf and returns its header and payload (nil unless
// StatusOK).
func (s *Server) read(lease uint64, idx uint32, buf []byte) (ChunkHeader, []byte) {
	h := ChunkHeader{Index: idx}
	var p []byte
	p, h.CRC, h.Status = s.src.ReadChunk(lease, idx, buf)
	if h.Status == StatusOK && len(p) > s.cfg.MaxChunk {
		h.Status = StatusReadErr
	}
	if h.Status != StatusOK {
		p, h.CRC = nil, 0
		s.failed.Add(1)
	}
	h.Size = uint32(len(p))
	return h, p
}

// send frames one chunk on c: a stranger's address is proven by the first chunk it gets.
func (s *Server) send(c net.Conn, fw *frameWriter, h ChunkHeader, p []byte, cs *connState) error {
	if h.Status == StatusOK && cs.stranger {
		s.adm.prove(cs.ip)
		s.adm.release(cs.ip)
		cs.stranger = false
	}
	if h.Status == StatusOK && s.cfg.Tamper != nil {
		s.cfg.Tamper(h.Index, p)
	}
	c.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	if err := fw.frame(h, p); err != nil {
		return err
	}
	if h.Status == StatusOK {
		s.chunks.Add(1)
		s.sentBytes.Add(int64(len(p)))
	}
	return nil
}

// frameWriter batches a response's frames: headers and small payloads are held until
// 64 KiB gather; a larger payload goes out with the held bytes in one vectored write
// (writev on plain TCP), from the payload's own buffer, never copied into the batch.
type frameWriter struct {
	c   net.Conn
	buf []byte
}

func newFrameWriter(c net.Conn) *frameWriter { return &frameWriter{c: c, buf: make([]byte, 0, 64<<10)} }

func (w *frameWriter) frame(h ChunkHeader, p []byte) error {
	w.buf = AppendChunkHeader(w.buf, h)
	if len(w.buf)+len(p) <= cap(w.buf) {
		w.buf = append(w.buf, p...)
		return nil
	}
	bufs := net.Buffers{w.buf, p}
	_, err := bufs.WriteTo(w.c)
	w.buf = w.buf[:0]
	return err
}

func (w *frameWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	_, err := w.c.Write(w.buf)
	w.buf = w.buf[:0]
	return err
}

func (s *Server) acquire() []byte {
	t := time.NewTimer(s.cfg.BusyWait)
	defer t.Stop()
	select {
	case s.sem <- struct{}{}:
	case <-t.C:
		return nil
	}
	return s.buffer()
}

// tryAcquire is acquire without waiting: nil when the budget has no buffer free now.
func (s *Server) tryAcquire() []byte {
	select {
	case s.sem <- struct{}{}:
	default:
		return nil
	}
	return s.buffer()
}

// tryAcquireSpare is tryAcquire for a buffer that only speeds a request up: nil unless at
// least half the budget would still be free after taking it.
func (s *Server) tryAcquireSpare() []byte {
	if 2*(len(s.sem)+1) > cap(s.sem) {
		return nil
	}
	return s.tryAcquire()
}

// buffer is a chunk buffer for a caller that holds a place in the budget: a pooled one, or
// a new one.
func (s *Server) buffer() []byte {
	select {
	case b := <-s.bufs:
		return b
	default:
		return make([]byte, s.cfg.MaxChunk)
	}
}

func (s *Server) release(b []byte) {
	select {
	case s.bufs <- b:
	default:
	}
	<-s.sem
}
