package bench

import (
	"context"
	"math"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
)

// bench --explain replays the shadow model's recorded input: the replay as run gives the
// run's own modelled WAF for the first policy (a fresh model both times), each change's
// WAF alone is a replay on a model with that setting, and the parts add up to WAF − 1.
func TestBenchExplainReplays(t *testing.T) {
	o := fixedOptions()
	o.Device = blockdev.NewMem(64<<20, 4096)
	o.Policies, o.Causes = []string{"none"}, "sequential"
	o.Workload.Requests, o.Workload.Keys = 6000, 900
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Explain) != 1 {
		t.Fatalf("%d explanations, notes %v, run note %q", len(rep.Explain), rep.Notes, rep.Runs[0].Note)
	}
	e, run := rep.Explain[0], rep.Runs[0]
	if math.Abs(e.WAF-run.HostWAF.Value) > 1e-12 {
		t.Errorf("replay as run %.6f, the run's modelled WAF %.6f", e.WAF, run.HostWAF.Value)
	}
	sum := e.Residual
	applied := 0
	for _, s := range e.Steps {
		t.Logf("%-50s %-16s part %+.4f alone %v %s", s.Cause, s.Change, s.Part, s.Alone, s.Skipped)
		sum += s.Part
		if s.Skipped == "" {
			applied++
		}
	}
	if applied < 2 || math.Abs(sum-(e.WAF-1)) > 1e-9 {
		t.Errorf("%d changes applied; parts + residual %.9f, WAF − 1 %.9f", applied, sum, e.WAF-1)
	}
	if e.WAF <= 1 {
		t.Errorf("WAF %.4f: the test wants amplification to explain", e.WAF)
	}
}
