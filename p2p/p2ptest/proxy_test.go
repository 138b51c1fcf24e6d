package p2ptest

import (
	"bytes"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// echoServer echoes every connection and counts them.
func echoServer(t *testing.T) (addr string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String(), accepted
}

func newProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := NewProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg and reads back as many bytes, within 10 s.
func roundTrip(t *testing.T, c net.Conn, msg []byte) []byte {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read back: %v", err)
	}
	return got
}

func TestProxyForwardsAndCounts(t *testing.T) {
	target, _ := echoServer(t)
	p := newProxy(t, target)
	c := dial(t, p.Addr())
	msg := bytes.Repeat([]byte("rbctl"), 20000)
	if got := roundTrip(t, c, msg); !bytes.Equal(got, msg) {
		t.Fatal("echo through the proxy differs")
	}
	// The proxy counts a piece once its write returns, which can be after the client has
	// read it: the counts may trail the echo for a moment, never exceed it.
	want := ProxyStats{Accepted: 1, Active: 1, BytesUp: uint64(len(msg)), BytesDown: uint64(len(msg))}
	s := p.Stats()
	for deadline := time.Now().Add(10 * time.Second); s != want && time.Now().Before(deadline); s = p.Stats() {
		if s.BytesUp > want.BytesUp || s.BytesDown > want.BytesDown || s.Accepted > 1 || s.Corrupted != 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if s != want {
		t.Fatalf("stats %+v; want %+v (1 accepted, %d bytes each way, none corrupted)", s, want, len(msg))
	}
}

func TestProxyLatencyAndBandwidthDelay(t *testing.T) {
	target, _ := echoServer(t)
	p := newProxy(t, target)
	c := dial(t, p.Addr())
	p.SetLatency(100 * time.Millisecond)
	start := time.Now()
	roundTrip(t, c, []byte("x"))
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("round trip with 100 ms each way took %v", d)
	}
	p.SetLatency(0)
	p.SetBandwidth(256 << 10)
	start = time.Now()
	roundTrip(t, c, make([]byte, 128<<10)) // 0.5 s each way, the ways overlapping
	if d := time.Since(start); d < 450*time.Millisecond {
		t.Fatalf("128 KiB each way at 256 KiB/s took %v", d)
	}
}

func TestProxyStallHoldsBytesUntilResume(t *testing.T) {
	target, _ := echoServer(t)
	p := newProxy(t, target)
	c := dial(t, p.Addr())
	p.Stall(true)
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, err := c.Read(make([]byte, 4)); n != 0 || err == nil {
		t.Fatalf("read %d bytes, %v through a stalled proxy", n, err)
	}
	p.Stall(false)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, 4)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "held" {
		t.Fatalf("after resume: %q, %v", got, err)
	}
}

func TestProxyBlackholeNeverDials(t *testing.T) {
	target, accepted := echoServer(t)
	p := newProxy(t, target)
	p.Blackhole(true)
	c := dial(t, p.Addr())
	if _, err := c.Write([]byte("anyone?")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, err := c.Read(make([]byte, 8)); n != 0 || !isTimeout(err) {
		t.Fatalf("blackhole answered %d bytes, %v; want a timeout", n, err)
	}
	if accepted.Load() != 0 {
		t.Fatalf("target saw %d connections through a blackhole", accepted.Load())
	}
}

func TestProxyResetAndRefuse(t *testing.T) {
	target, _ := echoServer(t)
	p := newProxy(t, target)
	c := dial(t, p.Addr())
	roundTrip(t, c, []byte("up"))
	p.ResetAll()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("read after reset: %v; want a connection error", err)
	}
	p.Refuse(true)
	if c2, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second); err == nil { // the reset may beat the dial
		defer c2.Close()
		c2.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c2.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Fatalf("read on a refused connection: %v; want a connection error", err)
		}
	}
	p.Refuse(false)
	c3 := dial(t, p.Addr())
	if got := roundTrip(t, c3, []byte("back")); string(got) != "back" {
		t.Fatalf("after refuse off: %q", got)
	}
}

func TestProxyCorruptsEveryNthByte(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	received := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		received <- b
	}()
	p := newProxy(t, ln.Addr().String())
	p.CorruptEvery(100)
	c := dial(t, p.Addr())
	msg := bytes.Repeat([]byte{0xAA}, 1000)
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	var got []byte
	select {
	case got = <-received:
	case <-time.After(10 * time.Second):
		t.Fatal("target received nothing")
	}
	if len(got) != len(msg) {
		t.Fatalf("target received %d bytes; want %d", len(got), len(msg))
	}
	for i := range msg {
		if want := (i+1)%100 == 0; (got[i] != msg[i]) != want {
			t.Fatalf("byte %d: %#x; corrupted should be %v", i, got[i], want)
		}
	}
	if n := p.Stats().Corrupted; n != 10 {
		t.Fatalf("%d bytes counted corrupted; want 10", n)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
