package resp

import (
	"context"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingStore is a memStore that counts the values it loads and may take a while for each
// (a disk read).
type countingStore struct {
	*memStore
	gets  atomic.Int64
	pause time.Duration
}

func (s *countingStore) Get(k Key) ([]byte, bool, error) {
	s.gets.Add(1)
	if s.pause > 0 {
		time.Sleep(s.pause)
	}
	return s.memStore.Get(k)
}

func mgetOf(k string, n int) string {
	args := make([]string, 0, n+1)
	args = append(args, "MGET")
	for range n {
		args = append(args, k)
	}
	return cmd(args...)
}

// An MGET whose client goes away stops loading values: the first reply write that fails
// ends it (hostile battery: an MGET of 60,000 copies of a 256 KiB value read ~15 GB from
// disk after its client closed).
func TestMGETStopsWhenTheClientIsGone(t *testing.T) {
	store := &countingStore{memStore: newMem(64 << 10)}
	store.Set(store.Key([]byte(key)), []byte(strings.Repeat("z", 64<<10)))
	srv := &Server{Store: store}
	c, err := net.Dial("tcp", serve(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	const n = 20000 // a 1.3 GB reply, never read
	if _, err := io.WriteString(c, mgetOf(key, n)); err != nil {
		t.Fatal(err)
	}
	// The server loads values until the socket's buffers are full, then blocks in a write.
	eventually(t, "the reply fills the socket", func() bool {
		g := store.gets.Load()
		time.Sleep(100 * time.Millisecond)
		return g > 0 && store.gets.Load() == g
	})
	before := store.gets.Load()
	c.Close() // unread bytes: the server's write fails (reset)
	eventually(t, "the connection ends", func() bool { return srv.clients.Load() == 0 })
	if after := store.gets.Load() - before; after > 2 {
		t.Fatalf("%d values loaded after the client closed (%d before, of %d keys)", after, before, n)
	}
}

// A server that shuts down ends the commands in flight: an MGET of many keys on a slow store
// stops between two keys once the server's context ends, and Serve returns at once.
func TestShutdownEndsAnMGETInFlight(t *testing.T) {
	store := &countingStore{memStore: newMem(64), pause: 200 * time.Microsecond}
	store.Set(store.Key([]byte(key)), []byte("v"))
	srv := &Server{Store: store}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l, 0) }()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go io.Copy(io.Discard, c) // a client that reads: only the shutdown stops the MGET
	const n = 50000           // 10 s of loads at 200 µs each
	if _, err := io.WriteString(c, mgetOf(key, n)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the MGET runs", func() bool { return store.gets.Load() > 100 })
	cancel()
	before := store.gets.Load()
	select {
	case <-done:
	case <-time.After(8 * time.Second):
		t.Fatalf("Serve still running 8 s after its context ended (%d of %d values loaded)", store.gets.Load(), n)
	}
	if after := store.gets.Load() - before; after > 2 {
		t.Fatalf("%d values loaded after the server's context ended", after)
	}
}
