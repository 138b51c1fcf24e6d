package sim

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/internal/sys/memlimit"
	"github.com/rbctl/rbctl/placement"
	"github.com/rbctl/rbctl/units"
	"github.com/rbctl/rbctl/workloads"
)

// WAFPoint is one sample of the FTL counters during a run.
type WAFPoint struct {
	PayloadBytes int64     // payload bytes the driver had stored
	Stats        ftl.Stats // FTL counters since preconditioning
	// The driver's requests and chunks looked up and hit so far (hit ratio over time).
	Requests, ChunksRequested, ChunksHit int64
}

// WAFWindows computes the reported WAF figures from a timeline: over the measured window
// (after warmupBytes of payload) and over its second half (steady state).
func WAFWindows(tl []WAFPoint, warmupBytes int64) (measured, steady float64, start, mid, end int) {
	if len(tl) == 0 {
		return 0, 0, 0, 0, 0
	}
	start = 0
	for start < len(tl)-1 && tl[start].PayloadBytes < warmupBytes {
		start++
	}
	end = len(tl) - 1
	mid = start + (end-start)/2
	w := func(a, b int) float64 { return tl[b].Stats.Sub(tl[a].Stats).WAF() }
	if end > start {
		measured = w(start, end)
	}
	if end > mid {
		steady = w(mid, end)
	}
	return measured, steady, start, mid, end
}

// RunConfig is one simulate run: a workload through Backend on a fresh FTL model.
type RunConfig struct {
	Gen           workloads.Generator
	Driver        workloads.DriverConfig // StopAfterBytes, WarmupBytes and Sample are set by RunOne from the caps below
	FTL           ftl.Config
	Precondition  ftl.Precondition
	Policy        string                              // placement.Parse spec
	PolicyImpl    placement.Policy                    // used instead of Policy when set (built outside Parse)
	Regen         func() (workloads.Generator, error) // a fresh copy of Gen; oracle: policies replay the workload
	Model         string
	SlotBytes     int64
	Deallocate    bool
	AnySlot       bool // reuse any free slot, not one last written with the same handle (BackendConfig)
	CheckpointOps int64
	WarmupCaps    float64 // warm-up, in multiples of the device's logical capacity written (default 1)
	MeasureCaps   float64 // measured window, same unit (default 4)
	Points        int     // timeline samples over the whole run (default 64)
	// TraceRequests, for a request trace (workloads.Source.Trace): the whole trace runs,
	// measured from its first request (no warm-up, no byte cap), sampled every
	// TraceRequests/Points requests.
	TraceRequests int64
	// OnSample, when set, is called at every timeline sample with the fraction of the run done
	// (payload written of warm-up plus window, or requests of the trace) and whether the
	// warm-up is still running.
	OnSample func(frac float64, warm bool)
}

// Result is what RunOne measured.
type Result struct {
	Policy      string
	Run         *workloads.Result
	Timeline    []WAFPoint
	Measured    ftl.Stats // FTL counters over the measured window
	WAF         float64   // measured window
	SteadyWAF   float64   // second half of the measured window
	Infeasible  bool      // the FTL could not make room (ftl.ErrInfeasible)
	Interrupted bool      // ctx was cancelled first: the figures cover what ran
	Slots       int64
	SlotBytes   int64
	TargetSlots int64
	Checkpoints int64
	WarmupBytes int64
	Labels      map[int]string // what the policy put on each handle (placement.Labels), if it can tell
}

// RunOne runs r and returns the result; an infeasible FTL configuration is reported in the
// result (Infeasible) rather than as an error.
func RunOne(ctx context.Context, r RunConfig) (*Result, error) {
	// Refused here, not by the runtime: the estimate is checked before Run starts, but this
	// run may come after others, and an allocation the limits refuse is a fatal error.
	if model, cache, err := MemoryBytes(r); err == nil {
		cache -= simBaseBytes // the runtime's own part, already held (and counted by GOMEMLIMIT's)
		if model+cache > 256<<20 {
			debug.FreeOSMemory() // an earlier run's model is garbage: return it before measuring
		}
		if err := memlimit.Check(fmt.Sprintf("the simulation of %s (FTL model and simulated cache)", units.FormatSize(r.FTL.LogicalBytes)), model+cache); err != nil {
			return nil, err
		}
	}
	if r.PolicyImpl == nil && IsOracle(r.Policy) {
		return runOracle(ctx, r)
	}
	if r.WarmupCaps == 0 {
		r.WarmupCaps = 1
	}
	if r.MeasureCaps == 0 {
		r.MeasureCaps = 4
	}
	if r.Points == 0 {
		r.Points = 64
	}
	m, err := ftl.New(r.FTL)
	if err != nil {
		return nil, err
	}
	if err := m.Precondition(r.Precondition); err != nil {
		return nil, fmt.Errorf("precondition %s: %w", r.Precondition, err)
	}
	base := m.Stats()
	pol := r.PolicyImpl
	if pol == nil {
		if pol, err = placement.Parse(r.Policy, m.Config().Handles); err != nil {
			return nil, err
		}
	}
	be, err := NewBackend(BackendConfig{FTL: m, Policy: pol, Salts: r.Gen.Salts(), Model: r.Model,
		SlotBytes: r.SlotBytes, Deallocate: r.Deallocate, CheckpointOps: r.CheckpointOps, AnySlot: r.AnySlot})
	if err != nil {
		return nil, err
	}
	capB := m.Config().LogicalBytes
	dc := r.Driver
	if r.TraceRequests > 0 {
		dc.WarmupBytes, dc.StopAfterBytes = 0, 0
		dc.SampleOps = max(r.TraceRequests/int64(r.Points), 1)
	} else {
		dc.WarmupBytes = int64(r.WarmupCaps * float64(capB))
		dc.StopAfterBytes = dc.WarmupBytes + int64(r.MeasureCaps*float64(capB))
		dc.SampleBytes = max(dc.StopAfterBytes/int64(r.Points), 1)
		if dc.StallOps == 0 {
			dc.StallOps = 1_000_000
		}
	}
	res := &Result{Policy: pol.Name(), Slots: be.Slots(), SlotBytes: be.SlotBytes(), WarmupBytes: dc.WarmupBytes}
	point := func(c workloads.Counters) WAFPoint {
		return WAFPoint{PayloadBytes: c.BytesWritten, Stats: m.Stats().Sub(base), Requests: c.Requests, ChunksRequested: c.ChunksRequested, ChunksHit: c.ChunksHit}
	}
	res.Timeline = append(res.Timeline, WAFPoint{Stats: m.Stats().Sub(base)})
	dc.Sample = func(c workloads.Counters) {
		res.Timeline = append(res.Timeline, point(c))
		if r.OnSample == nil {
			return
		}
		if r.TraceRequests > 0 {
			r.OnSample(float64(c.Requests)/float64(r.TraceRequests), false)
		} else {
			r.OnSample(float64(c.BytesWritten)/float64(max(dc.StopAfterBytes, 1)), c.BytesWritten < dc.WarmupBytes)
		}
	}
	d, err := workloads.NewDriver(dc, r.Gen, be)
	if err != nil {
		return nil, err
	}
	res.TargetSlots = d.TargetSlots()
	run, err := d.Run(ctx)
	res.Run = run
	res.Checkpoints = be.Checkpoints()
	res.Labels = placement.Labels(pol)
	res.Interrupted = run != nil && run.Interrupted
	if errors.Is(err, ftl.ErrInfeasible) {
		res.Infeasible = true
	} else if err != nil {
		return res, err
	}
	if last := res.Timeline[len(res.Timeline)-1]; run != nil && (last.PayloadBytes < run.Total.BytesWritten || last.Requests < run.Total.Requests) {
		res.Timeline = append(res.Timeline, point(run.Total))
	}
	var s, e int
	res.WAF, res.SteadyWAF, s, _, e = WAFWindows(res.Timeline, dc.WarmupBytes)
	res.Measured = res.Timeline[e].Stats.Sub(res.Timeline[s].Stats)
	return res, nil
}

// Memory of a simulated cache besides the FTL model, measured (peak RSS over runs of 60k and
// 250k slots, 1 + 4 capacities, multi-tenant preset): ~400 B per slot for the index, the
// residency list, the free lists and TTL queues, and ~140 B per slot per capacity written for
// an oracle's pass-1 record. The constants carry a margin.
const (
	simBytesPerSlot       = 512
	oracleBytesPerSlotCap = 192
	simBaseBytes          = 64 << 20 // runtime, histograms, generator
)

// MemoryBytes estimates the peak memory of RunOne(r): the FTL model's allocation
// (ftl.Config.MemoryBytes) and the simulated cache's per-slot state. It is an estimate for
// refusing runs that cannot fit, not an accounting.
func MemoryBytes(r RunConfig) (model, cache int64, err error) {
	if model, err = r.FTL.MemoryBytes(); err != nil {
		return 0, 0, err
	}
	unit := r.FTL.MappingUnit
	slotB := max((r.SlotBytes+unit-1)/unit*unit, unit)
	slots := r.FTL.LogicalBytes / slotB
	cache = simBaseBytes + slots*simBytesPerSlot
	if IsOracle(r.Policy) {
		caps := r.WarmupCaps + r.MeasureCaps
		if r.WarmupCaps == 0 && r.MeasureCaps == 0 {
			caps = 5
		}
		cache += int64(float64(slots) * oracleBytesPerSlotCap * caps)
	}
	return model, cache, nil
}
