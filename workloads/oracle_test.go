package workloads

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/placement"
)

// Quantile classes: within a salt with spread, shorter lifetimes get lower handles; a salt
// without spread keeps one handle; spare handles go to the salt with spread.
func TestOracleHandlesClasses(t *testing.T) {
	var ws []oracleWrite
	for i := 0; i < 400; i++ {
		w := oracleWrite{id: uint64(i), died: int64(i + 100)} // salt "ttl": every lifetime 100
		if i%2 == 1 {
			life := int64(1000)
			if i%4 == 3 {
				life = 9000
			}
			w.salt, w.died = "lru", int64(i)+life
		} else {
			w.salt = "ttl"
		}
		ws = append(ws, w)
	}
	ws[399].died = -1 // outlived the run: the longest class
	h, labels := oracleHandles("salt-lifetime", ws, nil, 4)
	classes := map[string]map[int32]bool{"ttl": {}, "lru": {}}
	for i, w := range ws {
		classes[w.salt][h[i]] = true
	}
	if len(classes["ttl"]) != 1 || !classes["ttl"][0] {
		t.Fatalf("salt without spread: handles %v, want only 0 (first-seen salt)", classes["ttl"])
	}
	if labels[0] != "salt ttl" || labels[1] != "salt lru, lifetime class 1/3" {
		t.Fatalf("labels %v", labels)
	}
	if len(classes["lru"]) < 2 {
		t.Fatalf("salt with spread: handles %v, want at least two classes", classes["lru"])
	}
	for i, w := range ws {
		if w.salt != "lru" || h[i] < 1 || h[i] > 3 {
			if w.salt == "lru" {
				t.Fatalf("write %d: handle %d outside the lru salt's 1..3", i, h[i])
			}
			continue
		}
		if short := w.died-int64(i) == 1000; short && h[i] != 1 {
			t.Fatalf("write %d (short-lived): handle %d, want 1", i, h[i])
		}
		if long := w.died < 0 || w.died-int64(i) == 9000; long && h[i] == 1 {
			t.Fatalf("write %d (long-lived): on the short class", i)
		}
	}
	// salt-blind: the 100-stores writes are the shortest third or so, all on handle 0.
	hb, _ := oracleHandles("lifetime", ws, nil, 3)
	for i, w := range ws {
		if w.salt == "ttl" && hb[i] != 0 {
			t.Fatalf("lifetime oracle: write %d (lifetime 100) on handle %d, want 0", i, hb[i])
		}
	}
	// frequency: requests decide, not lifetimes.
	req := map[uint64]int64{}
	for i := 1; i < 400; i += 2 {
		req[uint64(i)] = int64(1 + i%8)
	}
	hf, _ := oracleHandles("salt-frequency", ws, req, 3)
	for i, w := range ws {
		if w.salt == "lru" && req[w.id] == 2 && hf[i] != 1 {
			t.Fatalf("frequency oracle: rarely requested write %d on handle %d, want 1", i, hf[i])
		}
	}
}

// The oracles replay the same op stream (same bytes, same hit ratio), and knowing lifetimes
// within a salt cannot lose to cache-salt alone on the multi-tenant preset.
func TestOracleSim(t *testing.T) {
	ttl := []float64{}
	for _, tn := range MultiTenant() {
		ttl = append(ttl, tn.TTL)
	}
	cfg := KVConfig{Tenants: MultiTenant(), ChunkTokens: 256, BytesPerToken: 4096, Seed: 1}
	regen := func() (Generator, error) { return NewKV(cfg) }
	fc := simFTL(8)
	fc.RUBytes = 32 << 20 // 256 RUs: room for every handle's open RUs
	res := map[string]*SimResult{}
	for _, pol := range []string{"none", "metadata-class+cache-salt", "oracle:lifetime", "oracle:salt-lifetime", "oracle:salt-frequency"} {
		g, _ := regen()
		r, err := RunSim(context.Background(), SimRun{Gen: g, Regen: regen, Driver: DriverConfig{TargetUtil: 0.95, TTL: ttl},
			FTL: fc, Policy: pol, SlotBytes: 4096 + 1<<20, Deallocate: true, CheckpointOps: 500, WarmupCaps: 1, MeasureCaps: 2})
		if err != nil {
			t.Fatalf("%s: %v", pol, err)
		}
		if r.Infeasible {
			t.Fatalf("%s: infeasible", pol)
		}
		if r.Policy != pol {
			t.Fatalf("result named %q, want %q", r.Policy, pol)
		}
		res[pol] = r
	}
	base := res["none"].Run.Total
	for pol, r := range res {
		if got := r.Run.Total; got.BytesWritten != base.BytesWritten || got.ChunksHit != base.ChunksHit {
			t.Fatalf("%s: op stream differs from none (%d bytes, %d hits vs %d, %d)", pol, got.BytesWritten, got.ChunksHit, base.BytesWritten, base.ChunksHit)
		}
		t.Logf("%-26s WAF %.3f (steady %.3f)", pol, r.WAF, r.SteadyWAF)
	}
	if o, cs := res["oracle:salt-lifetime"].WAF, res["metadata-class+cache-salt"].WAF; o > cs*1.005 {
		t.Fatalf("oracle:salt-lifetime WAF %.3f above metadata-class+cache-salt %.3f", o, cs)
	}
	if o, n := res["oracle:lifetime"].WAF, res["none"].WAF; o >= n {
		t.Fatalf("oracle:lifetime WAF %.3f not below none %.3f", o, n)
	}
}

func TestOracleErrors(t *testing.T) {
	g, _ := NewKV(KVConfig{Tenants: MultiTenant(), ChunkTokens: 256, BytesPerToken: 4096, Seed: 1})
	run := SimRun{Gen: g, Driver: DriverConfig{TargetUtil: 0.9}, FTL: simFTL(8), SlotBytes: 4096 + 1<<20}
	for spec, want := range map[string]string{"oracle:bogus": "known: oracle:lifetime", "oracle:lifetime": "Regen"} {
		run.Policy = spec
		if _, err := RunSim(context.Background(), run); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: error %v, want one containing %q", spec, err, want)
		}
	}
	run.Policy, run.Regen, run.FTL = "oracle:lifetime", func() (Generator, error) { return nil, nil }, simFTL(1)
	if _, err := RunSim(context.Background(), run); !errors.Is(err, placement.ErrSpec) {
		t.Fatalf("one handle: error %v, want placement.ErrSpec", err)
	}
}
