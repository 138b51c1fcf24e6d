package placement

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user+system CPU time: rates per CPU second stay meaningful when
// the machine's cores are shared with other work.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPlace reports decisions per second for each policy on one goroutine.
func BenchmarkPlace(b *testing.B) {
	salts := make([]string, 64)
	buckets := make([]string, 64) // LMCache's policies place only salts with a "bucket:" prefix
	for i := range salts {
		salts[i] = "tenant-salt-" + strconv.Itoa(i)
		buckets[i] = "tenant-" + strconv.Itoa(i%4) + ":salt-" + strconv.Itoa(i)
	}
	for _, spec := range []string{"none", "static:1", "round-robin", "cache-salt", "cache-salt:pin=tenant-salt-0=3/tenant-salt-1=5", "cache-salt:hash", "cache-salt:bytes", "cache_salt_prefix", "cache_salt_rank", "hotness", "lifetime", "metadata-class+cache-salt", "metadata-class+hotness"} {
		b.Run(spec, func(b *testing.B) {
			p, err := Parse(spec, 8)
			if err != nil {
				b.Fatal(err)
			}
			Observe(p, 1, Store) // learning policies have their tables allocated
			w := Write{Namespace: "vllm", Model: "llama", ChunkIndex: -1, Size: 256 << 10}
			ss := salts
			if strings.HasPrefix(spec, "cache_salt_") {
				ss = buckets
			}
			sink := Handle(0)
			b.ResetTimer()
			c0 := cpuTime()
			for i := range b.N {
				w.CacheSalt = ss[i&63]
				w.KVRank = PackKVRank(2, uint32(i&1), 2, uint32(i&1)) // TP 2
				w.Identity = uint64(i) * 0x9e3779b97f4a7c15
				w.Metadata = i&1023 == 0
				sink += p.Place(w)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
			b.ReportMetric(float64(b.N)/(cpuTime()-c0).Seconds(), "decisions/cpu-s")
			if sink == 42 {
				b.Log(sink)
			}
		})
	}
}

// BenchmarkObserve reports hotness sketch updates per second.
func BenchmarkObserve(b *testing.B) {
	p := NewHotness(4)
	for i := range b.N {
		Observe(p, uint64(i%100000), Lookup)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "observations/s")
}

// BenchmarkObserveLifetime reports lifetime table updates per second: each iteration stores
// one key and deletes the key stored 1,000 iterations earlier (two observations).
func BenchmarkObserveLifetime(b *testing.B) {
	p := NewLifetime(4)
	Observe(p, 0, Store) // allocate the table outside the timed loop
	b.ResetTimer()
	for i := range b.N {
		id := uint64(i) * 0x9e3779b97f4a7c15
		Observe(p, id, Store)
		Observe(p, uint64(i-1000)*0x9e3779b97f4a7c15, Delete)
	}
	b.ReportMetric(2*float64(b.N)/b.Elapsed().Seconds(), "observations/s")
}
