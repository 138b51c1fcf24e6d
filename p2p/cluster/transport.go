package cluster

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// DialFunc opens a TCP connection for memberlist's streams (push-pull, reliable messages).
// A node inside a network namespace it does not run in passes one that dials from there.
type DialFunc func(network, addr string, timeout time.Duration) (net.Conn, error)

// traffic counts the bytes memberlist puts on and takes off the wire, packets and streams.
type traffic struct {
	packetsOut, packetsIn atomic.Uint64 // UDP bytes
	streamOut, streamIn   atomic.Uint64 // TCP bytes
}

// countingTransport wraps memberlist's network transport: it counts every byte, dials
// through a DialFunc, and (for tests) can cut the node off the network.
type countingTransport struct {
	inner   *memberlist.NetTransport
	dial    DialFunc
	traffic *traffic
	cut     atomic.Bool // drop every packet and refuse every stream, both ways

	packets chan *memberlist.Packet
	streams chan net.Conn
	done    chan struct{} // Shutdown began: stop handing on
	drained chan struct{} // the inner transport stopped: stop draining
	once    sync.Once
}

var errCut = errors.New("node is cut off the network")

func newCountingTransport(inner *memberlist.NetTransport, dial DialFunc, t *traffic) *countingTransport {
	c := &countingTransport{inner: inner, dial: dial, traffic: t,
		packets: make(chan *memberlist.Packet), streams: make(chan net.Conn),
		done: make(chan struct{}), drained: make(chan struct{})}
	go c.relayPackets()
	go c.relayStreams()
	return c
}

// The relays keep draining the inner transport after Shutdown began: its listeners block
// on their channels, and its Shutdown waits for them.
func (c *countingTransport) relayPackets() {
	for {
		select {
		case p := <-c.inner.PacketCh():
			if c.cut.Load() {
				continue
			}
			c.traffic.packetsIn.Add(uint64(len(p.Buf)))
			select {
			case c.packets <- p:
			case <-c.done:
			}
		case <-c.drained:
			return
		}
	}
}

func (c *countingTransport) relayStreams() {
	for {
		select {
		case conn := <-c.inner.StreamCh():
			if c.cut.Load() {
				conn.Close()
				continue
			}
			select {
			case c.streams <- &countingConn{Conn: conn, t: c.traffic}:
			case <-c.done:
				conn.Close()
			}
		case <-c.drained:
			return
		}
	}
}

func (c *countingTransport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	return c.inner.FinalAdvertiseAddr(ip, port)
}

func (c *countingTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if c.cut.Load() {
		return time.Now(), nil // lost on the wire, as UDP is
	}
	c.traffic.packetsOut.Add(uint64(len(b)))
	return c.inner.WriteTo(b, addr)
}

func (c *countingTransport) PacketCh() <-chan *memberlist.Packet { return c.packets }

func (c *countingTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if c.cut.Load() {
		return nil, errCut
	}
	var conn net.Conn
	var err error
	if c.dial != nil {
		conn, err = c.dial("tcp", addr, timeout)
	} else {
		conn, err = net.DialTimeout("tcp", addr, timeout)
	}
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, t: c.traffic}, nil
}

func (c *countingTransport) StreamCh() <-chan net.Conn { return c.streams }

func (c *countingTransport) Shutdown() error {
	var err error
	c.once.Do(func() {
		close(c.done)
		err = c.inner.Shutdown()
		close(c.drained)
	})
	return err
}

// countingConn counts a stream's bytes both ways.
type countingConn struct {
	net.Conn
	t *traffic
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.t.streamIn.Add(uint64(n))
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.t.streamOut.Add(uint64(n))
	return n, err
}
