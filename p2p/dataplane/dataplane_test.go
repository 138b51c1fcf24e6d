package dataplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"
)

// mapSource serves lease 7's chunks from memory.
type mapSource struct{ chunks [][]byte }

func (m mapSource) ReadChunk(lease uint64, i uint32, buf []byte) ([]byte, uint32, Status) {
	if lease != 7 {
		return nil, 0, StatusNoLease
	}
	if int(i) >= len(m.chunks) {
		return nil, 0, StatusBadIndex
	}
	n := copy(buf, m.chunks[i])
	return buf[:n], Checksum(m.chunks[i]), StatusOK
}

func serve(t *testing.T, src Source, cfg ServerConfig) (*Server, string) {
	t.Helper()
	s, err := NewServer(src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return s, ln.Addr().String()
}

func wants(chunks [][]byte) []Want {
	w := make([]Want, len(chunks))
	for i, c := range chunks {
		w[i] = Want{Index: uint32(i), Size: uint32(len(c)), CRC: Checksum(c), HasCRC: true}
	}
	return w
}

// fetch returns a failed Dial as its error rather than failing the test: tests call it from
// goroutines, where t.Fatal would end only that goroutine (and the test would wait for its
// result forever: TestCloseMidTransferIsAShortRead hung so when Close won the race against
// the hello).
func fetch(t *testing.T, addr string, lease uint64, w []Want) ([][]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	defer c.Close()
	got := make([][]byte, len(w))
	err = c.Fetch(ctx, lease, w, func(i int, p []byte) { got[i] = p })
	return got, err
}

func TestFetchRoundTrip(t *testing.T) {
	src := mapSource{[][]byte{bytes.Repeat([]byte{1}, 4096), []byte("second"), bytes.Repeat([]byte{3}, 60000)}}
	_, addr := serve(t, src, ServerConfig{MaxChunk: 64 << 10})
	got, err := fetch(t, addr, 7, wants(src.chunks))
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if !bytes.Equal(got[i], src.chunks[i]) {
			t.Fatalf("chunk %d differs", i)
		}
	}
}

func TestFetchRefusals(t *testing.T) {
	src := mapSource{[][]byte{[]byte("aaaa"), []byte("bbbb")}}
	flip := func(i uint32, p []byte) {
		if i == 1 {
			p[0] ^= 0x40
		}
	}
	_, plain := serve(t, src, ServerConfig{MaxChunk: 1024})
	_, tamper := serve(t, src, ServerConfig{MaxChunk: 1024, Tamper: flip})
	w := wants(src.chunks)
	wrongCRC := append([]Want(nil), w...)
	wrongCRC[0].CRC ^= 1
	wrongSize := append([]Want(nil), w...)
	wrongSize[1].Size = 3
	for _, tc := range []struct {
		name      string
		addr      string
		lease     uint64
		w         []Want
		delivered int
		is        error
		status    Status
	}{
		{"corrupt in flight", tamper, 7, w, 1, ErrChecksum, 0},
		{"checksum differs from the lease", plain, 7, wrongCRC, 0, ErrChecksum, 0},
		{"size differs from the lease", plain, 7, wrongSize, 1, ErrFrame, 0},
		{"unknown lease", plain, 8, w, 0, nil, StatusNoLease},
		{"index out of range", plain, 7, []Want{{Index: 5, Size: 4}}, 0, nil, StatusBadIndex},
	} {
		got, err := fetch(t, tc.addr, tc.lease, tc.w)
		n := 0
		for _, g := range got {
			if g != nil {
				if !bytes.Equal(g, src.chunks[n]) {
					t.Errorf("%s: delivered wrong bytes for chunk %d", tc.name, n)
				}
				n++
			}
		}
		var ce *ChunkError
		switch {
		case err == nil:
			t.Errorf("%s: no error", tc.name)
		case tc.is != nil && !errors.Is(err, tc.is):
			t.Errorf("%s: %v, want %v", tc.name, err, tc.is)
		case tc.is == nil && (!errors.As(err, &ce) || ce.Status != tc.status):
			t.Errorf("%s: %v, want status %s", tc.name, err, tc.status)
		case n != tc.delivered:
			t.Errorf("%s: delivered %d chunks, want %d", tc.name, n, tc.delivered)
		}
	}
}

// blockSource holds every read until released, to fill the server's budget.
type blockSource struct {
	mapSource
	hold chan struct{}
}

func (b blockSource) ReadChunk(lease uint64, i uint32, buf []byte) ([]byte, uint32, Status) {
	<-b.hold
	return b.mapSource.ReadChunk(lease, i, buf)
}

func TestBudgetAnswersBusy(t *testing.T) {
	src := blockSource{mapSource{[][]byte{[]byte("x")}}, make(chan struct{})}
	// One chunk buffer in the budget: the second transfer waits BusyWait, then is refused.
	s, addr := serve(t, src, ServerConfig{MaxChunk: 1024, MaxInflightBytes: 1024, BusyWait: 20 * time.Millisecond})
	first := make(chan error, 1)
	go func() { _, err := fetch(t, addr, 7, wants(src.chunks)); first <- err }()
	for s.Stats().Conns == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond) // let the first transfer take the buffer
	_, err := fetch(t, addr, 7, wants(src.chunks))
	var ce *ChunkError
	if !errors.As(err, &ce) || ce.Status != StatusBusy {
		t.Fatalf("second transfer: %v, want busy", err)
	}
	close(src.hold)
	if err := <-first; err != nil {
		t.Fatalf("first transfer: %v", err)
	}
}

func TestCloseMidTransferIsAShortRead(t *testing.T) {
	src := blockSource{mapSource{[][]byte{[]byte("x")}}, make(chan struct{})}
	s, addr := serve(t, src, ServerConfig{MaxChunk: 1024})
	done := make(chan error, 1)
	go func() { _, err := fetch(t, addr, 7, wants(src.chunks)); done <- err }()
	for s.Stats().Conns == 0 {
		time.Sleep(time.Millisecond)
	}
	go s.Close()
	time.Sleep(10 * time.Millisecond)
	close(src.hold)
	if err := <-done; err == nil {
		t.Fatal("fetch from a closed server succeeded")
	}
}

func TestMaxConns(t *testing.T) {
	_, addr := serve(t, mapSource{}, ServerConfig{MaxChunk: 1024, MaxConns: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c1, err := Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	if c2, err := Dial(ctx, addr); err == nil {
		c2.Close()
		t.Fatal("a second connection beyond MaxConns completed its handshake")
	}
}

func TestHandshakeRefusesStrangers(t *testing.T) {
	s, addr := serve(t, mapSource{}, ServerConfig{MaxChunk: 1024})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, _ := c.Read(make([]byte, 16)); n != 0 {
		t.Fatalf("server answered %d bytes to a non-rbctl hello", n)
	}
	if s.Stats().BadFrames != 1 {
		t.Fatalf("bad frames %d, want 1", s.Stats().BadFrames)
	}
}

// watchSource is mapSource that reports each ReadChunk's index on reads.
type watchSource struct {
	mapSource
	reads chan uint32
}

func (w watchSource) ReadChunk(lease uint64, i uint32, buf []byte) ([]byte, uint32, Status) {
	w.reads <- i
	return w.mapSource.ReadChunk(lease, i, buf)
}

// TestReadAhead: with room for two chunk buffers in the budget, the server reads the next
// chunk while the one before is still being written (a client that reads nothing leaves a
// large chunk's write blocked, and the second read happens anyway); with room for one it
// reads only after the write. Either way the client gets every chunk in order, intact, and
// a request afterwards finds the whole budget free again.
func TestReadAhead(t *testing.T) {
	const big = 8 << 20 // more than loopback's socket buffers hold
	chunks := [][]byte{bytes.Repeat([]byte{1}, big), []byte("small"), bytes.Repeat([]byte{3}, 100<<10)}
	for _, tc := range []struct {
		budget int64
		ahead  bool
	}{{2 * big, true}, {big, false}} {
		src := watchSource{mapSource{chunks}, make(chan uint32, 64)} // never full here
		_, addr := serve(t, src, ServerConfig{MaxChunk: big, MaxInflightBytes: tc.budget, BusyWait: time.Second})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := Dial(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Send(ctx, 7, 0, []uint32{0, 1, 2}); err != nil {
			t.Fatal(err)
		}
		if i := <-src.reads; i != 0 {
			t.Fatalf("first read of chunk %d", i)
		}
		select {
		case i := <-src.reads:
			if !tc.ahead {
				t.Fatalf("budget %d: chunk %d read while chunk 0 could not be written", tc.budget, i)
			}
		case <-time.After(300 * time.Millisecond):
			if tc.ahead {
				t.Fatalf("budget %d: chunk 1 not read ahead while chunk 0 was being written", tc.budget)
			}
		}
		frames, err := c.ReceiveAll(ctx, []uint32{0, 1, 2}, big)
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range frames {
			if f.Status != StatusOK || !bytes.Equal(f.Payload, chunks[i]) {
				t.Fatalf("budget %d: chunk %d: status %v, %d bytes", tc.budget, i, f.Status, len(f.Payload))
			}
		}
		c.Close()
		// A client that leaves mid-answer: the server's reader stops, both buffers return.
		c, err = Dial(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Send(ctx, 7, 0, []uint32{0, 0, 0, 0}); err != nil {
			t.Fatal(err)
		}
		c.Close()
		got, err := fetch(t, addr, 7, wants(chunks))
		if err != nil || !bytes.Equal(got[2], chunks[2]) {
			t.Fatalf("budget %d: fetch after a client left: %v", tc.budget, err)
		}
		cancel()
	}
}
