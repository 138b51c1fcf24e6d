package dataplane

import (
	"context"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"
)

// Strangers (not Trusted, never fetched) hold at most StrangersPerIP slots and lose them
// ProveTimeout after their hello unless they fetch a chunk of a live lease; a peer that
// fetched once, or a Trusted address, is admitted beyond the strangers' share.
func TestAdmission(t *testing.T) {
	chunks := [][]byte{[]byte("one"), []byte("two")}
	cfg := ServerConfig{MaxChunk: 64, MaxConns: 8, Reserved: 4, StrangersPerIP: 2, ProveTimeout: 300 * time.Millisecond}
	s, addr := serve(t, mapSource{chunks}, cfg)
	hello := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.Write(appendHello(nil))
		return c
	}
	// closed reports whether the server closed c (within 2 s).
	closed := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := io.Copy(io.Discard, c)
		var ne net.Error
		return err == nil || !(errorAs(err, &ne) && ne.Timeout())
	}
	a, b, c := hello(), hello(), hello()
	if !closed(c) {
		t.Fatal("a third stranger connection from one address was kept (cap 2)")
	}
	if !closed(a) || !closed(b) {
		t.Fatal("idle strangers kept past the prove timeout")
	}
	if st := s.Stats(); st.Unproven != 2 || st.ConnsRefused != 1 {
		t.Fatalf("unproven %d (want 2), refused %d (want 1)", st.Unproven, st.ConnsRefused)
	}
	// A fetch of a live lease proves the address: it then takes slots beyond the 2.
	conn, err := Dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Fetch(context.Background(), 7, wants(chunks), func(int, []byte) {}); err != nil {
		t.Fatal(err)
	}
	kept := func(conns ...net.Conn) {
		t.Helper()
		time.Sleep(500 * time.Millisecond) // past the prove timeout: known peers are not strangers
		for _, k := range conns {
			k.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			var ack [helloAckLen]byte
			if _, err := io.ReadFull(k, ack[:]); err != nil {
				t.Fatalf("a known address's connection: %v", err)
			}
			if _, err := k.Read(ack[:1]); err == io.EOF {
				t.Fatal("a known address's idle connection was closed at the prove timeout")
			}
		}
	}
	kept(hello(), hello(), hello())
	if st := s.Stats(); st.Unproven != 2 {
		t.Fatalf("unproven %d after the proven connections, want 2", st.Unproven)
	}
	// A Trusted address (a cluster member) is known from its first connection.
	cfg.Trusted = func(netip.Addr) bool { return true }
	_, addr = serve(t, mapSource{chunks}, cfg)
	kept(hello(), hello(), hello())
}

func errorAs(err error, target *net.Error) bool {
	ne, ok := err.(net.Error)
	if ok {
		*target = ne
	}
	return ok
}

// A read-ahead buffer beyond the second is taken only while half the budget stays free for
// other requests' first buffers.
func TestSpareBufferLeavesHalfTheBudget(t *testing.T) {
	s, err := NewServer(nil, ServerConfig{MaxChunk: 1024, MaxInflightBytes: 4 * 1024})
	if err != nil {
		t.Fatal(err)
	}
	first, second := s.tryAcquire(), s.tryAcquire()
	if first == nil || second == nil {
		t.Fatal("a budget of 4 buffers gave no 2")
	}
	if b := s.tryAcquireSpare(); b != nil {
		t.Fatalf("a spare taken with 2 of 4 buffers in use (would leave 1 free)")
	}
	s.release(second)
	b := s.tryAcquireSpare()
	if b == nil {
		t.Fatalf("no spare with 1 of 4 buffers in use (would leave 2 free)")
	}
	s.release(b)
	s.release(first)
	if len(s.sem) != 0 {
		t.Fatalf("%d places still held", len(s.sem))
	}
}
