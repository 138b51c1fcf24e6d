package sim

import (
	"context"
	"math"
	"testing"

	"github.com/rbctl/rbctl/ftl"
)

// explainOptions is a small device whose run has every cause: initially isolated handles,
// slots reused across handles, no deallocate, per-chunk LRU.
func explainOptions() Options {
	o := smallOptions()
	o.DeviceSize, o.RUBytes, o.OP = 4<<30, 8<<20, 0.07
	o.Workload.BytesPerToken, o.Workload.Util = 512, 0.95
	o.Isolation, o.AnySlot, o.Deallocate = ftl.InitiallyIsolated, true, false
	o.WarmupCaps, o.MeasureCaps = 1, 2
	o.Policies = []string{"cache-salt"}
	return o
}

// The parts and the residual add up to the run's WAF − 1, under both attributions, and
// every WAF the table lists is the WAF of a plain run with that setting.
func TestExplainSumsAndPlainRuns(t *testing.T) {
	ctx := context.Background()
	for _, method := range []string{ExplainSequential, ExplainShapley} {
		o := explainOptions()
		o.Explain = method
		if method == ExplainShapley { // 2^n runs: fewer levers (deallocate on, slots by handle)
			o.AnySlot, o.Deallocate = false, true
		}
		rep, err := Run(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Explain) != 1 {
			t.Fatalf("%s: %d explanations, want 1", method, len(rep.Explain))
		}
		e := rep.Explain[0]
		sum := e.Residual
		for _, s := range e.Steps {
			t.Logf("%s: %-60s %-22s part %+.4f alone %v after %v %s", method, s.Cause, s.Change, s.Part, deref(s.Alone), deref(s.After), s.Skipped)
			sum += s.Part
		}
		t.Logf("%s: WAF %.4f residual %.4f mixed %.4f runs %d", method, e.WAF, e.Residual, e.MixedRelocated, e.Runs)
		if e.WAF <= 1.01 {
			t.Fatalf("%s: WAF %.4f: the configuration should amplify", method, e.WAF)
		}
		if math.Abs(sum-(e.WAF-1)) > 1e-9 {
			t.Errorf("%s: parts + residual = %.12f, WAF − 1 = %.12f", method, sum, e.WAF-1)
		}
		if e.MixedRelocated <= 0 || e.MixedRelocated > e.WAF-1+1e-9 {
			t.Errorf("%s: mixed relocation %.4f outside (0, WAF−1]", method, e.MixedRelocated)
		}
		if method != ExplainSequential {
			continue
		}
		// Each counterfactual equals a plain run: the first step alone, and the last
		// configuration (every step) against Run with those flags set by hand.
		plain := func(f func(*Options)) float64 {
			p := explainOptions()
			f(&p)
			r, err := Run(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			return r.Runs[0].HostWAF.Value
		}
		iso := plain(func(p *Options) { p.Isolation = ftl.PersistentlyIsolated })
		if got := deref(e.Steps[0].Alone); got != iso {
			t.Errorf("--isolation persistent alone: table %.6f, plain run %.6f", got, iso)
		}
		op := plain(func(p *Options) { p.OP = 0.14 })
		if got := deref(e.Steps[5].Alone); got != op || e.Steps[5].Change != "--op 0.14" {
			t.Errorf("%s alone: table %.6f, plain run --op 0.14 %.6f", e.Steps[5].Change, got, op)
		}
		all := plain(func(p *Options) {
			p.Isolation, p.AnySlot, p.Deallocate, p.Workload.Eviction, p.RUBytes, p.OP = ftl.PersistentlyIsolated, false, true, "region", 4<<20, 0.14
		})
		if got := deref(e.Steps[5].After); got != all || e.Residual != all-1 {
			t.Errorf("every step: table %.6f (residual %.6f), plain run %.6f", got, e.Residual, all)
		}
		if s := e.Sensitivity[0]; s.Change != "--ru 16M" || s.Alone == nil {
			t.Errorf("sensitivity %+v", s)
		}
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}
