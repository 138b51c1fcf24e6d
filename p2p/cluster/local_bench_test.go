package cluster

import (
	"os"
	"strconv"
	"testing"
)

// BenchmarkLocalFilterLoad times what a node's start in a cluster does before it serves:
// every key's identity told to the local filter (Cluster.Admitted), then the first publish.
// RBCTL_BENCH_FILTER_KEYS sets how many (default 1<<20; a 4M-entry restart is 4194304).
func BenchmarkLocalFilterLoad(b *testing.B) {
	n := 1 << 20
	if s := os.Getenv("RBCTL_BENCH_FILTER_KEYS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			b.Fatalf("RBCTL_BENCH_FILTER_KEYS=%q", s)
		}
		n = v
	}
	ids := make([]uint64, n)
	x := uint64(0x9e3779b97f4a7c15)
	for i := range ids { // splitmix64: identities are hashes
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		ids[i] = z ^ (z >> 31)
	}
	b.ReportAllocs()
	for b.Loop() {
		l, err := newLocalFilter(defaultExpectedKeys, defaultFalsePositive, defaultMaxRemoteFilter)
		if err != nil {
			b.Fatal(err)
		}
		l.addMany(ids)
		if p := l.publish("self", 1); p.full == nil {
			b.Fatalf("a bulk load published %d deltas, not a whole filter", len(p.deltas))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/key")
}
