package engine_test

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/placement"
)

// startingMem is a Mem that runs batches in the background (blockdev.Starter), each on its
// own goroutine, and records the batches it was given.
type startingMem struct {
	*blockdev.Mem
	mu      sync.Mutex
	started [][]blockdev.Op // copies of what each Start was given
}

type memRun struct {
	done chan struct{}
	err  error
}

func (r *memRun) Wait() error { <-r.done; return r.err }

func (m *startingMem) Start(ops []blockdev.Op) blockdev.Started {
	m.mu.Lock()
	m.started = append(m.started, append([]blockdev.Op(nil), ops...))
	m.mu.Unlock()
	r := &memRun{done: make(chan struct{})}
	go func() {
		r.err = m.Mem.Submit(ops)
		close(r.done)
	}()
	return r
}

func (m *startingMem) takeStarted() [][]blockdev.Op {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.started
	m.started = nil
	return s
}

// checkChunks: the batches hold n ops in all, each but the last at least 1 MiB and none
// more than one op past it (the engine starts a chunk as soon as it reaches 1 MiB).
func checkChunks(t *testing.T, what string, got [][]blockdev.Op, n int) {
	t.Helper()
	total := 0
	for i, c := range got {
		total += len(c)
		size := 0
		for _, op := range c {
			size += op.Len()
		}
		last := c[len(c)-1].Len()
		if i < len(got)-1 && (size < 1<<20 || size-last >= 1<<20) {
			t.Errorf("%s chunk %d: %d ops, %d bytes; want the first ops to reach 1 MiB", what, i, len(c), size)
		}
	}
	if total != n || len(got) < 2 {
		t.Fatalf("%s: %d chunks holding %d ops; want %d ops in more than one chunk", what, len(got), total, n)
	}
}

// TestChunkedPutsAndLoads: on a device that can run a batch in the background, a put batch
// is started chunk by chunk as its payloads are checksummed and a load batch is verified
// chunk by chunk; the bytes stored and read back, and the checksum check, are as with
// Submit.
func TestChunkedPutsAndLoads(t *testing.T) {
	dev := &startingMem{Mem: blockdev.NewMem(64<<20, 0)}
	cfg := zcConfig()
	e, err := engine.Format(dev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	const n = 40
	lens := make([]int, n)
	for i := range lens {
		lens[i] = 60 << 10 // whole blocks: written from the caller's memory (vectored)
	}
	lens[7] = 60<<10 - 100 // copied behind its header
	keys, payloads := zcKeys(n), zcPayloads(t, lens)
	dev.takeStarted() // format
	res, err := e.PutMany(keys, payloads)
	if err != nil || len(res.Stored) != n {
		t.Fatalf("PutMany: %d of %d stored, %v", len(res.Stored), n, err)
	}
	writes := dev.takeStarted()
	checkChunks(t, "put", writes, n)

	bufs := zcPayloads(t, lens) // aligned: read straight into them
	for _, b := range bufs {
		clear(b)
	}
	ok, err := e.LoadManyInto(keys, bufs)
	if err != nil {
		t.Fatal(err)
	}
	checkChunks(t, "load", dev.takeStarted(), n)
	for i := range keys {
		if !ok[i] || !bytes.Equal(bufs[i][:lens[i]], payloads[i]) {
			t.Fatalf("key %d: loaded %v, bytes equal %v", i, ok[i], bytes.Equal(bufs[i][:lens[i]], payloads[i]))
		}
	}

	// A damaged payload in the last chunk fails its own load only.
	last := writes[len(writes)-1]
	bad := last[len(last)-1]
	junk := make([]byte, 4096)
	for i := range junk {
		junk[i] = 0xa5
	}
	if err := dev.Mem.Submit([]blockdev.Op{{Write: true, Off: bad.Off + int64(cfg.HeaderBytes), Buf: junk, Handle: placement.None}}); err != nil {
		t.Fatal(err)
	}
	ok, err = e.LoadManyInto(keys, bufs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		if ok[i] != (i != n-1) {
			t.Fatalf("after damaging key %d's payload: key %d loaded %v", n-1, i, ok[i])
		}
	}
	if got := e.Stats().ChecksumErrors; got != 1 {
		t.Fatalf("ChecksumErrors = %d, want 1", got)
	}
}

// faultyStarter is a startingMem whose Start fails chosen ops: the failWrite-th write op it
// is given (counted over every Start, from 0; -1: none) and every read at failReadOff (-1:
// none). A failed op gets an error and is not performed; Wait returns the first error.
type faultyStarter struct {
	startingMem
	failWrite   int
	failReadOff int64
	writes      int // write ops seen
}

var errInjected = errors.New("injected device error")

func (m *faultyStarter) Start(ops []blockdev.Op) blockdev.Started {
	m.mu.Lock()
	m.started = append(m.started, append([]blockdev.Op(nil), ops...))
	bad := make([]bool, len(ops))
	for i, op := range ops {
		if op.Write {
			bad[i] = m.writes == m.failWrite
			m.writes++
		} else {
			bad[i] = op.Off == m.failReadOff
		}
	}
	m.mu.Unlock()
	r := &memRun{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for i := range ops {
			if bad[i] {
				ops[i].N, ops[i].Err = 0, errInjected
			} else if err := m.Mem.Submit(ops[i : i+1]); err == nil {
				continue
			}
			if r.err == nil {
				r.err = ops[i].Err
			}
		}
	}()
	return r
}

// TestChunkedErrorsMidStream: a write that fails in the second started chunk of a put
// batch fails that key's put alone (the rest are stored and load back), and a read that
// fails in the first chunk of a load batch fails that key's load alone while the later
// chunks are still verified; neither counts as a checksum error.
func TestChunkedErrorsMidStream(t *testing.T) {
	const n, bad = 40, 20
	dev := &faultyStarter{startingMem: startingMem{Mem: blockdev.NewMem(64<<20, 0)}, failWrite: -1, failReadOff: -1}
	cfg := zcConfig()
	e, err := engine.Format(dev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	lens := make([]int, n)
	for i := range lens {
		lens[i] = 60 << 10
	}
	keys, payloads := zcKeys(n), zcPayloads(t, lens)
	dev.takeStarted()
	dev.mu.Lock()
	dev.failWrite = dev.writes + bad // the put's writes are started in key order
	dev.mu.Unlock()
	res, err := e.PutMany(keys, payloads)
	if !errors.Is(err, errInjected) {
		t.Fatalf("PutMany error %v, want the injected one", err)
	}
	if len(res.Stored) != n-1 || res.Results[bad] {
		t.Fatalf("PutMany stored %d of %d (key %d: %v); want all but key %d", len(res.Stored), n, bad, res.Results[bad], bad)
	}
	writes := dev.takeStarted()
	checkChunks(t, "put", writes, n)
	if len(writes[0]) > bad {
		t.Fatalf("the failed write (op %d) is in the first chunk of %d ops; want it in a later one", bad, len(writes[0]))
	}

	bufs := zcPayloads(t, lens)
	check := func(what string, ok []bool, want func(i int) bool) {
		t.Helper()
		for i := range keys {
			if ok[i] != want(i) {
				t.Fatalf("%s: key %d loaded %v, want %v", what, i, ok[i], want(i))
			}
			if ok[i] && !bytes.Equal(bufs[i][:lens[i]], payloads[i]) {
				t.Fatalf("%s: key %d loaded other bytes", what, i)
			}
		}
	}
	ok, err := e.LoadManyInto(keys, bufs)
	if err != nil {
		t.Fatal(err)
	}
	check("after the failed put", ok, func(i int) bool { return i != bad })

	// The read of key 3's payload (first chunk) fails.
	const badRead = 3
	dev.mu.Lock()
	dev.failReadOff = writes[0][badRead].Off + int64(cfg.HeaderBytes)
	dev.mu.Unlock()
	for _, b := range bufs {
		clear(b)
	}
	ok, err = e.LoadManyInto(keys, bufs)
	if !errors.Is(err, errInjected) {
		t.Fatalf("LoadManyInto error %v, want the injected one", err)
	}
	check("with a failed read", ok, func(i int) bool { return i != bad && i != badRead })
	if loads := dev.takeStarted(); len(loads) < 2 {
		t.Fatalf("the load ran as %d chunk(s); want the failed read followed by more chunks", len(loads))
	}
	if got := e.Stats().ChecksumErrors; got != 0 {
		t.Fatalf("ChecksumErrors = %d after device errors, want 0", got)
	}
}
