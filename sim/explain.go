package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/reports"
	"github.com/rbctl/rbctl/units"
	"github.com/rbctl/rbctl/workloads"
)

// WAF by cause. A run's WAF − 1 is split into parts, one per cause, each measured as what
// one change to the configuration removes when the same workload (same seed, so the same
// requests) runs again with it: a counterfactual run, i.e. exactly the plain run with that
// setting. The changes go from the run's configuration toward an ideal one; after the last
// one, what is left is named the residual. Two attributions, both exact sums:
//
//   - sequential: the changes are applied one after another in the order of explainLevers;
//     a part is the WAF before its step minus the WAF after it. len(levers)+1 runs, plus one
//     per lever for the "alone" column. The order matters (causes interact).
//   - shapley: a part is the mean of that difference over every order of the applicable
//     changes (the Shapley value of the cooperative game v(S) = WAF(base) − WAF(base+S));
//     2^n runs.
//
// Either way the parts plus the residual are WAF(base) − 1, and every WAF in the table is
// a run of simulate with the listed flags.

// Explain methods (Options.Explain).
const (
	ExplainSequential = "sequential"
	ExplainShapley    = "shapley"
)

// lever is one cause and the change that removes it.
type lever struct {
	cause string
	// change returns the flag spelling and applies the change to o, or returns skip: why
	// it does not apply to base (the run has the setting already).
	change func(o *Options, base Options, ru int64) (flag, skip string)
}

// spareOP is the over-provisioning of the "more spare" counterfactual: twice the run's.
func spareOP(op float64) float64 { return math.Round(max(2*op, op+0.07)*100) / 100 }

var explainLevers = []lever{
	{"handles mixed by GC (initially isolated RUHs share a GC destination)", func(o *Options, b Options, _ int64) (string, string) {
		if b.Isolation == ftl.PersistentlyIsolated {
			return "", "already persistently isolated"
		}
		o.Isolation = ftl.PersistentlyIsolated
		return "--isolation persistent", ""
	}},
	{"slots reused across handles", func(o *Options, b Options, _ int64) (string, string) {
		if !b.AnySlot {
			return "", "slots already reused by handle"
		}
		o.AnySlot = false
		return "--slot-reuse handle", ""
	}},
	{"no deallocate on evict", func(o *Options, b Options, _ int64) (string, string) {
		if b.Deallocate {
			return "", "already deallocates"
		}
		o.Deallocate = true
		return "--deallocate all", ""
	}},
	{"per-chunk eviction (RUs partly live when GC needs them)", func(o *Options, b Options, _ int64) (string, string) {
		ev := b.Workload.Eviction
		switch ev {
		case workloads.Region, workloads.RegionFIFO:
			return "", "already evicts regions"
		case workloads.FIFO:
			o.Workload.Eviction = workloads.RegionFIFO
		default:
			o.Workload.Eviction = workloads.Region
		}
		return "--eviction " + string(o.Workload.Eviction), ""
	}},
	{"RU size against the eviction granule", func(o *Options, _ Options, ru int64) (string, string) {
		o.RUBytes = ru / 2
		return "--ru " + units.FormatSpec(ru/2), ""
	}},
	{"over-provisioning", func(o *Options, b Options, _ int64) (string, string) {
		o.OP = spareOP(b.OP)
		return "--op " + strconv.FormatFloat(o.OP, 'f', -1, 64), ""
	}},
}

// checkExplain refuses an explanation that cannot be made, before anything runs.
func (o Options) checkExplain() error {
	switch o.Explain {
	case "", ExplainSequential, ExplainShapley:
	default:
		return fmt.Errorf("%w: method %q: want %s or %s", ErrExplain, o.Explain, ExplainSequential, ExplainShapley)
	}
	if o.Explain != "" && o.Sweep != nil {
		return fmt.Errorf("%w: an explanation is of single runs, not of a sweep", ErrExplain)
	}
	return nil
}

// ErrExplain: an explanation was asked for that cannot be made.
var ErrExplain = errors.New("explain")

// explainAll adds an explanation for every run of rep that has a modelled WAF.
func (o Options) explainAll(ctx context.Context, rep *reports.Report) error {
	for _, run := range rep.Runs {
		if run.Failed() || run.HostWAF == nil {
			continue
		}
		if IsOracle(run.Policy) || (o.LMCache != nil && run.Policy == o.LMCache.RunName()) {
			rep.Notes = append(rep.Notes, "--explain: "+run.Policy+" is not explained (an oracle or an LMCache config cannot be re-run under other settings by name)")
			continue
		}
		e, err := o.Explained(ctx, run, rep.Device.RUBytes)
		if err != nil {
			return err
		}
		rep.Explain = append(rep.Explain, *e)
	}
	return nil
}

// plainWAF runs pol with admission adm under o, alone: the plain run a counterfactual is.
func (o Options) plainWAF(ctx context.Context, pol, adm string) (float64, error) {
	p := o
	p.Policies, p.Admissions, p.Explain, p.LMCache, p.Sweep, p.Progress, p.Drive = []string{pol}, []string{adm}, "", nil, nil, nil, nil
	rep, err := Run(ctx, p)
	if err != nil {
		return 0, err
	}
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	r := rep.Runs[0]
	if r.Failed() || r.HostWAF == nil {
		return 0, fmt.Errorf("%s: %s", pol, r.Error)
	}
	return r.HostWAF.Value, nil
}

// Explained decomposes run's WAF − 1 (run made under o; ru is its resolved RU size).
func (o Options) Explained(ctx context.Context, run reports.Run, ru int64) (*reports.Explanation, error) {
	adm := run.Admission
	if adm == "" {
		adm = o.Workload.Admission
		if adm == "" {
			adm = workloads.AdmitAll
		}
	}
	base := o
	if base.RUBytes == 0 {
		base.RUBytes = ru
	}
	e := &reports.Explanation{Policy: run.Policy, Admission: run.Admission, WAF: run.HostWAF.Value, Method: cmp.Or(o.Explain, ExplainSequential)}
	if h := run.HostWAF.HostBytes; h > 0 {
		e.MixedRelocated = float64(run.HostWAF.MixedRelocatedBytes) / float64(h)
	}
	e.Steps = make([]reports.ExplainStep, len(explainLevers))
	for i, l := range explainLevers {
		scratch := base
		flag, skip := l.change(&scratch, base, ru)
		e.Steps[i] = reports.ExplainStep{Cause: l.cause, Change: flag, Skipped: skip}
	}
	var extra []sensitivity
	waf := func(steps []int) (float64, error) {
		p := base
		var flags []string
		for _, i := range steps {
			explainLevers[i].change(&p, base, ru)
			flags = append(flags, e.Steps[i].Change)
		}
		if o.Progress != nil {
			o.Progress(fmt.Sprintf("explain %s: %s", run.Policy, strings.Join(flags, " ")), e.Runs, 0)
		}
		return p.plainWAF(ctx, run.Policy, adm)
	}
	skip := func(i int, err error) string {
		if ctx.Err() != nil {
			return ""
		}
		// Persistent isolation without the spare it needs is no configuration; with it, it
		// is one (sensitivity rows: isolation with that spare, and that spare alone).
		var ie *ftl.InfeasibleError
		if i == 0 && errors.As(err, &ie) && ie.MinOP > base.OP {
			op := ie.MinOP
			ops := strconv.FormatFloat(op, 'f', -1, 64)
			extra = append(extra, sensitivity{"persistent isolation with the spare it needs (sensitivity)",
				e.Steps[i].Change + " --op " + ops, func(p *Options) { p.Isolation, p.OP = ftl.PersistentlyIsolated, op }},
				sensitivity{"that spare, still initially isolated (sensitivity)", "--op " + ops, func(p *Options) { p.OP = op }})
		}
		if errors.Is(err, ftl.ErrCannotReclaim) || errors.Is(err, ftl.ErrInfeasible) {
			return "infeasible here: " + reports.Brief(err)
		}
		return "not possible here: " + reports.Brief(err)
	}
	if err := reports.Attribute(e, waf, skip); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("explain %s: %w", run.Policy, err)
	}
	// Sensitivity: the RU doubled, alone (and isolation with its spare, above).
	extra = append(extra, sensitivity{"larger RU (sensitivity)", "--ru " + units.FormatSpec(2*ru), func(p *Options) { p.RUBytes = 2 * ru }})
	for _, x := range extra {
		p := base
		x.set(&p)
		s := reports.ExplainStep{Cause: x.cause, Change: x.change}
		if v, err := p.plainWAF(ctx, run.Policy, adm); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			s.Skipped = "infeasible here: " + reports.Brief(err)
		} else {
			s.Alone = reports.F64(v)
		}
		e.Runs++
		e.Sensitivity = append(e.Sensitivity, s)
	}
	return e, nil
}

// sensitivity is a counterfactual outside the sum.
type sensitivity struct {
	cause, change string
	set           func(*Options)
}
