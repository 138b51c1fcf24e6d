package sim

import "time"

// Estimate is what a comparison is expected to take before it runs: its runs, the largest
// run's memory (MemoryBytes) and, when the workload is sized by capacities written (not a
// request trace), the time. It is a rough figure from the model's speed on a 2-core machine
// under load, for warning before a long run, not a prediction to plan by.
type Estimate struct {
	Runs        int
	MemoryBytes int64         // the largest run's, FTL model and simulated cache
	Time        time.Duration // 0: not estimated (a request trace)
	// SlotWrites is the number of slot-sized stores the estimate counts, every run together.
	SlotWrites int64
}

// slotWritesPerSecond is the model's speed with the multi-tenant preset (llama3-8b chunks,
// 16 mapping units a slot) on one core of a loaded 2-core machine: about 180,000 stores a
// second at 1 TiB, fewer on larger models (16 TiB: about 90,000, the cache misses more),
// rounded down for a margin.
const slotWritesPerSecond = 80_000

// Long is how long a comparison may take before simulate warns that it will be long.
const Long = 30 * time.Second

// estimate counts the stores of runs (each repeated for admissions policies; an oracle runs
// twice: record and replay).
func estimate(runs []RunConfig, admissions int, trace bool) (Estimate, error) {
	e := Estimate{Runs: len(runs) * max(admissions, 1)}
	for _, r := range runs {
		model, cache, err := MemoryBytes(r)
		if err != nil {
			return e, err
		}
		e.MemoryBytes = max(e.MemoryBytes, model+cache)
		if trace {
			continue
		}
		unit := max(r.FTL.MappingUnit, 1)
		slotB := max(roundUp(r.SlotBytes, unit), unit)
		caps := r.WarmupCaps + r.MeasureCaps
		if caps == 0 {
			caps = 5
		}
		n := int64(caps * float64(r.FTL.LogicalBytes) / float64(slotB))
		if IsOracle(r.Policy) {
			n *= 2
		}
		e.SlotWrites += n * int64(max(admissions, 1))
	}
	if !trace {
		e.Time = time.Duration(float64(e.SlotWrites) / slotWritesPerSecond * float64(time.Second))
	}
	return e, nil
}
