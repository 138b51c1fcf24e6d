package node

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/p2p"
)

// The eviction order is seeded while the node serves: a hit before the seeding reaches its
// key keeps it in front, a key deleted before the seeding reaches it is added all the same
// and dropped by the eviction that finds it gone, without counting as evicted. Replayed
// here in that order, without the goroutine: 8 keys in 8 slots, key 3 hit, key 5 deleted,
// then the seeding; 4 new puts then evict keys 7, 6 and 4 (least recent first, 5 skipped).
func TestSeedingInterleavedWithRequests(t *testing.T) {
	e := smallEngine(t, 8)
	var keys []engine.Key
	var vals [][]byte
	for i := range 8 {
		keys, vals = append(keys, keyN(i)), append(vals, payloadN(i, 100))
	}
	if r, err := e.PutMany(keys, vals); err != nil || len(r.Stored) != 8 {
		t.Fatalf("fill: %+v %v", r, err)
	}
	o := fastOptions("a", nil)
	o.Eviction = EvictLRU
	n, err := New(e, o)
	if err != nil {
		t.Fatal(err)
	}
	n.evict.touch(0, keyN(3)) // a hit
	if del := e.DeleteMany([]engine.Key{keyN(5)}, false); !del[0] {
		t.Fatal("delete of key 5 refused")
	}
	n.evict.forget(0, keyN(5)) // the delete's forget, before the seeding holds it: a no-op
	for _, k := range keys {
		n.evict.seed(0, k)
	}
	var nk []engine.Key
	var nv [][]byte
	for i := 100; i < 104; i++ {
		nk, nv = append(nk, keyN(i)), append(nv, payloadN(i, 100))
	}
	r, err := n.Put(nk, nv)
	if err != nil || len(r.Stored) != 4 {
		t.Fatalf("4 puts into a full cache: %+v %v", r, err)
	}
	for i, want := range map[int]bool{0: true, 1: true, 2: true, 3: true, 4: false, 5: false, 6: false, 7: false} {
		if _, ok := e.Lookup(keyN(i)); ok != want {
			t.Errorf("key %d held: %v, want %v", i, ok, want)
		}
	}
	if ev, _, _ := n.evict.stats(); ev != 3 {
		t.Errorf("evicted %d, want 3 (the deleted key 5 is not an eviction)", ev)
	}
	if got := n.evict.shards[0].keys.len(); got != 8 {
		t.Errorf("the order holds %d keys, want 8 (the stale one dropped)", got)
	}
}

// A node started on a full cache takes writes at once: while its order is being seeded, a
// writer puts 256 new keys one by one; every put is stored (each must evict, so each waits
// for the seeding if it still runs), and the cache stays full with every new key in it.
// (One writer: concurrent writers into a full cache can take each other's freed slot and
// be refused after putRounds, seeding or not.)
func TestStartOnAFullCacheTakesWritesWhileSeeding(t *testing.T) {
	dev := filepath.Join(t.TempDir(), "full.img")
	formatDevs(t, 48<<20, 8<<10, dev)
	e, err := cache.Open(dev, cache.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slots := int(e.Layout().MaxSlots)
	for lo := 0; lo < slots; lo += 256 {
		var ks []engine.Key
		var vs [][]byte
		for i := lo; i < min(lo+256, slots); i++ {
			ks, vs = append(ks, keyN(i)), append(vs, payloadN(i, 100))
		}
		if r, err := e.PutMany(ks, vs); err != nil || len(r.Stored) != len(ks) {
			t.Fatalf("fill at %d: %d of %d stored, %v", lo, len(r.Stored), len(ks), err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := startConfig(dev)
	cfg.Eviction = EvictLRU
	n, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	for i := range 256 {
		k := keyN(1_000_000 + i)
		if r, err := n.Put([]engine.Key{k}, [][]byte{payloadN(i, 100)}); err != nil || len(r.Stored) != 1 {
			t.Fatalf("put %d into the full cache: %+v, %v", i, r, err)
		}
	}
	n.WaitSeeded()
	eng := n.cache.Shard(0)
	if u := eng.Usage(); u.SlotsUsed != int64(slots) {
		t.Fatalf("%d of %d slots used after the puts", u.SlotsUsed, slots)
	}
	for i := range 256 {
		if _, ok := eng.Lookup(keyN(1_000_000 + i)); !ok {
			t.Fatalf("new key %d missing", i)
		}
	}
}

// admissions is a directory that records what it is told.
type admissions struct {
	StaticDirectory
	mu  sync.Mutex
	ids map[uint64]int
}

func (a *admissions) Admitted(id uint64) { a.mu.Lock(); a.ids[id]++; a.mu.Unlock() }

// manyAdmissions also takes admissions at once (p2p.ManyAdmitter), as the cluster does.
type manyAdmissions struct {
	admissions
	calls int
}

func (a *manyAdmissions) AdmittedMany(ids []uint64) {
	a.mu.Lock()
	a.calls++
	a.mu.Unlock()
	for _, id := range ids {
		a.Admitted(id)
	}
}

// Serve tells the directory every key the cache holds before it returns (before the node
// answers anything), each once, from a walk that spells no key; at once, in one call, to a
// directory that takes many.
func TestServeAnnouncesEveryKeyFirst(t *testing.T) {
	t.Run("one by one", func(t *testing.T) {
		d := &admissions{ids: map[uint64]int{}}
		announcesEveryKey(t, d, &d.mu, d.ids)
	})
	t.Run("at once", func(t *testing.T) {
		d := &manyAdmissions{admissions: admissions{ids: map[uint64]int{}}}
		announcesEveryKey(t, d, &d.mu, d.ids)
		if d.calls != 1 {
			t.Fatalf("AdmittedMany called %d times, want once", d.calls)
		}
	})
}

func announcesEveryKey(t *testing.T, d p2p.Directory, mu *sync.Mutex, ids map[uint64]int) {
	e := smallEngine(t, 16)
	var keys []engine.Key
	var vals [][]byte
	for i := range 12 {
		keys, vals = append(keys, keyN(i)), append(vals, payloadN(i, 100))
	}
	if r, err := e.PutMany(keys, vals); err != nil || len(r.Stored) != 12 {
		t.Fatalf("fill: %+v %v", r, err)
	}
	e.DeleteMany(keys[:2], false)
	o := fastOptions("a", d)
	o.Eviction = EvictLRU
	n := startNode(t, e, o)
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 10 {
		t.Fatalf("%d identities announced by the time Serve returned, want the 10 held", len(ids))
	}
	for i, k := range keys[2:] {
		if ids[k.Identity()] != 1 {
			t.Fatalf("key %d announced %d times", i+2, ids[k.Identity()])
		}
	}
	n.WaitSeeded()
}

// Legacy keys of one chunk on several workers share their identity; the order tells them
// apart (orderSum) and spells each victim from the engine. A node started on a full cache of
// 2 chunks × 4 workers seeds them from the cache; each is then used in put order (the
// seeded keys must be found, not added again), a hit moves one of the least recent to the
// front, and 3 new puts evict exactly the next 3 by recency, although workers of their
// chunk stay.
func TestLegacyKeysOfOneChunkAreEvictedApart(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.SlotBytes, cfg.MetaTotalBytes, cfg.Periodic, cfg.QueueDepth = 8192, 1<<20, false, 8
	cfg.Namespace = engine.NamespaceLegacy
	e, err := engine.Format(blockdev.NewMem(1<<20+8*8192, 512), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	legacy := func(chunk, worker int) engine.Key {
		return engine.LegacyKey(fmt.Sprintf("vllm@m@4@%d@%x@bfloat16", worker, 0xc0+chunk), uint64(0xc0+chunk))
	}
	var keys []engine.Key
	for ch := range 2 {
		for w := range 4 {
			keys = append(keys, legacy(ch, w))
		}
	}
	for i, k := range keys { // one at a time: slot order is put order
		if r, err := e.PutMany([]engine.Key{k}, [][]byte{payloadN(i, 100)}); err != nil || len(r.Stored) != 1 {
			t.Fatalf("fill %s: %+v %v", k, r, err)
		}
	}
	o := fastOptions("a", nil)
	o.Eviction = EvictLRU
	n := startNode(t, e, o)
	n.WaitSeeded()
	if got := n.evict.shards[0].keys.len(); got != 8 {
		t.Fatalf("the order holds %d keys after seeding, want 8", got)
	}
	for _, k := range keys { // uses in put order: the seeded keys are found, none added
		n.evict.touch(0, k)
	}
	if got := n.evict.shards[0].keys.len(); got != 8 {
		t.Fatalf("the order holds %d keys after a use of each, want 8: the seeding's sums are not the uses'", got)
	}
	n.evict.touch(0, legacy(0, 1)) // a hit on chunk 0's worker 1
	var nk []engine.Key
	var nv [][]byte
	for i := range 3 {
		nk, nv = append(nk, legacy(5, i)), append(nv, payloadN(50+i, 100))
	}
	if r, err := n.Put(nk, nv); err != nil || len(r.Stored) != 3 {
		t.Fatalf("3 puts into a full cache: %+v %v", r, err)
	}
	// Least recent first: chunk 0's workers 0, 2, 3 go; worker 1 (hit) and chunk 1 stay.
	for _, c := range []struct {
		chunk, worker int
		held          bool
	}{{0, 0, false}, {0, 1, true}, {0, 2, false}, {0, 3, false}, {1, 0, true}, {1, 1, true}, {1, 2, true}, {1, 3, true}} {
		if _, ok := e.Lookup(legacy(c.chunk, c.worker)); ok != c.held {
			t.Errorf("chunk %d worker %d held: %v, want %v", c.chunk, c.worker, ok, c.held)
		}
	}
	if ev, _, _ := n.evict.stats(); ev != 3 {
		t.Errorf("evicted %d, want 3", ev)
	}
}

// After a restart the order is the store order from before it (engine.InStoreOrder), not
// the slot order: a cache of 16 slots whose first 4 slots were freed and taken again by the
// 4 newest stores, restarted; 6 new puts evict the 6 least recently stored (keys 4..9),
// not the keys of the highest slots (the newest before they were freed and stored again).
// lru and fifo seed alike (newest first, each behind); region mode puts each key's region
// in front, oldest first, and must keep the same order across regions.
func TestRestartKeepsStoreOrder(t *testing.T) {
	for _, mode := range []Eviction{EvictLRU, EvictFIFO, EvictRegion} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := engine.DefaultConfig()
			cfg.SlotBytes, cfg.MetaTotalBytes, cfg.Periodic, cfg.QueueDepth = 8192, 1<<20, false, 8
			mem := blockdev.NewMem(1<<20+16*8192, 512)
			e, err := engine.Format(mem, cfg)
			if err != nil {
				t.Fatal(err)
			}
			putOne := func(e *engine.Engine, i int) {
				if r, err := e.PutMany([]engine.Key{keyN(i)}, [][]byte{payloadN(i, 100)}); err != nil || len(r.Stored) != 1 {
					t.Fatalf("put %d: %+v %v", i, r, err)
				}
			}
			for i := range 16 {
				putOne(e, i)
			}
			del := e.DeleteMany([]engine.Key{keyN(0), keyN(1), keyN(2), keyN(3)}, false)
			if !del[0] || !del[1] || !del[2] || !del[3] {
				t.Fatalf("deletes refused: %v", del)
			}
			e.FlushDeallocates()
			for i := 16; i < 20; i++ { // into the freed low slots
				putOne(e, i)
			}
			if m, _ := e.Lookup(keyN(19)); m.Slot >= 4 {
				t.Fatalf("key 19 in slot %d: the freed low slots were not taken again", m.Slot)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			re, err := engine.Open(mem.Reopen(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { re.Close() })
			o := fastOptions("a", nil)
			o.Eviction, o.RegionSlots = mode, 2
			n := startNode(t, re, o)
			n.WaitSeeded()
			var nk []engine.Key
			var nv [][]byte
			for i := 100; i < 106; i++ {
				nk, nv = append(nk, keyN(i)), append(nv, payloadN(i, 100))
			}
			if r, err := n.Put(nk, nv); err != nil || len(r.Stored) != 6 {
				t.Fatalf("6 puts into a full cache: %+v %v", r, err)
			}
			for i := 4; i < 20; i++ {
				if _, ok := re.Lookup(keyN(i)); ok != (i >= 10) {
					t.Errorf("key %d held: %v, want %v (keys 4..9 were the least recently stored)", i, ok, i >= 10)
				}
			}
		})
	}
}
