package node

import (
	"context"
	"syscall"
	"testing"

	"github.com/rbctl/rbctl/engine"
)

// BenchmarkPeerFetchTLS fetches batches of 16 chunks of 256 KiB (4 MiB) from a peer over
// loopback, in plain TCP and over mutual TLS, and reports throughput and the process's CPU
// seconds (both nodes) per GB fetched.
//
//	go test -run '^$' -bench PeerFetchTLS -benchtime 200x ./p2p/node/
func BenchmarkPeerFetchTLS(b *testing.B) {
	const batch = 16
	for _, tl := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "tls"}[tl]
		b.Run(name, func(b *testing.B) {
			p := newPKI(b)
			oa, ob := fastOptions("a", nil), fastOptions("b", nil)
			if tl {
				oa.TLS, ob.TLS = p.material("a", "127.0.0.1"), p.material("b", "127.0.0.1")
			}
			a := startNode(b, fileEngine(b), oa)
			keys := make([]engine.Key, batch)
			for i := range keys {
				keys[i] = keyN(i)
				if _, err := a.Put(keys[i:i+1], [][]byte{payloadN(i, chunkBytes)}); err != nil {
					b.Fatal(err)
				}
			}
			ob.Directory = NewStaticDirectory(a.Peer())
			bn := startNode(b, fileEngine(b), ob)
			b.SetBytes(batch * chunkBytes)
			cpu0 := cpuSeconds()
			for b.Loop() {
				r, err := bn.Get(context.Background(), keys, false)
				if err != nil || r[batch-1].Source != Peer {
					b.Fatalf("peer get: %v %v", r[batch-1].Source, err)
				}
				b.StopTimer()
				bn.Delete(keys, true) // the next round fetches again
				b.StartTimer()
			}
			gb := float64(b.N) * batch * chunkBytes / 1e9
			b.ReportMetric((cpuSeconds()-cpu0)/gb, "cpu-s/GB")
		})
	}
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
