package workloads

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// The cache never holds more than the target utilisation, and it does fill up to it.
func TestDriverEvictsAtTarget(t *testing.T) {
	for _, ev := range []Eviction{LRU, FIFO} {
		g, _ := NewKV(KVConfig{Tenants: MultiTenant()[:1], ChunkTokens: 256, BytesPerToken: 16, Requests: 5000, Seed: 1})
		be := newMapBackend(1000)
		d, err := NewDriver(DriverConfig{Eviction: ev, TargetUtil: 0.8}, g, be)
		if err != nil {
			t.Fatal(err)
		}
		res, err := d.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if be.maxRes > 800 {
			t.Errorf("%s: %d resident chunks, target 800", ev, be.maxRes)
		}
		if be.maxRes < 790 || res.Counters.Evicted == 0 {
			t.Errorf("%s: cache reached only %d chunks with %d evictions", ev, be.maxRes, res.Counters.Evicted)
		}
		if res.Counters.StoreFailed != 0 {
			t.Errorf("%s: %d failed stores", ev, res.Counters.StoreFailed)
		}
	}
}

// LRU keeps hot shared prefixes that FIFO throws away, so its hit ratio is higher.
func TestDriverLRUBeatsFIFO(t *testing.T) {
	hit := map[Eviction]float64{}
	for _, ev := range []Eviction{LRU, FIFO} {
		tn := DefaultTenant("a")
		tn.Prefixes, tn.Theta = 4, 1.2
		g, _ := NewKV(KVConfig{Tenants: []Tenant{tn}, ChunkTokens: 256, BytesPerToken: 16, Requests: 8000, Seed: 2})
		d, _ := NewDriver(DriverConfig{Eviction: ev, TargetUtil: 0.9}, g, newMapBackend(300))
		res, err := d.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		hit[ev] = res.Counters.HitRatio()
	}
	if hit[LRU] <= hit[FIFO] {
		t.Fatalf("LRU hit ratio %.3f not above FIFO %.3f", hit[LRU], hit[FIFO])
	}
}

// A tenant TTL (in capacity-writes) deletes chunks: live data of a TTL-only tenant stays
// near TTL × capacity, far below the eviction target.
func TestDriverTTL(t *testing.T) {
	tn := DefaultTenant("short")
	tn.TTL = 0.2
	g, _ := NewKV(KVConfig{Tenants: []Tenant{tn}, ChunkTokens: 256, BytesPerToken: 16, Requests: 20000, Seed: 3})
	be := newMapBackend(2000)
	d, _ := NewDriver(DriverConfig{TargetUtil: 0.9, TTL: []float64{0.2}}, g, be)
	res, err := d.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Counters.Expired == 0 {
		t.Fatal("nothing expired")
	}
	if be.maxRes > 2000*3/10 {
		t.Fatalf("%d chunks resident with a TTL of 0.2 × 2000", be.maxRes)
	}
	if res.Counters.Evicted != 0 {
		t.Fatalf("%d evictions although the TTL keeps the cache small", res.Counters.Evicted)
	}
}

func TestDriverWarmupResetsCounters(t *testing.T) {
	g, _ := NewKV(KVConfig{Tenants: MultiTenant(), ChunkTokens: 256, BytesPerToken: 16, Requests: 3000, Seed: 4})
	warm := 0
	d, _ := NewDriver(DriverConfig{WarmupBytes: 100 * 256 * 16, OnWarm: func() { warm++ }}, g, newMapBackend(500))
	res, err := d.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if warm != 1 {
		t.Fatalf("OnWarm called %d times", warm)
	}
	if res.Counters.Ops >= res.Total.Ops || res.Counters.Ops == 0 {
		t.Fatalf("measured %d ops of %d total", res.Counters.Ops, res.Total.Ops)
	}
}

func TestTraceRoundTrip(t *testing.T) {
	for _, format := range []string{FormatJSONL, FormatCSV} {
		g, _ := NewKV(KVConfig{Tenants: MultiTenant(), ChunkTokens: 256, BytesPerToken: 16, ReadOnlyFrac: 0.2, Requests: 300, Seed: 9})
		ops := collect(t, g, 300)
		syn, _ := NewSynthetic(SyntheticConfig{Pattern: Uniform, Keys: 50, ReadFrac: 0.5, Size: 128, Tenants: 2, Ops: 50, Seed: 1})
		sops := collect(t, syn, 50)
		var buf bytes.Buffer
		tw, err := NewTraceWriter(&buf, format)
		if err != nil {
			t.Fatal(err)
		}
		for i := range ops {
			if err := tw.Write(&ops[i], g.Salts()); err != nil {
				t.Fatal(err)
			}
		}
		del := Op{Kind: KindDelete, Tenant: 0, Keys: []Key{{Hash: 42}}, Size: 1}
		if err := tw.Write(&del, g.Salts()); err != nil {
			t.Fatal(err)
		}
		for i := range sops {
			if err := tw.Write(&sops[i], syn.Salts()); err != nil {
				t.Fatal(err)
			}
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		tr, err := ReadTrace(&buf, format)
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.Ops) != len(ops)+1+len(sops) {
			t.Fatalf("%s: read %d ops, wrote %d", format, len(tr.Ops), len(ops)+1+len(sops))
		}
		rg := tr.Replay(1)
		salts := rg.Salts()
		check := func(i int, want Op, wantSalts []string) {
			got := tr.Ops[i]
			if got.Kind != want.Kind || got.ReadOnly != want.ReadOnly || got.Size != want.Size ||
				salts[got.Tenant] != wantSalts[want.Tenant] || len(got.Keys) != len(want.Keys) {
				t.Fatalf("%s op %d: got %+v, want %+v", format, i, got, want)
			}
			for j := range got.Keys {
				if got.Keys[j].Hash != want.Keys[j].Hash || salts[got.Keys[j].Tenant] != wantSalts[want.Keys[j].Tenant] {
					t.Fatalf("%s op %d key %d differs", format, i, j)
				}
			}
		}
		for i := range ops {
			check(i, ops[i], g.Salts())
		}
		check(len(ops), del, g.Salts())
		for i := range sops {
			check(len(ops)+1+i, sops[i], syn.Salts())
		}
		if a, b := collect(t, tr.Replay(2), 10000), 2*len(tr.Ops); len(a) != b {
			t.Fatalf("replay ×2 gave %d ops, want %d", len(a), b)
		}
	}
}

func TestReadTraceErrors(t *testing.T) {
	cases := []struct{ format, in string }{
		{"jsonl", `{"op":"frob","key":"1","size":1}`},
		{"csv", "op,key,salt,size\nput,,a,1\n"},
		{"jsonl", ""},                 // empty: nothing to replay (bench divided by its chunk size 0)
		{"csv", "op,key,salt,size\n"}, // a header alone
	}
	for _, c := range cases {
		if _, err := ReadTrace(strings.NewReader(c.in), c.format); !errors.Is(err, ErrTrace) {
			t.Errorf("%s %q: %v, want ErrTrace", c.format, c.in, err)
		}
	}
	tr, err := ReadTrace(strings.NewReader(`{"op":"get","key":"not-hex","salt":"s","size":5}`), FormatJSONL)
	if err != nil || tr.Ops[0].Keys[0].Hash != parseKey("not-hex") {
		t.Fatalf("non-hex key: %v", err)
	}
}

func FuzzReadTrace(f *testing.F) {
	f.Add([]byte(`{"op":"request","salt":"a","keys":["01","02"],"size":10}`), false)
	f.Add([]byte("op,key,salt,size\nput,ff,t0,4096\n"), true)
	f.Fuzz(func(t *testing.T, b []byte, csv bool) {
		format := FormatJSONL
		if csv {
			format = FormatCSV
		}
		tr, err := ReadTrace(bytes.NewReader(b), format)
		if err != nil {
			return
		}
		g := tr.Replay(1)
		var op Op
		for g.Next(&op) {
			if op.Size <= 0 || len(op.Keys) == 0 || int(op.Tenant) >= len(g.Salts()) {
				t.Fatalf("accepted a bad op %+v", op)
			}
		}
	})
}

// A synthetic put of a cached key rewrites it (delete + store); a run that stores nothing
// for StallOps ops in a row stops and says so.
func TestDriverOverwriteAndStall(t *testing.T) {
	g, _ := NewSynthetic(SyntheticConfig{Pattern: Uniform, Keys: 100, Size: 64, Ops: 2000, Seed: 1})
	be := newMapBackend(1000)
	d, _ := NewDriver(DriverConfig{TargetUtil: 1}, g, be)
	if _, err := d.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if be.stores != 2000 || be.dels < 1800 {
		t.Fatalf("%d stores, %d deletes for 2000 puts over 100 keys", be.stores, be.dels)
	}
	g, _ = NewSynthetic(SyntheticConfig{Pattern: Uniform, Keys: 100, ReadFrac: 1, Size: 64, Seed: 1})
	d, _ = NewDriver(DriverConfig{StallOps: 500}, g, newMapBackend(10))
	res, err := d.Run(context.Background())
	if err != nil || !res.Stalled || res.Total.Ops > 502 {
		t.Fatalf("stalled=%v after %d ops, %v", res.Stalled, res.Total.Ops, err)
	}
}
