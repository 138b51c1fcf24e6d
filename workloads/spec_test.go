package workloads

import (
	"errors"
	"path/filepath"
	"testing"
)

func kvSpec() Spec {
	return Spec{Kind: "kv", Model: "tiny", ChunkTokens: 256, MaxContext: 32768, Seed: 3, Util: 0.9, Requests: 100}
}

// A Spec builds identical streams per run, sizes regions from the reclaim unit, and
// refuses what it cannot build with ErrSpec.
func TestSpecBuildAndDriver(t *testing.T) {
	src, err := kvSpec().Build()
	if err != nil {
		t.Fatal(err)
	}
	if src.ChunkBytes != 1<<20 || len(src.Salts) != 3 || len(src.TTL) != 3 {
		t.Fatalf("source: %d-byte chunks, salts %v, ttl %v", src.ChunkBytes, src.Salts, src.TTL)
	}
	a, _ := src.New()
	b, _ := src.New()
	var x, y Op
	for i := 0; i < 50 && a.Next(&x) && b.Next(&y); i++ {
		if x.Kind != y.Kind || len(x.Keys) != len(y.Keys) || (len(x.Keys) > 0 && x.Keys[0] != y.Keys[0]) {
			t.Fatalf("op %d differs between two streams of one source", i)
		}
	}
	s := kvSpec()
	s.Eviction = Region
	dc, err := s.Driver(src, 64<<20, 2<<20)
	if err != nil || dc.RegionSlots != 32 || dc.MaxOps != 100 || dc.TargetUtil != 0.9 {
		t.Fatalf("driver %+v, %v", dc, err)
	}
	if _, err := s.Driver(src, 0, 2<<20); !errors.Is(err, ErrSpec) {
		t.Fatalf("region eviction without a size: %v", err)
	}
	for name, bad := range map[string]Spec{
		"preset":   {Kind: "kv", Model: "tiny", ChunkTokens: 256, Preset: "nope"},
		"eviction": {Kind: "kv", Model: "tiny", ChunkTokens: 256, Eviction: "random"},
		"region":   {Kind: "kv", Model: "tiny", ChunkTokens: 256, Region: 1 << 20},
		"bpt":      {Kind: "kv", Model: "tiny", ChunkTokens: 256, BytesPerToken: -1},
	} {
		if _, err := bad.Build(); !errors.Is(err, ErrSpec) {
			t.Errorf("%s: %v, want ErrSpec", name, err)
		}
	}
	if _, err := (Spec{Kind: "kv", Model: "nope"}).Build(); err == nil {
		t.Error("unknown model accepted")
	}
	if _, err := (Spec{Kind: "kv", Model: "tiny", ChunkTokens: 256, Util: 1.5}).Driver(src, 0, 1); !errors.Is(err, ErrSpec) {
		t.Errorf("util 1.5: %v", err)
	}
}

// WriteTrace writes the first n ops of a source, which replay as a trace workload.
func TestWriteTraceReplays(t *testing.T) {
	src, _ := kvSpec().Build()
	path := filepath.Join(t.TempDir(), "w.jsonl")
	n, err := WriteTrace(path, src, 40)
	if err != nil || n != 40 {
		t.Fatalf("wrote %d: %v", n, err)
	}
	tr, err := (Spec{Kind: "trace:" + path, Model: "tiny", ChunkTokens: 256, TraceLoops: 2}).Build()
	if err != nil || tr.ChunkBytes != src.ChunkBytes {
		t.Fatalf("replay: %v, %d-byte chunks", err, tr.ChunkBytes)
	}
	g, _ := tr.New()
	var op Op
	ops := 0
	for g.Next(&op) {
		ops++
	}
	if ops != 80 {
		t.Fatalf("two loops of 40 ops replayed %d", ops)
	}
	if _, err := WriteTrace(path, src, 0); !errors.Is(err, ErrSpec) {
		t.Fatalf("zero ops: %v", err)
	}
}
