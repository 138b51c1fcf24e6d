package workloads

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func collect(t *testing.T, g Generator, n int) []Op {
	t.Helper()
	var out []Op
	var op Op
	for i := 0; i < n && g.Next(&op); i++ {
		c := op
		c.Keys = append([]Key(nil), op.Keys...)
		out = append(out, c)
	}
	return out
}

func testKV(seed uint64) KVConfig {
	return KVConfig{Tenants: MultiTenant(), ChunkTokens: 256, BytesPerToken: 4096, Requests: 2000, Seed: seed}
}

func TestKVDeterministic(t *testing.T) {
	g1, err := NewKV(testKV(7))
	if err != nil {
		t.Fatal(err)
	}
	g2, _ := NewKV(testKV(7))
	g3, _ := NewKV(testKV(8))
	a, b, c := collect(t, g1, 5000), collect(t, g2, 5000), collect(t, g3, 5000)
	if len(a) != 2000 {
		t.Fatalf("Requests=2000 gave %d ops", len(a))
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed gave different streams")
	}
	if reflect.DeepEqual(a, c) {
		t.Fatal("different seeds gave the same stream")
	}
}

func TestSyntheticDeterministic(t *testing.T) {
	for _, p := range []Pattern{Sequential, Uniform, ZipfKeys} {
		cfg := SyntheticConfig{Pattern: p, Keys: 1000, Theta: 0.9, ReadFrac: 0.3, Size: 4096, Tenants: 3, Ops: 500, Seed: 3}
		g1, err := NewSynthetic(cfg)
		if err != nil {
			t.Fatal(err)
		}
		g2, _ := NewSynthetic(cfg)
		if !reflect.DeepEqual(collect(t, g1, 1000), collect(t, g2, 1000)) {
			t.Fatalf("%s: same seed gave different streams", p)
		}
	}
}

// Tenant request shares follow the weights.
func TestKVTenantShares(t *testing.T) {
	cfg := testKV(1)
	cfg.Requests = 40000
	g, _ := NewKV(cfg)
	counts := make([]int, len(cfg.Tenants))
	var op Op
	for g.Next(&op) {
		counts[op.Tenant]++
		for _, k := range op.Keys {
			if k.Tenant != op.Tenant {
				t.Fatalf("key of tenant %d in an op of tenant %d", k.Tenant, op.Tenant)
			}
		}
	}
	var wsum float64
	for _, tn := range cfg.Tenants {
		wsum += tn.Weight
	}
	for i, tn := range cfg.Tenants {
		want := tn.Weight / wsum
		got := float64(counts[i]) / float64(cfg.Requests)
		if math.Abs(got-want) > 0.015 {
			t.Errorf("tenant %s: share %.3f, want %.3f ± 0.015", tn.Salt, got, want)
		}
	}
}

// With one shared prefix, single-turn conversations and a cache that never evicts, every
// request hits exactly the prefix's chunks: hit ratio = 4 / (4 + E[new full chunks]).
func TestKVHitRatioMatchesKnobs(t *testing.T) {
	tn := DefaultTenant("solo")
	tn.Prefixes, tn.PrefixTokens, tn.Turns, tn.PromptTokens, tn.Sessions = 1, 1024, 1, 384, 8
	g, err := NewKV(KVConfig{Tenants: []Tenant{tn}, ChunkTokens: 256, BytesPerToken: 16, Requests: 20000, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	be := newMapBackend(1 << 30)
	d, err := NewDriver(DriverConfig{TargetUtil: 1}, g, be)
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Prompt tokens are uniform in [192, 576]: floor(p/256) is 0, 1 or 2 with weights 64, 256, 65.
	extra := (256.0 + 2*65.0) / 385.0
	want := 4 / (4 + extra)
	if got := res.Counters.HitRatio(); math.Abs(got-want) > 0.01 {
		t.Fatalf("hit ratio %.4f, want %.4f ± 0.01", got, want)
	}
	if res.Counters.Evicted != 0 {
		t.Fatalf("%d evictions in a cache that should not fill", res.Counters.Evicted)
	}
}

func TestZipfShape(t *testing.T) {
	r := newRand(1)
	const n, draws = 100, 200000
	z := NewZipf(n, 0.99)
	counts := make([]int, n)
	for i := 0; i < draws; i++ {
		counts[z.Next(r)]++
	}
	want0 := 1 / zeta(n, 0.99)
	if got := float64(counts[0]) / draws; math.Abs(got-want0) > 0.01 {
		t.Fatalf("P(0) = %.4f, want %.4f", got, want0)
	}
	if counts[0] < counts[1] || counts[1] < counts[10] {
		t.Fatalf("popularity not decreasing: %d %d %d", counts[0], counts[1], counts[10])
	}
}

func TestSyntheticReadFraction(t *testing.T) {
	g, _ := NewSynthetic(SyntheticConfig{Pattern: Uniform, Keys: 100, ReadFrac: 0.3, Size: 64, Ops: 20000, Seed: 2})
	gets := 0
	var op Op
	for g.Next(&op) {
		if op.Kind == KindGet {
			gets++
		}
	}
	if f := float64(gets) / 20000; math.Abs(f-0.3) > 0.015 {
		t.Fatalf("get fraction %.3f, want 0.3", f)
	}
	s, _ := NewSynthetic(SyntheticConfig{Pattern: Sequential, Keys: 3, Size: 64, Ops: 7})
	var seq []uint64
	for s.Next(&op) {
		seq = append(seq, op.Keys[0].Hash)
	}
	if seq[0] != seq[3] || seq[0] != seq[6] || seq[0] == seq[1] {
		t.Fatalf("sequential does not wrap at Keys: %x", seq)
	}
}

func TestParseTenant(t *testing.T) {
	tn, err := ParseTenant("chat:w=3,ttl=0.2,turns=5,prompt=100")
	if err != nil {
		t.Fatal(err)
	}
	if tn.Salt != "chat" || tn.Weight != 3 || tn.TTL != 0.2 || tn.Turns != 5 || tn.PromptTokens != 100 {
		t.Fatalf("parsed %+v", tn)
	}
	for _, bad := range []string{"x:w", "x:nope=1", "x:w=abc", "x:w=NaN", "x:ttl=Inf", "x:theta=-inf", "x:w=-1", "x:turns=0", "x:prefixes=1e300"} {
		if _, err := ParseTenant(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if _, err := NewKV(KVConfig{Tenants: []Tenant{{Salt: "a"}}, ChunkTokens: 1, BytesPerToken: 1}); err == nil {
		t.Error("invalid tenant accepted")
	}
	nan := DefaultTenant("a")
	nan.Weight = math.NaN()
	if _, err := NewKV(KVConfig{Tenants: []Tenant{nan}, ChunkTokens: 1, BytesPerToken: 1}); err == nil || !strings.Contains(err.Error(), "w=NaN") {
		t.Errorf("a NaN weight: %v", err)
	}
}

func TestModelPresets(t *testing.T) {
	m, err := LookupModel("llama3-8b")
	if err != nil || m.BytesPerToken() != 128<<10 {
		t.Fatalf("llama3-8b: %d bytes/token, %v; want 128 KiB", m.BytesPerToken(), err)
	}
	if _, err := LookupModel("nope"); err == nil {
		t.Fatal("unknown model accepted")
	}
}
