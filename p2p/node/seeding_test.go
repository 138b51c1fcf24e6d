package node

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

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
