package node

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/rbctl/rbctl/p2p/client"
)

// The control plane's connection bounds: a connection that sends only the HTTP/2 preface
// is closed at the handshake timeout; one that completes the handshake (preface and
// SETTINGS) but never answers the server's keepalive ping is closed after KeepaliveTime +
// KeepaliveTimeout; one address holds at most ControlPerIP connections, more are closed at
// accept and counted.
func TestControlConnectionBounds(t *testing.T) {
	o := fastOptions("a", nil)
	o.Limits = Limits{HandshakeTimeout: 300 * time.Millisecond, KeepaliveTime: 300 * time.Millisecond,
		KeepaliveTimeout: 300 * time.Millisecond, ControlPerIP: 3}
	n := startNode(t, newEngine(t, nil), o)
	open := func(settings bool) net.Conn {
		c, err := net.Dial("tcp", n.Peer().Control)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
		if settings {
			c.Write([]byte{0, 0, 0, 4, 0, 0, 0, 0, 0})
		}
		return c
	}
	// closedWithin: the node closes c within d (what it sends before is read and dropped).
	closedWithin := func(c net.Conn, d time.Duration) bool {
		c.SetReadDeadline(time.Now().Add(d))
		_, err := io.Copy(io.Discard, c)
		ne, ok := err.(net.Error)
		return !(ok && ne.Timeout())
	}
	preface, silent := open(false), open(true)
	if !closedWithin(preface, 3*time.Second) {
		t.Fatal("a preface-only connection outlived the handshake timeout")
	}
	if !closedWithin(silent, 3*time.Second) {
		t.Fatal("a connection that never answers pings outlived keepalive time + timeout")
	}
	held := []net.Conn{open(true), open(true), open(true)}
	extra := open(true)
	if !closedWithin(extra, time.Second) {
		t.Fatal("a fourth connection from one address was kept (cap 3)")
	}
	if got := n.Stats().Counters["control_conns_refused"]; got != 1 {
		t.Fatalf("control_conns_refused %d, want 1", got)
	}
	for _, c := range held {
		c.Close()
	}
	// The slots are free again once the node has seen the closes: a client gets through.
	eventually(t, "a client gets through after the held connections closed", func() bool {
		c, err := client.Dial(n.Peer().Control, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		o, err := c.Put(context.Background(), wireKeyN(1), []byte("v"))
		return o.Stored && err == nil
	})
}
