package node

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
)

// fileEngine formats a 64 MiB file-backed cache opened with O_DIRECT (the page cache does
// not serve its loads).
func fileEngine(b testing.TB) *engine.Engine {
	b.Helper()
	p := filepath.Join(b.TempDir(), "cache.img")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		b.Fatal(err)
	}
	if err := os.Truncate(p, 64<<20); err != nil {
		b.Fatal(err)
	}
	dev, err := blockdev.OpenFile(p, blockdev.DefaultFileOptions())
	if err != nil {
		b.Fatal(err)
	}
	e, err := engine.Format(dev, cacheConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	return e
}

// BenchmarkGet256K compares a 256 KiB chunk served from the local file-backed cache with
// the same chunk fetched from a peer over loopback (lookup-and-lock, data-plane pull,
// checksum, local store), and reports the node's own p50/p99 in microseconds.
//
//	go test -run '^$' -bench Get256K -benchtime 300x ./p2p/node/
func BenchmarkGet256K(b *testing.B) {
	const keys = 64
	ea := fileEngine(b)
	a := startNode(b, ea, fastOptions("a", nil))
	for i := range keys {
		if _, err := a.Put([]engine.Key{keyN(i)}, [][]byte{payloadN(i, chunkBytes)}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("local", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			r, err := a.Get(context.Background(), []engine.Key{keyN(i % keys)}, true)
			if err != nil || r[0].Source != Local {
				b.Fatalf("local get: %v %v", r[0].Source, err)
			}
		}
		_, p50, p99 := a.localLat.quantiles()
		b.ReportMetric(p50, "p50-us")
		b.ReportMetric(p99, "p99-us")
	})
	b.Run("peer", func(b *testing.B) {
		bn := startNode(b, fileEngine(b), fastOptions("b", NewStaticDirectory(a.Peer())))
		for i := 0; b.Loop(); i++ {
			k := []engine.Key{keyN(i % keys)}
			r, err := bn.Get(context.Background(), k, false)
			if err != nil || r[0].Source != Peer {
				b.Fatalf("peer get: %v %v", r[0].Source, err)
			}
			b.StopTimer()
			bn.Delete(k, true) // the next round fetches again
			b.StartTimer()
		}
		_, p50, p99 := bn.peerLat.quantiles()
		b.ReportMetric(p50, "p50-us")
		b.ReportMetric(p99, "p99-us")
	})
}
