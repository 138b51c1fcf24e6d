package sim

import (
	"context"
	"testing"
)

// Plan is told the runs, memory and time before the first run; Step reports each run's
// warm-up, then its window, with a fraction that grows to the end of the run.
func TestPlanAndSteps(t *testing.T) {
	o := smallOptions()
	var plans []Estimate
	var steps []Step
	o.Plan = func(e Estimate) { plans = append(plans, e) }
	o.Step = func(s Step) { steps = append(steps, s) }
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if len(plans) != 1 || plans[0].Runs != 2 || plans[0].MemoryBytes <= 0 || plans[0].Time <= 0 || plans[0].SlotWrites <= 0 {
		t.Fatalf("plans %+v", plans)
	}
	warm, measured, last := 0, 0, map[int]float64{}
	for _, s := range steps {
		if s.N != 2 || s.Frac < last[s.I] || s.Frac > 1.01 {
			t.Fatalf("step %+v after %g", s, last[s.I])
		}
		last[s.I] = s.Frac
		if s.Warm {
			warm++
		} else {
			measured++
		}
	}
	if warm == 0 || measured == 0 || last[0] < 0.9 || last[1] < 0.9 || steps[0].Run != "none" {
		t.Fatalf("%d warm-up and %d measured steps, last fractions %v, first %+v", warm, measured, last, steps[0])
	}
	// The estimate grows with what the comparison writes: 1000 times the device, 1000
	// times the time.
	small, err := estimate([]RunConfig{{FTL: mustPoint(t, o).fc, SlotBytes: 1 << 20, Policy: "none", WarmupCaps: 1, MeasureCaps: 4}}, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	big := o
	big.DeviceSize *= 1000
	large, err := estimate([]RunConfig{{FTL: mustPoint(t, big).fc, SlotBytes: 1 << 20, Policy: "none", WarmupCaps: 1, MeasureCaps: 4}}, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if r := float64(large.Time) / float64(small.Time); r < 900 || r > 1100 || large.MemoryBytes <= small.MemoryBytes {
		t.Fatalf("1x %+v, 1000x %+v", small, large)
	}
}

func mustPoint(t *testing.T, o Options) point {
	t.Helper()
	src, err := o.Workload.Build()
	if err != nil {
		t.Fatal(err)
	}
	pts, err := o.points(src, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return pts[0]
}
