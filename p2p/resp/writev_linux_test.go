package resp

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (server, client *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-accepted
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return s.(*net.TCPConn), c.(*net.TCPConn)
}

// A reply far larger than the socket's buffers goes out whole and in order: the writer takes
// partial writes, waits in the netpoller when the socket is full, and goes on from where the
// kernel stopped, across more buffers than one writev takes (iov holds 4).
func TestRawWriterWritesEveryByteThroughAFullSocket(t *testing.T) {
	s, c := tcpPair(t)
	s.SetWriteBuffer(64 << 10)
	c.SetReadBuffer(64 << 10)
	w := newRawWriter(s)
	if w == nil {
		t.Fatal("no raw writer for a TCP connection")
	}
	var bufs [][]byte
	var want []byte
	for i, n := range []int{11, 0, 3 << 20, 1, 0, 70001, 2, 5} {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(i*31 + j*7 + j>>9)
		}
		bufs = append(bufs, b)
		want = append(want, b...)
	}
	got := make(chan []byte, 1)
	go func() {
		var r bytes.Buffer
		chunk := make([]byte, 1500)
		for r.Len() < len(want) {
			n, err := c.Read(chunk)
			r.Write(chunk[:n])
			if err != nil {
				break
			}
			time.Sleep(time.Microsecond) // a slow reader: the writer meets a full socket
		}
		got <- r.Bytes()
	}()
	s.SetWriteDeadline(time.Now().Add(time.Minute)) // a writer that loses its place fails, not hangs
	if err := w.writev(bufs); err != nil {
		t.Fatal(err)
	}
	if g := <-got; !bytes.Equal(g, want) {
		t.Fatalf("read %d bytes, want %d; first difference at %d", len(g), len(want), firstDiff(g, want))
	}
	if w.full == 0 {
		t.Fatal("the socket was never full: the test did not reach the netpoller's wait")
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// A peer that reads nothing makes the write fail at the connection's write deadline (what
// ConnLimits.WriteTimeout arms), not hang.
func TestRawWriterStopsAtTheWriteDeadline(t *testing.T) {
	s, _ := tcpPair(t)
	w := newRawWriter(s)
	s.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	err := w.writev([][]byte{make([]byte, 64<<20)})
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("writev to a peer that reads nothing: %v, want a deadline error", err)
	}
}

// A peer that has gone makes the write fail with the kernel's error, as a net.OpError.
func TestRawWriterReportsAClosedPeer(t *testing.T) {
	s, c := tcpPair(t)
	c.SetLinger(0)
	c.Close() // a reset
	w := newRawWriter(s)
	var err error
	for range 100 {
		if err = w.writev([][]byte{make([]byte, 1<<20)}); err != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	var op *net.OpError
	if !errors.As(err, &op) {
		t.Fatalf("writev to a reset connection: %v, want a net.OpError", err)
	}
}

// A connection it cannot write itself (TLS) gets no raw writer: its replies go through
// net.Buffers, which TLS encrypts.
func TestRawWriterOnlyForSockets(t *testing.T) {
	s, _ := tcpPair(t)
	if newRawWriter(tls.Server(s, &tls.Config{})) != nil {
		t.Fatal("a raw writer under TLS would send plaintext")
	}
	if newRawWriter(struct{ net.Conn }{s}) != nil {
		t.Fatal("a raw writer for a wrapped connection")
	}
}

func TestAdvance(t *testing.T) {
	for _, c := range []struct {
		lens []int
		n    int
		want []int
	}{
		{[]int{3, 4}, 0, []int{3, 4}},
		{[]int{3, 4}, 2, []int{1, 4}},
		{[]int{3, 4}, 3, []int{4}},
		{[]int{3, 0, 4}, 3, []int{4}},
		{[]int{3, 4}, 7, nil},
		{[]int{0, 3}, 1, []int{2}},
	} {
		var bufs [][]byte
		for _, l := range c.lens {
			bufs = append(bufs, make([]byte, l))
		}
		var got []int
		for _, b := range advance(bufs, c.n) {
			got = append(got, len(b))
		}
		if len(got) != len(c.want) {
			t.Errorf("advance(%v, %d) = %v, want %v", c.lens, c.n, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("advance(%v, %d) = %v, want %v", c.lens, c.n, got, c.want)
				break
			}
		}
	}
}
