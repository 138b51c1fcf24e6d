package sim

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/placement"
	"github.com/rbctl/rbctl/workloads"
)

func simFTL(handles int) ftl.Config {
	return ftl.Config{MappingUnit: 64 << 10, LogicalBytes: 8 << 30, OP: 0.07, RUBytes: 128 << 20, Handles: handles,
		Isolation: ftl.PersistentlyIsolated}
}

// On the multi-tenant preset, separating tenants by cache_salt lowers the modelled WAF, and
// metadata-class+cache-salt (7 data handles) keeps the three tenants apart as cache-salt
// does, where the hash mapping puts rag and agent on one handle.
func TestSimCacheSaltBeatsNone(t *testing.T) {
	waf := map[string]float64{}
	for _, pol := range []string{"none", "cache-salt", "metadata-class+cache-salt", "metadata-class+cache-salt:hash"} {
		g, _ := workloads.NewKV(workloads.KVConfig{Tenants: workloads.MultiTenant(), ChunkTokens: 256, BytesPerToken: 4096, Seed: 1})
		var ttl []float64
		for _, tn := range workloads.MultiTenant() {
			ttl = append(ttl, tn.TTL)
		}
		r, err := RunOne(context.Background(), RunConfig{Gen: g, Driver: workloads.DriverConfig{TargetUtil: 0.9, TTL: ttl}, FTL: simFTL(8),
			Policy: pol, SlotBytes: 4096 + 1<<20, Deallocate: true, CheckpointOps: 500, WarmupCaps: 1, MeasureCaps: 2})
		if err != nil {
			t.Fatal(err)
		}
		if r.Infeasible || r.WAF < 1 {
			t.Fatalf("%s: WAF %.3f infeasible=%v", pol, r.WAF, r.Infeasible)
		}
		if len(r.Timeline) < 10 || r.Checkpoints == 0 {
			t.Fatalf("%s: %d timeline points, %d checkpoints", pol, len(r.Timeline), r.Checkpoints)
		}
		waf[pol] = r.WAF
	}
	t.Logf("modelled WAF: %v", waf)
	if waf["cache-salt"] >= waf["none"] {
		t.Fatalf("cache-salt WAF %.3f not below none %.3f", waf["cache-salt"], waf["none"])
	}
	if mc := waf["metadata-class+cache-salt"]; mc > waf["cache-salt"]*1.01 || mc >= waf["metadata-class+cache-salt:hash"] {
		t.Fatalf("metadata-class+cache-salt WAF %.3f: want ≈ cache-salt %.3f and below the colliding hash variant %.3f",
			mc, waf["cache-salt"], waf["metadata-class+cache-salt:hash"])
	}
}

// Without deallocate, deleted slots stay valid in the FTL until rewritten.
func TestSimDeallocate(t *testing.T) {
	valid := map[bool]int64{}
	for _, dealloc := range []bool{false, true} {
		m, _ := ftl.New(simFTL(1))
		b, err := NewBackend(BackendConfig{FTL: m, SlotBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		b.cfg.Deallocate = dealloc
		keys := []workloads.Key{{Hash: 1}, {Hash: 2}, {Hash: 3}}
		ok := make([]bool, 3)
		if err := b.Store(keys, 1<<20-4096, ok); err != nil || !ok[2] {
			t.Fatal(err, ok)
		}
		if n, _ := b.Lookup(keys); n != 3 {
			t.Fatalf("lookup found %d of 3", n)
		}
		b.Delete(keys[:2])
		if n, _ := b.Lookup(keys); n != 0 {
			t.Fatalf("lookup after delete found %d", n)
		}
		valid[dealloc] = m.Stats().ValidBytes
	}
	if valid[true] != 1<<20 || valid[false] != 3<<20 {
		t.Fatalf("valid bytes: with deallocate %d (want 1 MiB), without %d (want 3 MiB)", valid[true], valid[false])
	}
}

func TestWAFWindows(t *testing.T) {
	tl := []WAFPoint{{PayloadBytes: 0}, {PayloadBytes: 10, Stats: ftl.Stats{HostBytes: 10, MediaBytes: 10}},
		{PayloadBytes: 20, Stats: ftl.Stats{HostBytes: 20, MediaBytes: 30}}, {PayloadBytes: 30, Stats: ftl.Stats{HostBytes: 30, MediaBytes: 60}}}
	m, s, _, _, _ := WAFWindows(tl, 10)
	if m != 2.5 || s != 3 {
		t.Fatalf("measured %.3f steady %.3f, want 2.5 and 3", m, s)
	}
	if !reflect.DeepEqual(tl[0], WAFPoint{}) {
		t.Fatal("input modified")
	}
}

// The model behind the issue-6 result: with cache-salt placement, evicting regions of one
// reclaim unit each leaves the FTL nothing to relocate, where per-chunk workloads.LRU on the same
// workload and placement does relocate; without placement regions do not help as much.
func TestSimRegionEvictionMatchesReclaimUnits(t *testing.T) {
	fc := simFTL(8)
	slot := int64(4096 + 1<<20)
	slotOnDev := (slot + fc.MappingUnit - 1) / fc.MappingUnit * fc.MappingUnit
	waf := map[string]float64{}
	for _, c := range []struct {
		pol string
		ev  workloads.Eviction
	}{{"none", workloads.LRU}, {"none", workloads.Region}, {"metadata-class+cache-salt", workloads.LRU}, {"metadata-class+cache-salt", workloads.Region}} {
		g, _ := workloads.NewKV(workloads.KVConfig{Tenants: workloads.MultiTenant(), ChunkTokens: 256, BytesPerToken: 4096, Seed: 1})
		var ttl []float64
		for _, tn := range workloads.MultiTenant() {
			ttl = append(ttl, tn.TTL)
		}
		dc := workloads.DriverConfig{TargetUtil: 0.95, TTL: ttl, Eviction: c.ev}
		if c.ev.Regional() {
			dc.RegionSlots = float64(fc.RUBytes) / float64(slotOnDev)
		}
		r, err := RunOne(context.Background(), RunConfig{Gen: g, Driver: dc, FTL: fc, Policy: c.pol, SlotBytes: slot,
			Deallocate: true, CheckpointOps: 500, WarmupCaps: 1, MeasureCaps: 2})
		if err != nil {
			t.Fatal(err)
		}
		waf[c.pol+"/"+string(c.ev)] = r.WAF
	}
	t.Logf("modelled WAF: %v", waf)
	if w := waf["metadata-class+cache-salt/region"]; w > 1.02 {
		t.Errorf("cache-salt with region eviction: WAF %.3f, want ≤ 1.02", w)
	}
	if a, b := waf["metadata-class+cache-salt/lru"], waf["metadata-class+cache-salt/region"]; a < b+0.03 {
		t.Errorf("cache-salt with per-chunk workloads.LRU: WAF %.3f, want well above region eviction's %.3f", a, b)
	}
	if a, b := waf["none/region"], waf["metadata-class+cache-salt/region"]; a < b+0.2 {
		t.Errorf("region eviction without placement: WAF %.3f, want well above cache-salt's %.3f", a, b)
	}
}

// BenchmarkSimulate measures rbctl simulate's speed: the driver, the simulated engine and
// the FTL model on a 64 GiB device, reported as modelled host bytes per second.
func BenchmarkSimulate(b *testing.B) {
	var host uint64
	for b.Loop() {
		g, _ := workloads.NewKV(workloads.KVConfig{Tenants: workloads.MultiTenant(), ChunkTokens: 256, BytesPerToken: 128 << 10, Seed: 1})
		r, err := RunOne(context.Background(), RunConfig{Gen: g, Driver: workloads.DriverConfig{TargetUtil: 0.9, TTL: []float64{0.15, 0, 0.5}},
			FTL: ftl.Config{MappingUnit: 1 << 20, LogicalBytes: 64 << 30, OP: 0.07, RUBytes: 256 << 20, Handles: 8,
				Isolation: ftl.PersistentlyIsolated},
			Policy: "cache-salt", SlotBytes: 4096 + 32<<20, Deallocate: true, CheckpointOps: 2000})
		if err != nil {
			b.Fatal(err)
		}
		host += r.Timeline[len(r.Timeline)-1].Stats.HostBytes
	}
	b.ReportMetric(float64(host)/b.Elapsed().Seconds()/(1<<40), "TiB/s")
}

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
	for _, tn := range workloads.MultiTenant() {
		ttl = append(ttl, tn.TTL)
	}
	cfg := workloads.KVConfig{Tenants: workloads.MultiTenant(), ChunkTokens: 256, BytesPerToken: 4096, Seed: 1}
	regen := func() (workloads.Generator, error) { return workloads.NewKV(cfg) }
	fc := simFTL(8)
	fc.RUBytes = 32 << 20 // 256 RUs: room for every handle's open RUs
	res := map[string]*Result{}
	for _, pol := range []string{"none", "metadata-class+cache-salt", "oracle:lifetime", "oracle:salt-lifetime", "oracle:salt-frequency"} {
		g, _ := regen()
		r, err := RunOne(context.Background(), RunConfig{Gen: g, Regen: regen, Driver: workloads.DriverConfig{TargetUtil: 0.95, TTL: ttl},
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
	g, _ := workloads.NewKV(workloads.KVConfig{Tenants: workloads.MultiTenant(), ChunkTokens: 256, BytesPerToken: 4096, Seed: 1})
	run := RunConfig{Gen: g, Driver: workloads.DriverConfig{TargetUtil: 0.9}, FTL: simFTL(8), SlotBytes: 4096 + 1<<20}
	for spec, want := range map[string]string{"oracle:bogus": "known: oracle:lifetime", "oracle:lifetime": "Regen"} {
		run.Policy = spec
		if _, err := RunOne(context.Background(), run); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: error %v, want one containing %q", spec, err, want)
		}
	}
	run.Policy, run.Regen, run.FTL = "oracle:lifetime", func() (workloads.Generator, error) { return nil, nil }, simFTL(1)
	if _, err := RunOne(context.Background(), run); !errors.Is(err, placement.ErrSpec) {
		t.Fatalf("one handle: error %v, want placement.ErrSpec", err)
	}
}
