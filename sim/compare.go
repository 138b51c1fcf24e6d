// Package sim runs KV-cache workloads through a model of the engine (its layout, slot
// allocation, checkpoints and deallocates; no data moves) into the FTL model of an FDP SSD,
// and compares placement policies by their modelled WAF: rbctl simulate. A terabyte-class
// device simulates in seconds. Oracle placements (oracle.go) are future-knowledge
// references beside the policies.
package sim

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/lmcache"
	"github.com/rbctl/rbctl/placement"
	"github.com/rbctl/rbctl/reports"
	"github.com/rbctl/rbctl/workloads"
)

// Options is one simulate comparison: the workload once per policy (and per sweep value).
type Options struct {
	Workload     workloads.Spec
	DeviceSize   int64   // logical bytes of the modelled device
	OP           float64 // over-provisioning
	RUBytes      int64   // 0: DeviceSize/512 (Geometry)
	MappingUnit  int64   // 0: derived from the slot and RU sizes (Geometry)
	Handles      int
	Isolation    ftl.Isolation
	GC           ftl.GCPolicy
	Reserve      int // free RUs kept for GC (0: the minimum)
	Precondition ftl.Precondition
	Policies     []string // placement.Parse specs or oracle: references
	// Admissions are the admission policies (workloads.NewAdmission) each placement runs
	// with; empty: the workload's (Workload.Admission).
	Admissions []string
	// LMCache, when set, runs an LMCache config's placement first, as its RunName().
	LMCache    *lmcache.File
	Deallocate bool
	// AnySlot reuses the most recently freed slot whatever handle wrote it (LMCache's
	// fdp_slot_reuse_policy none); false reuses a slot last written through the same handle.
	AnySlot       bool
	CheckpointOps int64
	WarmupCaps    float64 // warm-up, in device capacities of payload written
	MeasureCaps   float64 // measured window, same unit
	Sweep         *Sweep  // nil: one point
	// MemAvailable bounds the estimated memory of the largest run (nil: /proc/meminfo).
	MemAvailable func() (int64, error)
	// Fit, for a node's recording (workloads l2trace:), takes the recording node's cache
	// where the caller gave none (recording.go).
	Fit workloads.Fit
	// Progress, when set, is called before each run with its label and position.
	Progress func(run string, i, n int)
	// Step, when set, is called as a run advances (at each timeline sample).
	Step func(Step)
	// Plan, when set, is called once every check has passed, before the first run, with what
	// the comparison is expected to take.
	Plan func(Estimate)
	// Explain, "sequential" or "shapley", adds WAF by cause for every run (explain.go).
	Explain string
	// Drive, when set, projects every run's drive life against it (capacity: DeviceSize).
	Drive *reports.Drive
}

// Step is a run's position: run I (from 0) of N, labelled Run, Frac of it done, in its
// warm-up or not.
type Step struct {
	Run  string
	I, N int
	Frac float64
	Warm bool
}

// point is one sweep value's configuration.
type point struct {
	v    float64
	util float64
	fc   ftl.Config
}

// Run checks every point of the comparison (policies, feasibility, memory) before the
// first one runs, then runs them in order. A failed run is kept with its error; a
// cancelled ctx stops the loop and marks the report Interrupted and Partial. The error is
// for a comparison that cannot start.
func Run(ctx context.Context, o Options) (*reports.Report, error) {
	if err := o.checkExplain(); err != nil {
		return nil, err
	}
	src, err := o.Workload.Build()
	if err != nil {
		return nil, err
	}
	if o.LMCache != nil {
		if _, _, err := lmcachePolicy(o.LMCache, o.Handles); err != nil {
			return nil, err
		}
		o.Policies = append([]string{o.LMCache.RunName()}, o.Policies...)
	}
	if len(o.Policies) == 0 {
		return nil, fmt.Errorf("%w: no placement policy to compare", placement.ErrSpec)
	}
	for _, pol := range o.Policies[len(o.lmcacheRuns()):] {
		if IsOracle(pol) {
			err = CheckOracle(pol, o.Handles)
		} else {
			_, err = placement.Parse(pol, o.Handles)
		}
		if err != nil {
			return nil, fmt.Errorf("placement %s: %w", pol, err)
		}
	}
	for _, a := range o.Admissions {
		if err := workloads.CheckAdmission(a); err != nil {
			return nil, err
		}
	}
	if len(o.Admissions) == 0 {
		o.Admissions = strings.Split(cmp.Or(o.Workload.Admission, workloads.AdmitAll), ",")
	}
	slotBytes := int64(engine.DefaultHeaderBytes + src.ChunkBytes) // Backend rounds it to the mapping unit
	var fitNotes []string
	if src.Recorded != nil {
		if fitNotes, err = o.fitRecording(src.Recorded, slotBytes); err != nil {
			return nil, err
		}
	}
	points, err := o.points(src, slotBytes)
	if err != nil {
		return nil, err
	}
	var all []RunConfig
	for _, pt := range points {
		for _, pol := range o.Policies {
			all = append(all, RunConfig{FTL: pt.fc, SlotBytes: slotBytes, Policy: pol, WarmupCaps: o.WarmupCaps, MeasureCaps: o.MeasureCaps})
		}
	}
	avail := o.MemAvailable
	if avail == nil {
		avail = MemAvailable
	}
	if err := checkMemory(all, avail, otherLimits()); err != nil {
		return nil, err
	}
	if o.Plan != nil {
		if est, err := estimate(all, len(o.Admissions), src.Trace != nil); err == nil {
			o.Plan(est)
		}
	}
	w := o.Workload
	rep := reports.New("simulate")
	rep.Workload = reports.Workload{Name: src.Name, Seed: w.Seed, Tenants: src.Salts, ChunkBytes: src.ChunkBytes,
		TargetUtil: w.Util, Eviction: string(w.Eviction), Workers: 1, Rate: w.Rate, Description: src.Description}
	if rep.Workload.Eviction == "" {
		rep.Workload.Eviction = string(workloads.LRU)
	}
	rep.Window = reports.Window{Description: fmt.Sprintf("WAF after %g× capacity warm-up over %g× capacity; steady = last half", o.WarmupCaps, o.MeasureCaps)}
	if src.Trace != nil {
		rep.Trace = src.Trace
		rep.Window.Description = "the whole trace, from its first request (no warm-up); steady WAF = last half of the payload written"
		if n := src.Trace.FileRequests; n > 0 {
			rep.Window.Description = fmt.Sprintf("the trace's first %d of %d requests (--requests; no warm-up); steady WAF = last half of the payload written", src.Trace.Requests, n)
		}
	}
	if src.Recorded != nil {
		rep.Window.Description = "the whole recording, from its first record (no warm-up); steady WAF = last half of the payload written"
	}
	if o.Sweep != nil {
		rep.Sweep = o.Sweep.Name
	}
	if err := o.runAll(ctx, rep, src, points, slotBytes); err != nil {
		return nil, err
	}
	if o.Explain != "" && !rep.Interrupted {
		if err := o.explainAll(ctx, rep); err != nil {
			return nil, err
		}
	}
	if o.Drive != nil {
		d := *o.Drive
		d.WithCapacity(o.DeviceSize)
		rep.ProjectDrive(&d, chunkTokens(o.Workload))
	}
	if o.LMCache != nil {
		rep.Notes = append(rep.Notes, lmcacheNotes(o.LMCache)...)
	}
	rep.Notes = append(rep.Notes, fitNotes...)
	if rd := src.Recorded; rd != nil && rd.Gets > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("the recording node hit %d of its %d gets (%.2f %%); a replay's hit %% counts gets and peer fetches together",
			rd.GetHits, rd.Gets, 100*float64(rd.GetHits)/float64(rd.Gets)))
	}
	rep.Notes = append(rep.Notes, "WAF is modelled (FTL model fed with the simulated engine's writes and deallocates), not measured on a drive")
	return rep, nil
}

// points derives each sweep value's FTL configuration and refuses any in which GC can run
// out of room.
func (o Options) points(src *workloads.Source, slotBytes int64) ([]point, error) {
	values := []float64{math.NaN()}
	if o.Sweep != nil {
		values = o.Sweep.Values
	}
	var out []point
	for _, v := range values {
		pt := point{v: v, util: o.Workload.Util}
		op, ru, size := o.OP, o.RUBytes, o.DeviceSize
		if o.Sweep != nil {
			switch o.Sweep.Name {
			case "util":
				pt.util = v
			case "op":
				op = v
			case "ru":
				ru = int64(v)
			case "size":
				size = int64(v)
			}
		}
		ru, unit, err := Geometry(size, slotBytes, ru, o.MappingUnit)
		if err != nil {
			return nil, err
		}
		pt.fc = ftl.Config{MappingUnit: unit, LogicalBytes: size / unit * unit, OP: op, RUBytes: ru, Handles: o.Handles,
			Isolation: o.Isolation, GC: o.GC, FreeReserve: o.Reserve}
		err = pt.fc.CheckFeasible("this model", ftl.Tunable{OP: true, OPMax: 0.9, RU: true, Handles: true})
		if err == nil && len(o.Workload.Budgets) > 0 {
			err = o.checkBudgets(src, pt, slotBytes)
		}
		if err != nil {
			if o.Sweep != nil {
				return nil, fmt.Errorf("sweep %s=%g: %w", o.Sweep.Name, v, err)
			}
			return nil, err
		}
		out = append(out, pt)
	}
	return out, nil
}

// lmcacheRuns is the head of o.Policies (after Run added it) that is the LMCache config's.
func (o Options) lmcacheRuns() []string {
	if o.LMCache == nil {
		return nil
	}
	return o.Policies[:1]
}

// checkBudgets refuses tenant budgets the cache of point pt cannot hold.
func (o Options) checkBudgets(src *workloads.Source, pt point, slotBytes int64) error {
	l, err := Layout(pt.fc, slotBytes, 0)
	if err != nil {
		return err
	}
	return o.Workload.CheckBudgets(src, l.MaxSlots, l.SlotBytes, pt.util)
}

// job is one run of a comparison: a policy with an admission policy at a sweep point.
type job struct {
	pt       point
	pol, adm string
	lmcache  bool // pol is the LMCache config's
}

// label names a job in progress and partial-result lines.
func (o Options) label(j job) string {
	name := o.Sweep.label(j.pol, j.pt.v)
	if len(o.Admissions) > 1 || j.adm != workloads.AdmitAll {
		name += " [" + j.adm + "]"
	}
	return name
}

// runAll runs every policy with every admission policy at every point into rep.
func (o Options) runAll(ctx context.Context, rep *reports.Report, src *workloads.Source, points []point, slotBytes int64) error {
	var jobs []job
	for _, pt := range points {
		for _, adm := range o.Admissions {
			for qi, pol := range o.Policies {
				jobs = append(jobs, job{pt: pt, pol: pol, adm: adm, lmcache: qi < len(o.lmcacheRuns())})
			}
		}
	}
	rest := func(i int) []string {
		var out []string
		for _, j := range jobs[i:] {
			out = append(out, o.label(j))
		}
		return out
	}
	var notRun []string
	cut, done := "", 0
	for i, j := range jobs {
		fc := j.pt.fc
		rep.Device = reports.Device{Kind: "model", SizeBytes: fc.LogicalBytes, Handles: o.Handles, RUBytes: fc.RUBytes, OP: fc.OP,
			MappingUnit: fc.MappingUnit, Isolation: o.Isolation.String(), GC: o.GC.String(), Precondition: o.Precondition.String(), Deallocate: o.Deallocate}
		if ctx.Err() != nil {
			notRun = rest(i)
			break
		}
		if o.Progress != nil {
			o.Progress(o.label(j), i, len(jobs))
		}
		g, err := src.New()
		if err != nil {
			return err
		}
		dc, err := o.Workload.Driver(src, fc.RUBytes, roundUp(slotBytes, fc.MappingUnit))
		if err != nil {
			return err
		}
		dc.TargetUtil = j.pt.util
		dc.Workers = 1 // the model is deterministic only single-threaded
		dc.Admission = j.adm
		// An RU sweep changes the region size per value: the workload cannot state one.
		if o.Sweep == nil || o.Sweep.Name != "ru" {
			rep.Workload.RegionSlots = dc.RegionSlots
		}
		rc := RunConfig{Gen: g, Driver: dc, FTL: fc, Precondition: o.Precondition, Policy: j.pol, Regen: src.New,
			Model: o.Workload.Model, SlotBytes: slotBytes, Deallocate: o.Deallocate, CheckpointOps: o.CheckpointOps,
			WarmupCaps: o.WarmupCaps, MeasureCaps: o.MeasureCaps, AnySlot: o.AnySlot}
		if src.Trace != nil {
			rc.TraceRequests = src.Trace.Requests * int64(max(o.Workload.TraceLoops, 1))
		} else if src.Recorded != nil {
			rc.TraceRequests = src.Recorded.Ops() // replayed whole, from its first record
		}
		if j.lmcache {
			var affinity bool
			if rc.PolicyImpl, affinity, err = lmcachePolicy(o.LMCache, o.Handles); err != nil {
				return err
			}
			rc.AnySlot = !affinity
		}
		if o.Step != nil {
			label, i, n := o.label(j), i, len(jobs)
			rc.OnSample = func(frac float64, warm bool) { o.Step(Step{Run: label, I: i, N: n, Frac: frac, Warm: warm}) }
		}
		res, err := RunOne(ctx, rc)
		if err != nil && ctx.Err() != nil {
			// Stopped before anything of this run was measured (an oracle's recording pass).
			notRun = rest(i)
			break
		}
		var run reports.Run
		if err != nil {
			run = reports.Run{Policy: j.pol, Error: err.Error()}
		} else {
			run = reportRun(res, fc.LogicalBytes)
			rep.Workload.SlotBytes, rep.Workload.Slots = res.SlotBytes, res.Slots
			rep.Window.WarmupBytes = reports.I64(res.WarmupBytes)
			if rep.Window.MeasuredBytes == 0 && !run.Failed() {
				rep.Window.MeasuredBytes = res.Run.Counters.BytesWritten
			}
		}
		if src.Trace != nil || j.adm != workloads.AdmitAll {
			run.Admission = j.adm
		}
		if o.Sweep != nil {
			run.Param = j.pt.v
		}
		rep.Runs = append(rep.Runs, run)
		if run.Interrupted {
			if src.Trace != nil {
				cut = fmt.Sprintf("%s stopped after %d of %d requests", o.label(j), res.Run.Total.Requests, rc.TraceRequests)
			} else {
				cut = fmt.Sprintf("%s stopped at %.2f of its %g capacities of payload", o.label(j),
					float64(res.Run.Total.BytesWritten)/float64(fc.LogicalBytes), o.WarmupCaps+o.MeasureCaps)
			}
			notRun = rest(i + 1)
			break
		}
		done++
	}
	if ctx.Err() != nil {
		rep.Interrupted = true
		parts := []string{fmt.Sprintf("%d of %d runs complete", done, len(jobs))}
		if cut != "" {
			parts = append(parts, cut)
		}
		if len(notRun) > 0 {
			parts = append(parts, "not run: "+strings.Join(notRun, ", "))
		}
		rep.Partial = strings.Join(parts, "; ")
	}
	return nil
}

// reportRun converts a run's result into a report run.
func reportRun(res *Result, logical int64) reports.Run {
	run := reports.FromResult(res.Policy, res.Run, false)
	run.Infeasible = res.Infeasible
	if res.Infeasible {
		// The up-front feasibility check makes this unreachable for one reclaim group; when it
		// happens the figures stop at a model that gave up, so there is no WAF to report.
		run.Error = "the FTL model could not make room: " + ftl.ErrInfeasible.Error()
	} else {
		run.HostWAF = &reports.WAF{Value: res.WAF, Steady: res.SteadyWAF, Source: reports.SourceModelled,
			HostBytes: res.Measured.HostBytes, MediaBytes: res.Measured.MediaBytes, Handles: reports.HandlesOf(res.Measured, res.Labels),
			RelocatedBytes: res.Measured.RelocatedBytes, MixedRelocatedBytes: res.Measured.MixedRelocatedBytes}
	}
	switch {
	case res.Run != nil && res.Run.Stalled:
		run.Note = "stopped early: 1M ops in a row stored nothing (the working set fits the cache, or the workload only reads)"
	case res.Interrupted && res.Run != nil && !res.Run.Warmed:
		run.Note = "interrupted during warm-up: the WAF covers no measured window"
		run.HostWAF = nil
	}
	tl := res.Timeline
	if n := len(tl); n > 0 {
		run.Utilisation = reports.F64(float64(tl[n-1].Stats.ValidBytes) / float64(logical))
	}
	_, _, start, _, _ := WAFWindows(tl, res.WarmupBytes) // the table's window starts there
	for i := 1; i < len(tl); i++ {
		p := reports.Point{PayloadBytes: tl[i].PayloadBytes, WAF: reports.F64(tl[i].Stats.Sub(tl[i-1].Stats).WAF()),
			CumWAF: reports.F64(tl[i].Stats.WAF())}
		if i > start && tl[i].Stats.Sub(tl[start].Stats).HostBytes > 0 {
			p.MeasuredWAF = reports.F64(tl[i].Stats.Sub(tl[start].Stats).WAF())
		}
		if res.Run != nil && res.Run.Total.ChunksRequested > 0 {
			p.Requests = reports.I64(tl[i].Requests)
			if n := tl[i].ChunksRequested - tl[i-1].ChunksRequested; n > 0 {
				p.HitRatio = reports.F64(float64(tl[i].ChunksHit-tl[i-1].ChunksHit) / float64(n))
			}
		}
		run.Timeline = append(run.Timeline, p)
	}
	return run
}

// chunkTokens is the prefill tokens one chunk hit saves, for a KV workload (0 otherwise:
// a synthetic block workload saves no tokens).
func chunkTokens(w workloads.Spec) int {
	if w.Kind == "kv" || strings.HasPrefix(w.Kind, "mooncake:") {
		return w.ChunkTokens
	}
	return 0
}
