package node

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/rbctl/rbctl/engine"
)

// BenchmarkEvictorSeed seeds an LRU evictor with the keys of a cache at start, as
// Node.Serve does (RBCTL_BENCH_SEED_KEYS keys, default 262,144; 4,194,304 is a 4M-entry
// restart), and reports the time and the heap it holds per key.
func BenchmarkEvictorSeed(b *testing.B) {
	n := 1 << 18
	if s := os.Getenv("RBCTL_BENCH_SEED_KEYS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			b.Fatalf("RBCTL_BENCH_SEED_KEYS=%q: want a positive count", s)
		}
		n = v
	}
	keys := make([]engine.Key, n)
	var h [32]byte
	for i := range keys {
		binary.LittleEndian.PutUint64(h[:], uint64(i)*0x9e3779b97f4a7c15)
		keys[i] = engine.ObjectKey("meta-llama/Llama-3.1-8B", 0, h[:], fmt.Sprintf("tenant-%d", i%16))
	}
	var heap, objects float64
	for b.Loop() {
		var before, after runtime.MemStats
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.StartTimer()
		ev := newEvictor(1, EvictLRU, 0)
		ev.reserve(0, len(keys))
		for _, k := range keys {
			ev.seed(0, k)
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap = float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
		objects = float64(after.HeapObjects-before.HeapObjects) / float64(n)
		runtime.KeepAlive(ev)
		b.StartTimer()
	}
	b.ReportMetric(heap, "heap-B/key")
	b.ReportMetric(objects, "objects/key")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/key")
}

// BenchmarkEvictingPut: puts of one new 100-byte key each into a full LRU node of 16,384
// slots, each evicting the least recent key (the order spells it from the engine, spell).
func BenchmarkEvictingPut(b *testing.B) {
	const slots = 16384
	e := memEngine(b, slots, 8<<20)
	o := fastOptions("a", nil)
	o.Eviction = EvictLRU
	n, err := New(e, o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close() })
	val := [][]byte{payloadN(0, 100)}
	i := 0
	put := func() {
		if r, err := n.Put([]engine.Key{keyN(i)}, val); err != nil || len(r.Stored) != 1 {
			b.Fatalf("put %d: %+v %v", i, r, err)
		}
		i++
	}
	for range slots {
		put()
	}
	ev0, _, _ := n.evict.stats()
	for b.Loop() {
		put()
	}
	if ev, _, _ := n.evict.stats(); ev-ev0 != int64(b.N) {
		b.Fatalf("%d puts into a full node evicted %d keys", b.N, ev-ev0)
	}
}
