package node

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/p2p"
	"github.com/rbctl/rbctl/p2p/p2ppb"
	"github.com/rbctl/rbctl/placement"
)

func TestGetOnBHitsViaPeer(t *testing.T) {
	ea := newEngine(t, nil)
	a := startNode(t, ea, fastOptions("a", nil))
	eb := newEngine(t, nil)
	b := startNode(t, eb, fastOptions("b", NewStaticDirectory(a.Peer())))
	ca, cb := dial(t, a), dial(t, b)

	for i := range 3 {
		put(t, ca, i, chunkBytes-i*1000)
	}
	if ch := get(t, cb, 0); ch.Source != p2ppb.Source_SOURCE_PEER || ch.Peer != "a" || len(ch.Payload) != chunkBytes {
		t.Fatalf("first get on b: %s from %q, %d bytes", ch.Source, ch.Peer, len(ch.Payload))
	}
	if ch := get(t, cb, 0); ch.Source != p2ppb.Source_SOURCE_LOCAL {
		t.Fatalf("second get on b: %s, want local (the fetch stores the chunk)", ch.Source)
	}
	if ch := get(t, cb, 99); ch.Source != p2ppb.Source_SOURCE_MISS {
		t.Fatalf("absent key: %s", ch.Source)
	}
	eventually(t, "a's pins released after the fetch", func() bool { return locks(ea, 0) == 0 })

	// A batch: keys 1 and 2 come from a in one lease.
	res, err := b.Get(context.Background(), []keyT{keyN(1), keyN(2)}, false)
	if err != nil {
		t.Fatal(err)
	}
	for j, r := range res {
		if r.Source != Peer || string(r.Payload) != string(payloadN(j+1, chunkBytes-(j+1)*1000)) {
			t.Fatalf("batch key %d: source %d, %d bytes", j+1, r.Source, len(r.Payload))
		}
	}
	ents, _ := b.List("", 0)
	if len(ents) != 3 || !ents[0].Replica {
		t.Fatalf("b lists %d entries (replica %v), want 3 replicas", len(ents), len(ents) > 0 && ents[0].Replica)
	}
	s := b.Stats().Counters
	if s["peer_hits"] != 3 || s["local_hits"] != 1 || s["misses"] != 1 || s["replicas_stored"] != 3 || s["peer_bytes_in"] == 0 {
		t.Fatalf("b's counters: %v", s)
	}
	eventually(t, "a's leases all released", func() bool { return a.Stats().Counters["leases_active"] == 0 })
	if sa := a.Stats().Counters; sa["served_chunks"] != 3 || sa["leases_released"] != 2 {
		t.Fatalf("a's counters: %v", sa)
	}
}

func TestCorruptingPeerIsAMiss(t *testing.T) {
	oa := fastOptions("a", nil)
	oa.TamperData = func(_ uint32, p []byte) { p[len(p)/2] ^= 1 }
	ea := newEngine(t, nil)
	a := startNode(t, ea, oa)
	eb := newEngine(t, nil)
	b := startNode(t, eb, fastOptions("b", NewStaticDirectory(a.Peer())))
	put(t, dial(t, a), 1, 5000)
	if ch := get(t, dial(t, b), 1); ch.Source != p2ppb.Source_SOURCE_MISS || ch.Payload != nil {
		t.Fatalf("get through a corrupting peer: %s with %d bytes", ch.Source, len(ch.Payload))
	}
	if _, ok := eb.Lookup(keyN(1)); ok {
		t.Fatal("b stored a corrupted chunk")
	}
	if s := b.Stats().Counters; s["peer_checksum_errors"] != 1 || s["misses"] != 1 {
		t.Fatalf("b's counters: %v", s)
	}
	eventually(t, "a's pins released after the failed fetch", func() bool { return locks(ea, 1) == 0 })
}

// TestCorruptOnHolderDeviceIsAMiss: the holder sends a payload with its stored CRC without
// checking it (engine.LoadOptions.Unchecked), so bytes that rotted on the holder's device
// are refused by the fetcher's end-to-end check: a miss, nothing stored, counted.
func TestCorruptOnHolderDeviceIsAMiss(t *testing.T) {
	ea := newEngine(t, nil)
	a := startNode(t, ea, fastOptions("a", nil))
	eb := newEngine(t, nil)
	b := startNode(t, eb, fastOptions("b", NewStaticDirectory(a.Peer())))
	put(t, dial(t, a), 1, 5000)
	m, ok := ea.Lookup(keyN(1))
	if !ok {
		t.Fatal("a does not hold the chunk")
	}
	dev, lb := ea.Device(), ea.Device().Info().LogicalBlock
	blk, err := blockdev.Alloc(lb)
	if err != nil {
		t.Fatal(err)
	}
	defer blockdev.Free(blk)
	off := m.Offset + int64(ea.Layout().HeaderBytes) // the payload's first block
	if err := dev.Submit([]blockdev.Op{{Off: off, Buf: blk, Handle: placement.None}}); err != nil {
		t.Fatal(err)
	}
	blk[7] ^= 0x40
	if err := dev.Submit([]blockdev.Op{{Write: true, Off: off, Buf: blk, Handle: placement.None}}); err != nil {
		t.Fatal(err)
	}
	if ch := get(t, dial(t, b), 1); ch.Source != p2ppb.Source_SOURCE_MISS || ch.Payload != nil {
		t.Fatalf("get of a chunk corrupt on the holder's device: %s with %d bytes", ch.Source, len(ch.Payload))
	}
	if _, ok := eb.Lookup(keyN(1)); ok {
		t.Fatal("b stored the corrupt chunk")
	}
	if s := b.Stats().Counters; s["peer_checksum_errors"] != 1 || s["misses"] != 1 {
		t.Fatalf("b's counters: %v", s)
	}
	eventually(t, "a's pins released after the failed fetch", func() bool { return locks(ea, 1) == 0 })
}

func TestPeerKilledMidTransferThenReturns(t *testing.T) {
	inHook, release := make(chan struct{}, 1), make(chan struct{})
	var once sync.Once
	oa := fastOptions("a", nil)
	oa.TamperData = func(uint32, []byte) {
		once.Do(func() { inHook <- struct{}{}; <-release }) // the first transfer stalls
	}
	ea := newEngine(t, nil)
	a, err := New(ea, oa)
	if err != nil {
		t.Fatal(err)
	}
	ctl, data := listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0")
	a.Serve(ctl, data)
	peer := a.Peer()
	put(t, dial(t, a), 1, chunkBytes)

	eb := newEngine(t, nil)
	b := startNode(t, eb, fastOptions("b", NewStaticDirectory(peer)))
	cb := dial(t, b)
	got := make(chan *p2ppb.Chunk, 1)
	go func() { got <- get(t, cb, 1) }()
	<-inHook
	closed := make(chan struct{})
	go func() { a.Close(); close(closed) }() // drops every connection of a
	if ch := <-got; ch.Source != p2ppb.Source_SOURCE_MISS {
		t.Fatalf("get while the peer dies: %s", ch.Source)
	}
	close(release)
	<-closed
	if locks(ea, 1) != 0 {
		t.Fatal("a closed with its lease still pinned")
	}
	// b keeps serving its own cache.
	put(t, cb, 2, 100)
	if ch := get(t, cb, 2); ch.Source != p2ppb.Source_SOURCE_LOCAL {
		t.Fatalf("b after the peer died: %s", ch.Source)
	}
	// a returns on the same addresses: b uses it again once its backoff passes.
	a2 := startNodeOn(t, ea, fastOptions("a", nil), peer)
	_ = a2
	eventually(t, "b fetches from the returning peer", func() bool {
		return get(t, cb, 1).Source == p2ppb.Source_SOURCE_PEER
	})
	if s := b.Stats().Counters; s["peer_refused"]+s["peer_timeouts"]+s["peer_errors"] == 0 {
		t.Fatalf("the dead peer's failures were not counted: %v", s)
	}
}

func startNodeOn(t *testing.T, e engineT, o Config, p p2p.Peer) *Node {
	t.Helper()
	n, err := New(e, o)
	if err != nil {
		t.Fatal(err)
	}
	n.Serve(listen(t, p.Control), listen(t, p.Data))
	t.Cleanup(func() { n.Close() })
	return n
}

func TestRequesterDiesLeaseExpires(t *testing.T) {
	ea := newEngine(t, nil)
	a := startNode(t, ea, fastOptions("a", nil))
	put(t, dial(t, a), 1, 100)
	put(t, dial(t, a), 2, 100)
	cc := rawConn(t, a.Peer().Control)
	peer := p2ppb.NewPeerClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	keys := []*p2ppb.ObjectKey{wireKeyN(1), wireKeyN(2), wireKeyN(3), wireKeyN(1)}
	r, err := peer.LookupAndLock(ctx, &p2ppb.LookupAndLockRequest{Keys: keys, LeaseMs: 50})
	if err != nil {
		t.Fatal(err)
	}
	if r.LeaseId == 0 || len(r.Hits) != 2 || r.Hits[0].Size != 100 || !r.Hits[0].HasChecksum {
		t.Fatalf("lookup: lease %x, hits %v (want the leading 2)", r.LeaseId, r.Hits)
	}
	if locks(ea, 1) != 1 || locks(ea, 2) != 1 {
		t.Fatalf("pins after lookup: %d %d", locks(ea, 1), locks(ea, 2))
	}
	// The requester never unlocks: the lease expires and the pins go.
	eventually(t, "expired lease releases its pins", func() bool { return locks(ea, 1) == 0 && locks(ea, 2) == 0 })
	if s := a.Stats().Counters; s["leases_expired"] != 1 || s["leases_active"] != 0 {
		t.Fatalf("counters: %v", s)
	}
	if u, err := peer.Unlock(ctx, &p2ppb.UnlockRequest{LeaseId: r.LeaseId}); err != nil || u.Released {
		t.Fatalf("unlock after expiry: %v, %v", u, err)
	}
	// An explicit unlock releases at once.
	r, err = peer.LookupAndLock(ctx, &p2ppb.LookupAndLockRequest{Keys: keys[:1], LeaseMs: 60000})
	if err != nil || locks(ea, 1) != 1 {
		t.Fatalf("second lookup: %v, pins %d", err, locks(ea, 1))
	}
	if u, err := peer.Unlock(ctx, &p2ppb.UnlockRequest{LeaseId: r.LeaseId}); err != nil || !u.Released || locks(ea, 1) != 0 {
		t.Fatalf("unlock: %v, %v, pins %d", u, err, locks(ea, 1))
	}
	// A pinned key refuses a plain delete.
	r, _ = peer.LookupAndLock(ctx, &p2ppb.LookupAndLockRequest{Keys: keys[:1], LeaseMs: 60000})
	if del := a.Delete([]keyT{keyN(1)}, false); del[0] {
		t.Fatal("deleted a key pinned by a lease")
	}
	a.Close()
	if locks(ea, 1) != 0 {
		t.Fatal("Close left a lease pinned")
	}
}

func TestDeadPeerIsAMissThenBackedOff(t *testing.T) {
	dead := listen(t, "127.0.0.1:0")
	addr := dead.Addr().String()
	dead.Close()
	o := fastOptions("b", NewStaticDirectory(p2p.Peer{Name: "gone", Control: addr, Data: addr}))
	o.BackoffBase, o.BackoffMax = time.Hour, time.Hour
	b := startNode(t, newEngine(t, nil), o)
	cb := dial(t, b)
	for range 2 {
		if ch := get(t, cb, 1); ch.Source != p2ppb.Source_SOURCE_MISS {
			t.Fatalf("dead peer: %s", ch.Source)
		}
	}
	s := b.Stats().Counters
	if s["peer_lookups"] != 1 || s["peer_backoff_skips"] != 1 || s["misses"] != 2 {
		t.Fatalf("counters: %v", s)
	}
}

func TestReplicaHandle(t *testing.T) {
	ea := newEngine(t, nil)
	a := startNode(t, ea, fastOptions("a", nil))
	ob := fastOptions("b", NewStaticDirectory(a.Peer()))
	ob.SeparateReplicas, ob.ReplicaHandle = true, 5
	eb := newEngine(t, nil)
	b := startNode(t, eb, ob)
	put(t, dial(t, a), 1, 100)
	cb := dial(t, b)
	put(t, cb, 2, 100)
	if ch := get(t, cb, 1); ch.Source != p2ppb.Source_SOURCE_PEER {
		t.Fatalf("get: %s", ch.Source)
	}
	m1, _ := eb.Lookup(keyN(1))
	m2, _ := eb.Lookup(keyN(2))
	if m1.Handle != 5 || m2.Handle != placement.None {
		t.Fatalf("replica written with handle %d, own put with %d; want 5 and none", m1.Handle, m2.Handle)
	}
	ob2 := fastOptions("c", nil)
	ob2.SeparateReplicas, ob2.ReplicaHandle = true, 300
	if _, err := New(newEngine(t, nil), ob2); err == nil {
		t.Fatal("a replica handle past the device's handles was accepted")
	}
}

// A value fetched from a peer is read into the caller's buffer (GetWith's alloc: a RESP
// GET's lent value buffer), on every fetch path (the first fetch dials; later ones find a
// pooled connection that takes lookups), and none of those buffers enters the node's pool.
func TestGetWithReadsFetchedChunksIntoTheCallersBuffer(t *testing.T) {
	ea := newEngine(t, nil)
	a := startNode(t, ea, fastOptions("a", nil))
	b := startNode(t, newEngine(t, nil), fastOptions("b", NewStaticDirectory(a.Peer())))
	ca := dial(t, a)
	const keys = 4
	for i := range keys {
		put(t, ca, i, chunkBytes-i*1000)
	}
	for i := range keys {
		mine := make([]byte, b.MaxPayload()+4096)
		calls := 0
		alloc := func(size int) []byte {
			calls++
			if calls > 1 || size > len(mine) {
				t.Errorf("key %d: alloc(%d) call %d", i, size, calls)
				return make([]byte, size)
			}
			return mine
		}
		res, err := b.GetWith(context.Background(), []keyT{keyN(i)}, false, alloc)
		if err != nil {
			t.Fatal(err)
		}
		r := res[0]
		if r.Source != Peer || !bytes.Equal(r.Payload, payloadN(i, chunkBytes-i*1000)) {
			t.Fatalf("key %d: source %d, %d bytes", i, r.Source, len(r.Payload))
		}
		if &r.Payload[0] != &mine[0] {
			t.Fatalf("key %d: fetched into a buffer of the node's, not the caller's", i)
		}
		clear(mine) // the caller takes its buffer back and reuses it
	}
	if p := b.peers.bufs; p.bytes != 0 || len(p.free) != 0 {
		t.Fatalf("the node's payload pool holds %d buffers (%d bytes) after fetches into the caller's", len(p.free), p.bytes)
	}
	// The replicas were written from the caller's buffer before GetWith returned.
	for i := range keys {
		res, err := b.Get(context.Background(), []keyT{keyN(i)}, true)
		if err != nil || res[0].Source != Local || !bytes.Equal(res[0].Payload, payloadN(i, chunkBytes-i*1000)) {
			t.Fatalf("key %d's replica: %v, source %d", i, err, res[0].Source)
		}
	}
	if s := b.Stats().Counters; s["peer_hits"] != keys || s["replicas_stored"] != keys {
		t.Fatalf("b's counters: %v", s)
	}
}

// Concurrent GetWith calls of one key only a peer holds: the one that leads the fetch reads
// it into its own buffer, and every one that waits for it gets its copy in its own buffer
// too (a RESP GET's lent value buffer), not on the heap; waiters whose context ends first
// get a miss and nothing written into their buffer after they return. With leadGivesUp the
// lead's own context ends before the slow holder answers: the waiters, whose contexts last,
// fetch the key again and still get it.
func TestSharedFetchWaitersCopyIntoTheirOwnBuffers(t *testing.T) {
	for _, leadGivesUp := range []bool{false, true} {
		t.Run(fmt.Sprintf("leadGivesUp=%v", leadGivesUp), func(t *testing.T) {
			sharedFetchWaiters(t, leadGivesUp)
		})
	}
}

// claimed says whether a fetch is in flight on n (a Get leads one).
func claimed(n *Node) bool {
	n.flights.mu.Lock()
	defer n.flights.mu.Unlock()
	return len(n.flights.m) > 0
}

func sharedFetchWaiters(t *testing.T, leadGivesUp bool) {
	_, b := slowHolderPair(t)
	const gets = 12
	leaving := func(g int) bool { // whose context ends while the holder is slow
		if leadGivesUp {
			return g == 0
		}
		return g >= 1 && g <= 3
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range gets {
		mine := make([]byte, b.MaxPayload()+4096)
		wg.Go(func() {
			ctx := context.Background()
			if leaving(g) {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
				defer cancel()
			}
			<-start
			for g > 0 && !claimed(b) { // after get 0 has claimed the key: waiters
				time.Sleep(time.Millisecond)
			}
			var mu sync.Mutex
			alloc := func(size int) []byte {
				mu.Lock()
				defer mu.Unlock()
				return mine
			}
			res, err := b.GetWith(ctx, []keyT{keyN(7)}, false, alloc)
			if err != nil {
				t.Errorf("get %d: %v", g, err)
				return
			}
			r := res[0]
			if r.Source == Miss {
				if !leaving(g) {
					t.Errorf("get %d: a miss without a deadline", g)
				}
				mu.Lock()
				clear(mine) // the caller reuses its buffer; no fetch may write into it later
				mu.Unlock()
				time.Sleep(500 * time.Millisecond)
				if !bytes.Equal(mine, make([]byte, len(mine))) {
					t.Errorf("get %d: its buffer was written after it returned with a miss", g)
				}
				return
			}
			if leaving(g) {
				t.Errorf("get %d: source %d after its context ended", g, r.Source)
			}
			if !bytes.Equal(r.Payload, payloadN(7, chunkBytes)) {
				t.Errorf("get %d: source %d, wrong bytes", g, r.Source)
			}
			if &r.Payload[0] != &mine[0] {
				t.Errorf("get %d (source %d): the chunk is not in the caller's buffer", g, r.Source)
			}
		})
	}
	close(start)
	wg.Wait()
	s := b.Stats().Counters
	if s["single_flight_waits"] < gets-1 {
		t.Fatalf("fewer than %d Gets waited for another's fetch: %v", gets-1, s)
	}
	if leadGivesUp && (s["peer_fetches_abandoned"] == 0 || s["peer_timeouts"] != 0 || s["peer_backoff_skips"] != 0) {
		t.Fatalf("the lead giving up was not counted apart, or backed the peer off: %v", s)
	}
}

// A chunk read and not delivered goes back to the node's pool only if the pool gave it.
func TestChunkAllocDropsOnlyPoolBuffers(t *testing.T) {
	pool := newPayloadPool(1 << 20)
	lent := make([]byte, 4096)
	mine := chunkAlloc{caller: func(int) []byte { return lent }, pool: pool}
	mine.drop(mine.get(4096), 4096)
	if pool.bytes != 0 {
		t.Fatal("a caller's buffer entered the node's pool")
	}
	ours := chunkAlloc{pool: pool}
	ours.drop(ours.get(4096), 4096)
	if pool.bytes != 4096 {
		t.Fatalf("pool holds %d bytes, want the dropped chunk's 4096", pool.bytes)
	}
}
