package workloads

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/rbctl/rbctl/ftl"
)

func TestExpWAF(t *testing.T) {
	if os.Getenv("EXP") == "" {
		t.Skip()
	}
	util, _ := strconv.ParseFloat(os.Getenv("UTIL"), 64)
	if util == 0 {
		util = 0.9
	}
	pre, _ := ftl.ParsePrecondition(os.Getenv("PRE"))
	ru, _ := strconv.ParseInt(os.Getenv("RU"), 10, 64)
	if ru == 0 {
		ru = 1024
	}
	for _, pol := range []string{"none", "cache-salt", "metadata-class+cache-salt", "hotness"} {
		g, err := NewKV(KVConfig{Tenants: MultiTenant(), ChunkTokens: 256, BytesPerToken: 128 << 10, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		var ttl []float64
		for _, tn := range MultiTenant() {
			ttl = append(ttl, tn.TTL)
		}
		r, err := RunSim(context.Background(), SimRun{Gen: g, Driver: DriverConfig{TargetUtil: util, TTL: ttl},
			FTL:          ftl.Config{MappingUnit: 1 << 20, LogicalBytes: 256 << 30, OP: 0.07, RUBytes: ru << 20, Handles: 8, Isolation: ftl.PersistentlyIsolated},
			Precondition: pre, Policy: pol, SlotBytes: 32<<20 + 4096, Deallocate: true, CheckpointOps: 2000})
		if err != nil {
			t.Fatal(err)
		}
		c := r.Run.Counters
		t.Logf("%-28s waf=%.3f steady=%.3f infeasible=%v hit=%.3f stored=%d evicted=%d expired=%d ckpt=%d slots=%d", r.Policy, r.WAF, r.SteadyWAF, r.Infeasible, c.HitRatio(), c.ChunksStored, c.Evicted, c.Expired, r.Checkpoints, r.Slots)
		t.Logf("   valid=%.3f", float64(r.Timeline[len(r.Timeline)-1].Stats.ValidBytes)/float64(256<<30))
	}
}
