package node

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/engine/sharded"
	"github.com/rbctl/rbctl/p2p/client"
	"github.com/rbctl/rbctl/p2p/p2ppb"
)

// smallEngine formats an in-memory cache of exactly slots slots of 4 KiB payload.
func smallEngine(t testing.TB, slots int64) *engine.Engine {
	t.Helper()
	return memEngine(t, slots, 1<<20)
}

// memEngine formats an in-memory cache of exactly slots slots of 4 KiB payload with meta
// bytes of checkpoint area (a 1 MiB one holds about 5,000 of these tests' keys).
func memEngine(t testing.TB, slots, meta int64) *engine.Engine {
	t.Helper()
	cfg := engine.DefaultConfig()
	cfg.SlotBytes, cfg.MetaTotalBytes, cfg.Periodic, cfg.QueueDepth = 8192, meta, false, 8
	e, err := engine.Format(blockdev.NewMem(meta+slots*8192, 512), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if got := e.Layout().MaxSlots; got != slots {
		t.Fatalf("%d slots, want %d", got, slots)
	}
	return e
}

// A full node evicts and stores: 1,000 distinct puts into 256 slots, none refused, the
// newest all present with their bytes, each put beyond the capacity one eviction.
func TestFullNodeEvictsAndStores(t *testing.T) {
	e := smallEngine(t, 256)
	o := fastOptions("a", nil)
	o.Eviction = EvictLRU
	n := startNode(t, e, o)
	c := dial(t, n)
	full := 0
	for i := range 1000 {
		switch err := c.Store(context.Background(), wireKeyN(i), payloadN(i, 4096-i%7)); {
		case errors.Is(err, client.ErrFull):
			full++
		case err != nil:
			t.Fatal(err)
		}
	}
	s := n.Stats().Counters
	t.Logf("1000 puts into 256 slots: full %d, evicted %d, slots_used %d", full, s["evicted"], s["slots_used"])
	if full != 0 || s["put_full"] != 0 || s["evicted"] != 1000-256 || s["slots_used"] != 256 {
		t.Fatalf("full %d, counters %v", full, s)
	}
	for i := 1000 - 256; i < 1000; i++ {
		ch, err := c.Get(context.Background(), wireKeyN(i), true)
		if err != nil || ch.Source != p2ppb.Source_SOURCE_LOCAL || !bytes.Equal(ch.Payload, payloadN(i, 4096-i%7)) {
			t.Fatalf("newest key %d: %v %v", i, ch.GetSource(), err)
		}
	}
	// LRU: a hit refreshes; key 744 (now the oldest) survives the next put after a hit.
	get(t, c, 1000-256)
	put(t, c, 5000, 100)
	if ch, _ := c.Get(context.Background(), wireKeyN(1000-256), true); ch.Source != p2ppb.Source_SOURCE_LOCAL {
		t.Fatal("a key just hit was evicted first")
	}
	if ch, _ := c.Get(context.Background(), wireKeyN(1000-255), true); ch.Source != p2ppb.Source_SOURCE_MISS {
		t.Fatal("the least recently used key was not the one evicted")
	}
}

// With LRU a write of a key already held is a use of it: the key written again is not the
// next one evicted (a bench run repeating an earlier run's keys into a full cache had its
// GET miss the key it had just SET: the store kept the old chunk, answered OK, and left it
// as least recent). FIFO keeps storing order.
func TestWritingAHeldKeyAgainRefreshesIt(t *testing.T) {
	for _, mode := range []Eviction{EvictLRU, EvictFIFO} {
		t.Run(string(mode), func(t *testing.T) {
			e := smallEngine(t, 64)
			o := fastOptions("a", nil)
			o.Eviction = mode
			n := startNode(t, e, o)
			c := dial(t, n)
			for i := range 64 {
				put(t, c, i, 4096)
			}
			if o, err := c.Put(context.Background(), wireKeyN(0), payloadN(0, 4096)); err != nil || !o.Present || o.Stored {
				t.Fatalf("put of key 0 again: %+v, %v (want present, not stored)", o, err)
			}
			put(t, c, 100, 4096)
			first, second := 0, 1
			if mode == EvictFIFO {
				first, second = 1, 0
			}
			if ch, _ := c.Get(context.Background(), wireKeyN(first), true); ch.Source != p2ppb.Source_SOURCE_LOCAL {
				t.Fatalf("key %d, which should have outlived the eviction, is gone", first)
			}
			if ch, _ := c.Get(context.Background(), wireKeyN(second), true); ch.Source != p2ppb.Source_SOURCE_MISS {
				t.Fatalf("key %d was not the one evicted", second)
			}
		})
	}
}

// A leased key is never evicted, however much is written; once released it can be.
func TestLeasedKeyIsNeverEvicted(t *testing.T) {
	e := smallEngine(t, 64)
	o := fastOptions("a", nil)
	o.Eviction = EvictLRU
	n := startNode(t, e, o)
	c := dial(t, n)
	put(t, c, 0, 3000)
	cc := rawConn(t, n.Peer().Control)
	peer := p2ppb.NewPeerClient(cc)
	l, err := peer.LookupAndLock(context.Background(), &p2ppb.LookupAndLockRequest{Keys: []*p2ppb.ObjectKey{wireKeyN(0)}, LeaseMs: 60000})
	if err != nil || l.LeaseId == 0 {
		t.Fatalf("lock: %v %v", l, err)
	}
	for i := 1; i <= 300; i++ {
		put(t, c, i, 3000)
	}
	if _, ok := e.Lookup(keyN(0)); !ok {
		t.Fatal("a leased key was evicted")
	}
	s := n.Stats().Counters
	if s["evict_pinned_skips"] == 0 || s["put_full"] != 0 {
		t.Fatalf("counters %v", s)
	}
	if r, err := peer.Unlock(context.Background(), &p2ppb.UnlockRequest{LeaseId: l.LeaseId}); err != nil || !r.Released {
		t.Fatalf("unlock: %v %v", r, err)
	}
	for i := 301; i <= 301+64; i++ {
		put(t, c, i, 3000)
	}
	if _, ok := e.Lookup(keyN(0)); ok {
		t.Fatal("the key outlived 64 puts into 64 slots after its lease ended")
	}
}

// A full requester evicts to store a replica; its own counters say so.
func TestFullNodeEvictsForReplicas(t *testing.T) {
	a := startNode(t, smallEngine(t, 64), fastOptions("a", nil))
	ob := fastOptions("b", NewStaticDirectory(a.Peer()))
	ob.Eviction = EvictLRU
	b := startNode(t, smallEngine(t, 16), ob)
	ca, cb := dial(t, a), dial(t, b)
	for i := 100; i < 116; i++ {
		put(t, cb, i, 2000)
	}
	for i := range 8 {
		put(t, ca, i, 2000)
	}
	for i := range 8 {
		if ch := get(t, cb, i); ch.Source != p2ppb.Source_SOURCE_PEER {
			t.Fatalf("get %d on b: %s", i, ch.Source)
		}
	}
	s := b.Stats().Counters
	if s["replicas_stored"] != 8 || s["replicas_not_stored"] != 0 || s["evicted"] != 8 {
		t.Fatalf("b's counters %v", s)
	}
}

// slowHolderPair is a holder a of key 7 (a full chunk) whose first transfer is slowed 300 ms,
// bytes untouched, and a requester b that fetches from it.
func slowHolderPair(t *testing.T) (a, b *Node) {
	t.Helper()
	oa := fastOptions("a", nil)
	var slow sync.Once
	oa.TamperData = func(uint32, []byte) { slow.Do(func() { time.Sleep(300 * time.Millisecond) }) }
	a = startNode(t, newEngine(t, nil), oa)
	b = startNode(t, newEngine(t, nil), fastOptions("b", NewStaticDirectory(a.Peer())))
	put(t, dial(t, a), 7, chunkBytes)
	return a, b
}

// Concurrent misses of one key make one transfer at the holder and one replica write.
func TestConcurrentMissesShareOneTransfer(t *testing.T) {
	a, b := slowHolderPair(t)
	before := a.Stats().Counters["served_chunks"]
	const gets = 16
	var wg sync.WaitGroup
	start := make(chan struct{})
	srcs := make([]p2ppb.Source, gets)
	for g := range gets {
		cb := dial(t, b)
		wg.Go(func() {
			<-start
			ch, err := cb.Get(context.Background(), wireKeyN(7), false)
			if err != nil || !bytes.Equal(ch.Payload, payloadN(7, chunkBytes)) {
				t.Errorf("get %d: %v, %d bytes", g, err, len(ch.GetPayload()))
				return
			}
			srcs[g] = ch.Source
		})
	}
	close(start)
	wg.Wait()
	sa, sb := a.Stats().Counters, b.Stats().Counters
	t.Logf("%d concurrent gets: holder served_chunks +%d, requester peer_lookups %d, single_flight_waits %d, replicas_stored %d",
		gets, sa["served_chunks"]-before, sb["peer_lookups"], sb["single_flight_waits"], sb["replicas_stored"])
	if sa["served_chunks"]-before != 1 || sb["peer_lookups"] != 1 || sb["replicas_stored"] != 1 || sb["replicas_not_stored"] != 0 {
		t.Fatalf("holder %v\nrequester %v", sa, sb)
	}
	if sb["peer_hits"]+sb["local_hits"] != gets {
		t.Fatalf("sources %v", srcs)
	}
}

// A node over two devices: keys go to their shards, stats carry a row per device, each
// shard evicts on its own.
func TestNodeOverTwoDevices(t *testing.T) {
	c, err := sharded.New([]*engine.Engine{smallEngine(t, 32), smallEngine(t, 32)}, sharded.Config{})
	if err != nil {
		t.Fatal(err)
	}
	o := fastOptions("a", nil)
	o.Eviction = EvictLRU
	n, err := NewSharded(c, o)
	if err != nil {
		t.Fatal(err)
	}
	n.Serve(listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0"))
	t.Cleanup(func() { n.Close() })
	cl := dial(t, n)
	for i := range 200 {
		put(t, cl, i, 1000)
	}
	s := n.Stats().Counters
	if s["devices"] != 2 || s["dev0_slots_used"] != 32 || s["dev1_slots_used"] != 32 || s["slots_total"] != 64 ||
		s["dev0_engine_puts"]+s["dev1_engine_puts"] != 200 || s["evicted"] != 200-64 {
		t.Fatalf("counters %v", s)
	}
	if ch := get(t, cl, 199); ch.Source != p2ppb.Source_SOURCE_LOCAL {
		t.Fatalf("newest key: %s", ch.Source)
	}
}

// Of two holders the faster serves once both were measured, though the slow one is listed
// first; with the fast one dead the slow one still serves (failover).
func TestPeerChoicePrefersTheFasterHolder(t *testing.T) {
	oa := fastOptions("slow", nil)
	oa.TamperData = func(uint32, []byte) { time.Sleep(100 * time.Millisecond) }
	slow := startNode(t, newEngine(t, nil), oa)
	fast := startNode(t, newEngine(t, nil), fastOptions("fast", nil))
	cs, cf := dial(t, slow), dial(t, fast)
	for i := range 12 {
		put(t, cs, i, 4000)
		put(t, cf, i, 4000)
	}
	ob := fastOptions("b", NewStaticDirectory(slow.Peer(), fast.Peer()))
	ob.FetchOnly = true // every get fetches
	b := startNode(t, newEngine(t, nil), ob)
	cb := dial(t, b)
	from := map[string]int{}
	for i := range 10 {
		ch := get(t, cb, i)
		if ch.Source != p2ppb.Source_SOURCE_PEER {
			t.Fatalf("get %d: %s", i, ch.Source)
		}
		if i >= 2 {
			from[ch.Peer]++
		}
	}
	t.Logf("gets 3-10 served by %v", from)
	if from[fast.Peer().Name] != 8 {
		t.Fatalf("after measuring both, gets came from %v; want all 8 from the fast holder", from)
	}
	fast.Close()
	if ch := get(t, cb, 10); ch.Source != p2ppb.Source_SOURCE_PEER || ch.Peer != slow.Peer().Name {
		t.Fatalf("with the fast holder dead: %s from %q", ch.Source, ch.Peer)
	}
}

// Region eviction drops the least recent region whole: one salt's consecutive stores; a
// region with a leased member is skipped whole.
func TestRegionEviction(t *testing.T) {
	e := smallEngine(t, 64)
	o := fastOptions("a", nil)
	o.Eviction, o.RegionSlots = EvictRegion, 8
	n := startNode(t, e, o)
	key := func(i int) engine.Key { return engine.ObjectKey("m", 0, hashOf(i), []string{"A", "B"}[i%2]) }
	putK := func(i int) {
		t.Helper()
		if r, err := n.Put([]engine.Key{key(i)}, [][]byte{payloadN(i, 1000)}); err != nil || len(r.Stored) != 1 {
			t.Fatalf("put %d: %v %v", i, r, err)
		}
	}
	has := func(i int) bool { _, ok := e.Lookup(key(i)); return ok }
	for i := range 64 { // A's regions: 0,2..14 | 16..30 | ...; B's: 1,3..15 | ...
		putK(i)
	}
	putK(64) // full: the least recent region, A's first, goes whole
	for i := range 65 {
		if want := !(i%2 == 0 && i < 16); has(i) != want {
			t.Fatalf("key %d present %v after one eviction", i, has(i))
		}
	}
	if s := n.Stats().Counters; s["evicted"] != 8 {
		t.Fatalf("evicted %d, want one region of 8", s["evicted"])
	}
	for i := 65; i < 72; i++ { // the 7 slots the region freed: no eviction
		putK(i)
	}
	if s := n.Stats().Counters; s["evicted"] != 8 {
		t.Fatalf("evicted %d while slots were free", s["evicted"])
	}
	// Key 1 pinned: B's first region (now the least recent) is skipped, A's second goes.
	if m := e.MetadataPrefix([]engine.Key{key(1)}, true); len(m) != 1 {
		t.Fatal("lock key 1")
	}
	putK(72)
	if !has(1) || has(16) || has(30) || !has(3) {
		t.Fatalf("after an eviction with key 1 pinned: 1 %v 3 %v 16 %v 30 %v", has(1), has(3), has(16), has(30))
	}
	if s := n.Stats().Counters; s["evicted"] != 16 || s["evict_pinned_skips"] == 0 {
		t.Fatalf("counters %v", s)
	}
	e.UnlockMany([]engine.Key{key(1)})
}
