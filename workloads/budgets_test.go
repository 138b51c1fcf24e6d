package workloads

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/placement"
)

// script is a generator replaying a fixed list of requests, one key each.
type script struct {
	salts []string
	keys  []Key
	i     int
}

func (s *script) Salts() []string { return s.salts }
func (s *script) ChunkBytes() int { return 4096 }
func (s *script) Next(op *Op) bool {
	if s.i >= len(s.keys) {
		return false
	}
	k := s.keys[s.i : s.i+1]
	s.i++
	*op = Op{Kind: KindRequest, Tenant: k[0].Tenant, Keys: k, Size: 4096}
	return true
}

func mustBudgets(t *testing.T, spec string) placement.Budgets {
	t.Helper()
	b, err := placement.ParseBudgets(spec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Within a tenant the least recent entry goes first (a hit refreshes one), and a tenant over
// its budget never evicts another tenant's entries, even ones older than all of its own.
func TestBudgetEvictsOwnLRU(t *testing.T) {
	a := func(h uint64) Key { return Key{Hash: h, Tenant: 0} }
	b := func(h uint64) Key { return Key{Hash: h, Tenant: 1} }
	// b1 b2 first (the oldest entries), then a1 a2 a3, a hit on a1, then a4 and a5: a is over
	// its budget of 3 twice.
	g := &script{salts: []string{"a", "b"}, keys: []Key{b(1), b(2), a(1), a(2), a(3), a(1), a(4), a(5)}}
	be := newMapBackend(100)
	d, err := NewDriver(DriverConfig{TargetUtil: 1, Budgets: mustBudgets(t, "a=3,b=3")}, g, be)
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []Key{b(1), b(2), a(1), a(4), a(5)} {
		if !be.keys[k] {
			t.Errorf("%v was evicted", k)
		}
	}
	for _, k := range []Key{a(2), a(3)} {
		if be.keys[k] {
			t.Errorf("%v is still cached; a's least recent entries were a2 then a3", k)
		}
	}
	c := res.Counters
	if c.Evicted != 2 || c.TenantEvicted[0] != 2 || c.TenantEvicted[1] != 0 {
		t.Errorf("evicted %d (by tenant %v), want a's 2", c.Evicted, c.TenantEvicted)
	}
	if res.TenantHeld[0] != 3 || res.TenantHeld[1] != 2 || res.Budgets == nil || res.Budgets.Limits[0] != 3 {
		t.Errorf("held %v, budgets %+v", res.TenantHeld, res.Budgets)
	}
}

// A run of the multi-tenant workload with budgets: after every store no budgeted tenant
// holds more than its budget, and the tenants without one stay within the shared rest.
func TestBudgetNeverExceeded(t *testing.T) {
	for _, ev := range []Eviction{LRU, FIFO, Region} {
		g, _ := NewKV(KVConfig{Tenants: MultiTenant(), ChunkTokens: 256, BytesPerToken: 16, Requests: 6000, Seed: 4})
		be := newMapBackend(2000)
		cfg := DriverConfig{Eviction: ev, TargetUtil: 0.9, Budgets: mustBudgets(t, "chat=10%,rag=700"), SampleBytes: 4096}
		if ev == Region {
			cfg.RegionSlots = 16
		}
		var d *Driver
		var peak [3]int64
		checks := 0
		cfg.Sample = func(Counters) {
			checks++
			for i, n := range d.res.tenantHeld {
				peak[i] = max(peak[i], n)
			}
			if chat, rag := d.res.tenantHeld[0], d.res.tenantHeld[1]; chat > 180 || rag > 700 {
				t.Fatalf("%s: chat holds %d (budget 180), rag %d (budget 700)", ev, chat, rag)
			}
			if agent := d.res.tenantHeld[2]; agent > 1800-180-700 {
				t.Fatalf("%s: agent holds %d, more than the %d shared slots", ev, agent, 1800-180-700)
			}
		}
		var err error
		if d, err = NewDriver(cfg, g, be); err != nil {
			t.Fatal(err)
		}
		res, err := d.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if checks < 1000 {
			t.Fatalf("%s: only %d checks", ev, checks)
		}
		// Every class filled up to its limit (less one region) and had to evict.
		for i, lim := range []int64{180, 700, 920} {
			slack := int64(1)
			if ev == Region {
				slack = 16
			}
			if peak[i] < lim-slack || res.Counters.TenantEvicted[i] == 0 {
				t.Errorf("%s: tenant %d peaked at %d of %d with %d evictions", ev, i, peak[i], lim, res.Counters.TenantEvicted[i])
			}
		}
		var sum int64
		for _, n := range res.Counters.TenantEvicted {
			sum += n
		}
		if sum != res.Counters.Evicted {
			t.Errorf("%s: tenants' evictions sum to %d, total %d", ev, sum, res.Counters.Evicted)
		}
	}
}

// "equal" gives the workload's tenants the same budget each, and a budgeted tenant
// keeps its hit ratio however hard a noisy neighbour writes.
func TestBudgetEqualIsolates(t *testing.T) {
	hot := DefaultTenant("hot")
	hot.Prefixes, hot.Theta, hot.Weight = 16, 1.1, 1
	noisy := DefaultTenant("noisy")
	noisy.Prefixes, noisy.Theta, noisy.Weight, noisy.Turns = 100000, 0, 4, 1
	hit := map[string]float64{}
	for _, spec := range []string{"", "equal"} {
		g, _ := NewKV(KVConfig{Tenants: []Tenant{hot, noisy}, ChunkTokens: 256, BytesPerToken: 16, Requests: 8000, Seed: 5})
		cfg := DriverConfig{TargetUtil: 1}
		if spec != "" {
			cfg.Budgets = mustBudgets(t, spec)
		}
		d, err := NewDriver(cfg, g, newMapBackend(1000))
		if err != nil {
			t.Fatal(err)
		}
		res, err := d.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		c := res.Counters
		hit[spec] = float64(c.TenantChunksHit[0]) / float64(c.TenantChunksRequested[0])
		if spec == "equal" && (res.Budgets.Limits[0] != 500 || res.Budgets.Limits[1] != 500 || res.TenantHeld[0] > 500) {
			t.Errorf("equal: budgets %v, held %v", res.Budgets.Limits, res.TenantHeld)
		}
	}
	t.Logf("hot tenant's hit ratio: %.3f shared, %.3f with equal budgets", hit[""], hit["equal"])
	if hit["equal"] <= hit[""] {
		t.Errorf("the hot tenant's hit ratio %.3f with its own budget is not above %.3f sharing with the noisy one", hit["equal"], hit[""])
	}
}

func TestBudgetRefusals(t *testing.T) {
	g := func() Generator { return &script{salts: []string{"a", "b"}} }
	for spec, msg := range map[string]string{
		"a=60%,b=50%": "shares add up to 110%",
		"a=91":        "is 91 slots, the cache holds 90 (budgets divide the 90 slots the cache keeps in use: utilisation 0.9 of its 100)",
		"c=1":         `salt "c" has a budget, but the workload has no such tenant`,
		"a=90":        `none is left for the salts without one ("b")`,
	} {
		_, err := NewDriver(DriverConfig{TargetUtil: 0.9, Budgets: mustBudgets(t, spec)}, g(), newMapBackend(100))
		if err == nil || !errors.Is(err, placement.ErrBudget) || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want %q", spec, err, msg)
		}
	}
	_, err := NewDriver(DriverConfig{TargetUtil: 1, Eviction: Region, RegionSlots: 8, Budgets: mustBudgets(t, "a=10")}, g(), newMapBackend(100))
	if !errors.Is(err, ErrRegionTooLarge) || !strings.Contains(err.Error(), `tenant "a"'s budget of 10 slots`) {
		t.Errorf("region of 8 in a budget of 10: %v", err)
	}
	// Build refuses a salt the workload lacks before any capacity is known.
	s := Spec{Kind: "kv", Model: "tiny", ChunkTokens: 256, Budgets: mustBudgets(t, "chta=10%")}
	if _, err := s.Build(); err == nil || !strings.Contains(err.Error(), `salt "chta"`) {
		t.Errorf("Build with a misspelt salt: %v", err)
	}
}
