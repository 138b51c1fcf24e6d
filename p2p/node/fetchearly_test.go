package node

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rbctl/rbctl/engine"
)

// getPeer gets keys i.. on n and checks each came from a peer with its bytes.
func getPeer(t *testing.T, n *Node, size int, idx ...int) []Result {
	t.Helper()
	ks := make([]engine.Key, len(idx))
	for j, i := range idx {
		ks[j] = keyN(i)
	}
	res, err := n.Get(context.Background(), ks, false)
	if err != nil {
		t.Fatal(err)
	}
	for j, r := range res {
		if r.Source != Peer || !bytes.Equal(r.Payload, payloadN(idx[j], size)) {
			t.Fatalf("key %d: source %d, %d bytes", idx[j], r.Source, len(r.Payload))
		}
	}
	return res
}

// The second fetch from a peer goes on the pooled data connection before its lease
// (fetchearly.go): the right bytes, one data-plane request and one lookup each, and the
// data plane releases every lease (no Unlock call), pins and all.
func TestEarlyFetchReleasesOnTheDataPlane(t *testing.T) {
	ea := newEngine(t, nil)
	oa := fastOptions("a", nil)
	oa.NoDataLookups = true // the early path, not a lookup request (datalookup_test.go)
	a := startNode(t, ea, oa)
	ob := fastOptions("b", NewStaticDirectory(a.Peer()))
	ob.FetchOnly = true // every Get fetches
	b := startNode(t, newEngine(t, nil), ob)
	for i := range 4 {
		if _, err := a.Put([]engine.Key{keyN(i)}, [][]byte{payloadN(i, 3000+i)}); err != nil {
			t.Fatal(err)
		}
	}
	getPeer(t, b, 3000, 0) // dials: lookup, then the pull with FlagRelease
	for range 3 {          // the pooled connection: the pull first
		getPeer(t, b, 3001, 1)
	}
	res, err := b.Get(context.Background(), []engine.Key{keyN(2), keyN(3), keyN(99), keyN(1)}, false)
	if err != nil {
		t.Fatal(err)
	}
	for j, want := range []int{2, 3} {
		if !bytes.Equal(res[j].Payload, payloadN(want, 3000+want)) {
			t.Fatalf("batch key %d: %d bytes", want, len(res[j].Payload))
		}
	}
	if res[2].Source != Miss || res[3].Source != Miss { // the lease is the leading prefix
		t.Fatalf("after a missing key: %d %d", res[2].Source, res[3].Source)
	}
	eventually(t, "a's leases all released", func() bool { return a.Stats().Counters["leases_active"] == 0 })
	sa := a.Stats().Counters
	if sa["leases_released"] != 5 || a.leases.releasedData.Load() != 5 || sa["leases_expired"] != 0 {
		t.Fatalf("a released %d leases, %d on the data plane: %v", sa["leases_released"], a.leases.releasedData.Load(), sa)
	}
	if st := a.data.Stats(); st.Requests != 5 || st.BadFrames != 0 || st.Lookups != 0 {
		t.Fatalf("a's data plane: %+v", st)
	}
	for i := range 4 {
		if locks(ea, i) != 0 {
			t.Fatalf("key %d still pinned", i)
		}
	}
	if s := b.Stats().Counters; s["peer_lookups"] != 5 || s["peer_errors"] != 0 || s["unlock_failed"] != 0 {
		t.Fatalf("b's counters: %v", s)
	}
}

// An early request whose lookup finds nothing is answered "no such lease" at once (the
// proposal is gone) and leaves the connection in the pool; a corrupting holder is a
// counted miss on the early path too, nothing stored, its pins released.
func TestEarlyFetchMissAndCorruption(t *testing.T) {
	var corrupt atomic.Bool
	oa := fastOptions("a", nil)
	oa.NoDataLookups = true // the early path (datalookup_test.go has the lookup's)
	oa.TamperData = func(_ uint32, p []byte) {
		if corrupt.Load() {
			p[len(p)/2] ^= 1
		}
	}
	ea := newEngine(t, nil)
	a := startNode(t, ea, oa)
	eb := newEngine(t, nil)
	b := startNode(t, eb, fastOptions("b", NewStaticDirectory(a.Peer())))
	for i := range 3 {
		if _, err := a.Put([]engine.Key{keyN(i)}, [][]byte{payloadN(i, 5000)}); err != nil {
			t.Fatal(err)
		}
	}
	getPeer(t, b, 5000, 0) // a pooled connection now
	res, _ := b.Get(context.Background(), []engine.Key{keyN(50)}, false)
	if res[0].Source != Miss {
		t.Fatalf("absent key: %d", res[0].Source)
	}
	r, _ := b.peers.get(a.Peer())
	r.mu.Lock()
	pooled := len(r.idle)
	r.mu.Unlock()
	if pooled != 1 {
		t.Fatalf("%d pooled connections after an empty lookup, want 1", pooled)
	}
	getPeer(t, b, 5000, 1) // and it is used

	corrupt.Store(true)
	res, _ = b.Get(context.Background(), []engine.Key{keyN(2)}, false)
	if res[0].Source != Miss || res[0].Payload != nil {
		t.Fatalf("through a corrupting peer: %d, %d bytes", res[0].Source, len(res[0].Payload))
	}
	if _, ok := eb.Lookup(keyN(2)); ok {
		t.Fatal("b stored a corrupted chunk")
	}
	if s := b.Stats().Counters; s["peer_checksum_errors"] != 1 || s["peer_lookup_empty"] != 1 {
		t.Fatalf("b's counters: %v", s)
	}
	eventually(t, "a's pins released after the failed fetch", func() bool { return locks(ea, 2) == 0 && a.leases.active() == 0 })
}

// A proposed id is taken unless a live or recent lease has it; a refused or clashing
// proposal is gone at once for a waiter, a granted one wakes it.
func TestLeaseProposals(t *testing.T) {
	e := newEngine(t, nil)
	a := startNode(t, e, fastOptions("a", nil))
	for i := range 2 {
		if _, err := a.Put([]engine.Key{keyN(i)}, [][]byte{payloadN(i, 100)}); err != nil {
			t.Fatal(err)
		}
	}
	lt := a.leases
	got := make(chan bool, 1)
	go func() { got <- lt.await(77, time.Minute) }()
	eventually(t, "the waiter registered", func() bool { lt.mu.Lock(); defer lt.mu.Unlock(); return lt.waits[77] != nil })
	l := lt.lockAs([]engine.Key{keyN(0)}, time.Minute, "x", 77)
	if l == nil || l.id != 77 || !<-got {
		t.Fatalf("proposal 77: %+v", l)
	}
	if c := lt.lockAs([]engine.Key{keyN(1)}, time.Minute, "x", 77); c == nil || c.id == 77 {
		t.Fatalf("a live id was given again: %+v", c)
	}
	lt.unlock(77, "")
	if lt.await(77, time.Minute) { // released: gone, answered at once
		t.Fatal("a released lease awaited as live")
	}
	if lt.lockAs([]engine.Key{keyN(9)}, time.Minute, "x", 78) != nil || lt.await(78, time.Minute) {
		t.Fatal("a proposal that found nothing awaited as live")
	}
	if c := lt.lockAs([]engine.Key{keyN(0)}, time.Minute, "x", 77); c == nil || c.id == 77 {
		t.Fatalf("a recently released id was given again: %+v", c)
	}
}

// A Get that waits for another's fetch of the same key gets a copy of its own: the lead's
// caller may recycle its payload, and the bytes the waiter holds stay.
func TestFlightWaitersGetTheirOwnCopy(t *testing.T) {
	f := newFlights()
	keys := []engine.Key{keyN(1)}
	lead, _ := f.claim(keys, []int{0}, nil)
	_, wait := f.claim(keys, []int{0}, nil)
	p := payloadN(1, 1000)
	out := []Result{{Source: Peer, Payload: p, Peer: "a"}}
	f.finish(keys, lead, out, false)
	w := wait[0]
	<-w.fl.done
	mine := w.w.copy
	clear(p) // the lead's caller recycled its payload and it was read into again
	if !bytes.Equal(mine, payloadN(1, 1000)) {
		t.Fatal("the waiter's bytes changed with the lead's buffer")
	}
}

// A waiter with an alloc (a RESP GET's lent value buffer) gets its copy in that buffer, cut
// to the payload's length; one whose alloc gives too short a buffer gets a heap copy.
func TestFlightWaitersCopyIntoTheirAlloc(t *testing.T) {
	f := newFlights()
	keys := []engine.Key{keyN(2)}
	lent := make([]byte, 4096)
	lead, _ := f.claim(keys, []int{0}, nil)
	_, waitA := f.claim(keys, []int{0}, func(int) []byte { return lent })
	_, waitB := f.claim(keys, []int{0}, func(int) []byte { return make([]byte, 10) })
	p := payloadN(2, 1000)
	f.finish(keys, lead, []Result{{Source: Peer, Payload: p, Peer: "a"}}, false)
	a, b := waitA[0].w.copy, waitB[0].w.copy
	if &a[0] != &lent[0] || len(a) != len(p) || !bytes.Equal(a, p) {
		t.Fatalf("the copy is not the waiter's lent buffer cut to %d bytes (len %d)", len(p), len(a))
	}
	if !bytes.Equal(b, p) || &b[0] == &p[0] {
		t.Fatal("a waiter whose alloc was too short got no copy of its own")
	}
}

// A waiter that left (its context ended) before the flight finished has nothing written into
// its buffer afterwards: its GET has returned, and its connection may already have lent that
// buffer to the next GET. One that leaves after the flight finished takes its copy.
func TestFlightWaiterThatLeftGetsNothing(t *testing.T) {
	f := newFlights()
	keys := []engine.Key{keyN(3)}
	called := 0
	lead, _ := f.claim(keys, []int{0}, nil)
	_, wait := f.claim(keys, []int{0}, func(n int) []byte { called++; return make([]byte, n) })
	w := wait[0]
	if !w.fl.leave(w.w) {
		t.Fatal("leave before the flight finished reported the flight done")
	}
	f.finish(keys, lead, []Result{{Source: Peer, Payload: payloadN(3, 100), Peer: "a"}}, false)
	if called != 0 || w.w.copy != nil {
		t.Fatalf("the lead wrote for a waiter that had left (alloc called %d times)", called)
	}

	lead, _ = f.claim(keys, []int{0}, nil)
	_, wait = f.claim(keys, []int{0}, nil)
	w = wait[0]
	f.finish(keys, lead, []Result{{Source: Peer, Payload: payloadN(3, 100), Peer: "a"}}, false)
	if w.fl.leave(w.w) || !bytes.Equal(w.w.copy, payloadN(3, 100)) {
		t.Fatal("a waiter leaving after the flight finished lost its copy")
	}
}

// Recycled payloads are read into again, within the pool's bound.
func TestRecycle(t *testing.T) {
	p := newPayloadPool(3000)
	a, b := make([]byte, 1000), make([]byte, 2500)
	p.put(a, 4096)
	p.put(b, 4096) // over the bound: dropped
	p.put(make([]byte, 8192), 4096)
	if got := p.get(900); &got[0] != &a[0] || len(got) != 900 {
		t.Fatal("a recycled buffer was not reused")
	}
	if got := p.get(900); len(got) != 900 || p.bytes != 0 {
		t.Fatalf("pool holds %d bytes", p.bytes)
	}
}
