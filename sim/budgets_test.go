package sim

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/placement"
)

// simulate with budgets: every tenant row carries its budget, holds no more than it, the
// rows sum to the run's totals, and giving a hot tenant (a few popular prefixes) half the
// cache against two noisy ones measurably
// changes its hit ratio against sharing the cache (measured and logged, not a constant).
func TestRunWithBudgets(t *testing.T) {
	hit := map[string]float64{}
	for _, spec := range []string{"", "hot=50%"} {
		o := smallOptions()
		o.DeviceSize, o.Policies, o.MeasureCaps = 1<<30, []string{"cache-salt"}, 1
		o.Workload.Tenants = []string{"hot:prefixes=16,theta=1.1", "noisy:w=4,prefixes=100000,theta=0,turns=1", "bulk:w=2,turns=1"}
		if spec != "" {
			b, err := placement.ParseBudgets(spec)
			if err != nil {
				t.Fatal(err)
			}
			o.Workload.Budgets = b
		}
		rep, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		run := rep.Runs[0]
		if run.Failed() || len(run.Tenants) != 3 || strings.Contains(rep.Workload.Description, "budgets "+spec) != (spec != "") {
			t.Fatalf("%q: run %+v", spec, run)
		}
		var evicted, requests, held int64
		for _, tn := range run.Tenants {
			evicted += tn.Evicted
			requests += tn.Requests
			held += tn.SlotsHeld
			switch {
			case spec == "":
				if tn.BudgetSlots != nil || tn.SharedSlots != nil {
					t.Errorf("no budgets, yet tenant %s has %v/%v", tn.Salt, tn.BudgetSlots, tn.SharedSlots)
				}
			case tn.Salt != "hot":
				if tn.SharedSlots == nil || tn.SlotsHeld > *tn.SharedSlots || tn.Evicted == 0 {
					t.Errorf("%s (no budget): held %d, %d evicted, shared %v", tn.Salt, tn.SlotsHeld, tn.Evicted, tn.SharedSlots)
				}
			default:
				if tn.BudgetSlots == nil || tn.SlotsHeld > *tn.BudgetSlots {
					t.Errorf("hot: held %d, budget %v", tn.SlotsHeld, tn.BudgetSlots)
				}
			}
			if tn.Salt == "hot" {
				hit[spec] = tn.HitRatio
			}
		}
		if evicted != run.Evicted || requests != run.Requests {
			t.Errorf("%q: tenant rows sum to %d evicted, %d requests; the run has %d, %d", spec, evicted, requests, run.Evicted, run.Requests)
		}
		if target := int64(0.9 * float64(rep.Workload.Slots)); held > target {
			t.Errorf("%q: tenants hold %d slots, above the target %d", spec, held, target)
		}
	}
	t.Logf("the hot tenant's hit ratio: %.4f sharing the cache, %.4f with half of it to itself", hit[""], hit["hot=50%"])
	if hit[""] == hit["hot=50%"] {
		t.Error("a budget of its own did not change the hot tenant's hit ratio at all")
	}
}

// Budgets the modelled cache cannot hold are refused before anything runs, for every sweep
// point.
func TestRunRefusesBudgetsOverCapacity(t *testing.T) {
	o := smallOptions()
	b, _ := placement.ParseBudgets("chat=1000000")
	o.Workload.Budgets = b
	ran := false
	o.Progress = func(string, int, int) { ran = true }
	_, err := Run(context.Background(), o)
	if !errors.Is(err, placement.ErrBudget) || !strings.Contains(err.Error(), "is 1000000 slots, the cache holds") || ran {
		t.Fatalf("err %v, ran %v", err, ran)
	}
}
