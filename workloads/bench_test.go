package workloads

import (
	"context"
	"testing"
)

// BenchmarkKVGen measures request generation (the multi-tenant preset, 1 MiB chunks).
func BenchmarkKVGen(b *testing.B) {
	g, _ := NewKV(KVConfig{Tenants: MultiTenant(), ChunkTokens: 256, BytesPerToken: 4096, Seed: 1})
	var op Op
	chunks := 0
	for b.Loop() {
		g.Next(&op)
		chunks += len(op.Keys)
	}
	b.ReportMetric(float64(chunks)/b.Elapsed().Seconds(), "chunks/s")
}

// BenchmarkDriverEviction measures the cache driver's bookkeeping per stored chunk with
// per-chunk LRU and with region eviction (64-chunk regions), on a map backend so that only
// the driver is timed; compare the two sub-benchmarks of one run.
func BenchmarkDriverEviction(b *testing.B) {
	for _, ev := range []Eviction{LRU, Region} {
		b.Run(string(ev), func(b *testing.B) {
			var stored int64
			for b.Loop() {
				g, _ := NewKV(KVConfig{Tenants: MultiTenant(), ChunkTokens: 256, BytesPerToken: 16, Requests: 20000, Seed: 1})
				d, err := NewDriver(DriverConfig{Eviction: ev, RegionSlots: 64, TargetUtil: 0.95, TTL: []float64{0.15, 0, 0.5}}, g, newMapBackend(20000))
				if err != nil {
					b.Fatal(err)
				}
				res, err := d.Run(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				stored += res.Total.ChunksStored
			}
			b.ReportMetric(float64(stored)/b.Elapsed().Seconds(), "chunks/s")
		})
	}
}
