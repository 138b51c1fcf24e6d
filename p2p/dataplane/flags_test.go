package dataplane

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

// leaseSource serves mapSource's chunks under lease 7 once granted, and records releases.
type leaseSource struct {
	mapSource
	mu       sync.Mutex
	granted  bool
	grant    chan struct{} // closed when the lease is granted
	released []uint64
}

func newLeaseSource(chunks [][]byte) *leaseSource {
	return &leaseSource{mapSource: mapSource{chunks}, grant: make(chan struct{})}
}

func (s *leaseSource) ReadChunk(lease uint64, i uint32, buf []byte) ([]byte, uint32, Status) {
	s.mu.Lock()
	g := s.granted
	s.mu.Unlock()
	if !g {
		return nil, 0, StatusNoLease
	}
	return s.mapSource.ReadChunk(lease, i, buf)
}

func (s *leaseSource) AwaitLease(lease uint64, max time.Duration) bool {
	select {
	case <-s.grant:
		return lease == 7
	case <-time.After(max):
		return false
	}
}

func (s *leaseSource) ReleaseLease(lease uint64) {
	s.mu.Lock()
	s.released = append(s.released, lease)
	s.mu.Unlock()
}

func (s *leaseSource) doGrant() {
	s.mu.Lock()
	s.granted = true
	s.mu.Unlock()
	close(s.grant)
}

func TestRequestFlagsRoundTrip(t *testing.T) {
	for _, f := range []Flags{0, FlagWait, FlagRelease, FlagWait | FlagRelease} {
		b, err := AppendRequest(nil, Request{Lease: 9, Flags: f, Indexes: []uint32{0, 1}})
		if err != nil {
			t.Fatal(err)
		}
		r, err := ReadRequest(bytes.NewReader(b))
		if err != nil || r.Flags != f || r.Lease != 9 || len(r.Indexes) != 2 {
			t.Fatalf("flags %#x: %+v, %v", f, r, err)
		}
	}
	if _, err := AppendRequest(nil, Request{Lease: 9, Flags: 1 << 5, Indexes: []uint32{0}}); !errors.Is(err, ErrFrame) {
		t.Fatalf("unknown flag encoded: %v", err)
	}
	b, _ := AppendRequest(nil, Request{Lease: 9, Indexes: []uint32{0}})
	b[1] = 1 << 5
	if _, err := ReadRequest(bytes.NewReader(b)); !errors.Is(err, ErrFrame) {
		t.Fatalf("unknown flag decoded: %v", err)
	}
}

// A request sent before its lease is granted waits for it, streams once it is, and
// releases it when answered; the client sends no Unlock.
func TestWaitThenRelease(t *testing.T) {
	src := newLeaseSource([][]byte{bytes.Repeat([]byte{1}, 5000), []byte("second")})
	s, addr := serve(t, src, ServerConfig{MaxChunk: 64 << 10, LeaseWait: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.TakesFlags() {
		t.Fatal("a server over a LeaseWaiter and LeaseReleaser does not announce request flags")
	}
	if err := c.Send(ctx, 7, FlagWait|FlagRelease, []uint32{0, 1, 2}); err != nil {
		t.Fatal(err)
	}
	src.doGrant()
	frames, err := c.ReceiveAll(ctx, []uint32{0, 1, 2}, 64<<10)
	if err != nil || len(frames) != 3 {
		t.Fatalf("%d frames, %v", len(frames), err)
	}
	for i, w := range wants(src.chunks) {
		if err := frames[i].Check(w); err != nil || !bytes.Equal(frames[i].Payload, src.chunks[i]) {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
	if frames[2].Status != StatusBadIndex || frames[2].Payload != nil {
		t.Fatalf("index past the lease: %+v", frames[2])
	}
	eventually(t, "the lease released", func() bool {
		src.mu.Lock()
		defer src.mu.Unlock()
		return len(src.released) == 1 && src.released[0] == 7
	})
	if st := s.Stats(); st.Requests != 1 || st.BadFrames != 0 {
		t.Fatalf("stats %+v", st)
	}
	// The connection stays usable: a plain fetch after it.
	got := make([][]byte, 2)
	if err := c.Fetch(ctx, 7, wants(src.chunks), func(i int, p []byte) { got[i] = p }); err != nil || !bytes.Equal(got[1], src.chunks[1]) {
		t.Fatalf("fetch after: %v", err)
	}
}

// A lease that never comes: the request is answered "no such lease" after LeaseWait, and
// the answers read whole leave the connection usable.
func TestWaitForALeaseThatNeverComes(t *testing.T) {
	src := newLeaseSource([][]byte{[]byte("x")})
	_, addr := serve(t, src, ServerConfig{MaxChunk: 1024, LeaseWait: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Send(ctx, 7, FlagWait, []uint32{0, 1}); err != nil {
		t.Fatal(err)
	}
	frames, err := c.ReceiveAll(ctx, []uint32{0, 1}, 1024)
	if err != nil || len(frames) != 2 || frames[0].Status != StatusNoLease || frames[1].Status != StatusNoLease {
		t.Fatalf("%+v, %v", frames, err)
	}
	if err := c.Receive(ctx, nil, 0, nil); err != nil {
		t.Fatal(err)
	}
}

// A server over a plain Source announces no flags: the client refuses to send them, and a
// client that sends them anyway is closed and counted.
func TestFlagsNeedTheServersWord(t *testing.T) {
	src := mapSource{[][]byte{[]byte("x")}}
	s, addr := serve(t, src, ServerConfig{MaxChunk: 1024})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.TakesFlags() {
		t.Fatal("a plain source announces request flags")
	}
	if err := c.FetchWith(ctx, 7, FlagRelease, wants(src.chunks), func(int, []byte) {}); !errors.Is(err, ErrFrame) {
		t.Fatalf("flags sent to a server without them: %v", err)
	}
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.Write(appendHello(nil))
	req, _ := AppendRequest(nil, Request{Lease: 7, Flags: FlagRelease, Indexes: []uint32{0}})
	raw.Write(req)
	raw.SetReadDeadline(time.Now().Add(10 * time.Second))
	var ack [helloAckLen]byte
	if _, err := raw.Read(ack[:]); err != nil {
		t.Fatal(err)
	}
	if n, err := raw.Read(ack[:]); err == nil {
		t.Fatalf("answered %d bytes to flags it never announced", n)
	}
	eventually(t, "the bad frame counted", func() bool { return s.Stats().BadFrames == 1 })
}

// ReceiveAll drops, unallocated, a chunk above its bound, and stays in step.
func TestReceiveAllDropsOversized(t *testing.T) {
	src := newLeaseSource([][]byte{[]byte("small"), bytes.Repeat([]byte{2}, 3000), []byte("after")})
	src.doGrant()
	_, addr := serve(t, src, ServerConfig{MaxChunk: 4096})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	idx := []uint32{0, 1, 2}
	if err := c.Send(ctx, 7, 0, idx); err != nil {
		t.Fatal(err)
	}
	allocated := 0
	c.SetAlloc(func(n int) []byte { allocated += n; return make([]byte, n) })
	frames, err := c.ReceiveAll(ctx, idx, 100)
	if err != nil || len(frames) != 3 {
		t.Fatalf("%d frames, %v", len(frames), err)
	}
	if frames[1].Status != StatusOK || frames[1].Payload != nil || allocated != len("small")+len("after") {
		t.Fatalf("oversized chunk: %+v, %d bytes allocated", frames[1].ChunkHeader, allocated)
	}
	if !bytes.Equal(frames[2].Payload, []byte("after")) {
		t.Fatalf("out of step after the dropped chunk: %q", frames[2].Payload)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("still not true after 10s: %s", what)
}
