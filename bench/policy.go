package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/placement"
	"github.com/rbctl/rbctl/reports"
	"github.com/rbctl/rbctl/workloads"
)

// planned is a comparison checked and ready to run: everything each policy's run shares.
type planned struct {
	o        *Options
	t        *target
	src      *workloads.Source
	name     string // the device as the report names it
	handles  int
	fc       ftl.Config // the shadow model
	ecfg     engine.Config
	model    *ftl.Model // lives as long as the device's own state
	slots    int64      // the engine's slots on the device
	region   float64    // chunks per eviction region (0: not regional)
	noShadow string     // why this device gets no shadow estimate (the run goes on)
}

// plan derives the shadow model and the engine configuration, and checks the policies and
// the workload against them before anything is formatted.
func plan(o *Options, t *target, src *workloads.Source) (*planned, error) {
	info := t.dev.Info()
	p := &planned{o: o, t: t, src: src, name: o.Path, handles: t.handles}
	if p.name == "" {
		p.name = info.Path
	}
	if p.handles == 0 {
		p.handles = o.Handles
	}
	for _, pol := range o.Policies {
		if _, err := placement.Parse(pol, p.handles); err != nil {
			return nil, fmt.Errorf("placement %s: %w", pol, err)
		}
	}
	ru, op, iso := t.ruBytes, o.OP, ftl.InitiallyIsolated
	if ru == 0 {
		ru = o.RUBytes
	}
	if t.emulated != nil {
		op, iso = t.emulated.OP, t.emulated.Isolation
	}
	if o.Isolation != nil {
		iso = *o.Isolation
	}
	const unit = 4096
	logical := info.Size / unit * unit
	p.fc = ftl.Config{MappingUnit: unit, LogicalBytes: logical, OP: op, RUBytes: ru / unit * unit, Handles: p.handles, Isolation: iso, GC: o.GC}
	slotBytes := engine.SlotBytesFor(src.ChunkBytes)
	p.ecfg = engineConfig(o, slotBytes, logical, ru)
	// The workload is checked before any device is formatted (the slot count is an upper
	// bound: the metadata region takes some).
	dc, err := o.Workload.Driver(src, p.fc.RUBytes, slotBytes)
	if err != nil {
		return nil, err
	}
	if err := workloads.CheckRegion(dc.RegionSlots, int64(o.Workload.Util*float64(logical/slotBytes))); err != nil {
		return nil, err
	}
	l, err := engine.ComputeLayout(p.ecfg, info.Size)
	if err != nil {
		return nil, err
	}
	p.slots, p.region = l.MaxSlots, dc.RegionSlots
	tun := modelTunable
	switch {
	case t.emulated != nil:
		tun = emuTunable
	case t.stats != nil:
		tun = shadowTunable
	}
	// The emulator's own FTL is the device: an infeasible one cannot run. On any other device
	// the shadow model is only an estimate and never blocks the run: without it the bench
	// reports the device's own WAF (FDP) or none, and the report says why.
	shadowErr := p.fc.CheckFeasible("the shadow FTL model of "+p.name, tun)
	if shadowErr == nil {
		if _, err := ftl.New(p.fc); err != nil {
			shadowErr = fmt.Errorf("the shadow FTL model of %s: %w", p.name, err)
		}
	}
	if shadowErr != nil {
		if t.emulated != nil {
			return nil, shadowErr
		}
		explain := o.Explain
		if explain == nil {
			explain = func(err error) string { return err.Error() }
		}
		p.noShadow = "no host WAF estimate: " + explain(shadowErr)
	}
	if t.reset != nil {
		reset := t.reset
		t.reset = func() error { p.model = nil; return reset() }
	}
	return p, nil
}

// report starts the comparison's report: the device, the shadow model and the notes.
func (p *planned) report() *reports.Report {
	o, fc := p.o, p.fc
	rep := reports.New("bench")
	rep.Device = reports.Device{Path: p.name, Kind: p.t.kind(), SizeBytes: p.t.dev.Info().Size, FDP: p.t.stats != nil, Handles: p.handles,
		RUBytes: fc.RUBytes, OP: fc.OP, MappingUnit: fc.MappingUnit, Isolation: fc.Isolation.String(), GC: fc.GC.String(),
		Precondition: precondition(o.Precondition), Deallocate: o.Deallocate}
	rep.Notes = append(rep.Notes, p.t.notes...)
	if p.noShadow == "" {
		rep.Notes = append(rep.Notes, "host WAF is modelled: a shadow FTL model fed with every write and deallocate the engine issued")
	}
	if p.t.source == reports.SourceEmulatorModel && p.t.stats != nil {
		rep.Notes = append(rep.Notes, "emulator WAF is model output too: the emulated SSD's FDP log comes from its own FTL model, "+
			"fed the same writes as the host estimate, so it does not confirm it; with one worker the two agree exactly, with more "+
			"they differ by the order concurrent writes reach each model (the shadow applies each batch whole, the emulator command by command)")
	}
	w, src := o.Workload, p.src
	rep.Workload = reports.Workload{Name: src.Name, Seed: w.Seed, Tenants: src.Salts, ChunkBytes: src.ChunkBytes, SlotBytes: p.ecfg.SlotBytes,
		Slots: p.slots, TargetUtil: w.Util, Eviction: string(w.Eviction), RegionSlots: p.region, Workers: w.Workers, Rate: w.Rate,
		Description: src.Description}
	if rep.Workload.Eviction == "" {
		rep.Workload.Eviction = string(workloads.LRU)
	}
	rep.Window.Description = WindowDescription(o.Warmup, o.WarmupTimeout, o.Duration, o.Workload.Requests)
	return rep
}

func precondition(s string) string {
	if s == "" {
		return "trim"
	}
	return s
}

type sample struct {
	t     time.Duration
	c     workloads.Counters
	stats ftl.Stats
}

// window is what a policy's run recorded: the samples and the counters at the start of
// the measured window.
type window struct {
	mu        sync.Mutex
	samples   []sample
	warmStats ftl.Stats
	warmDev   *fdp.Stats
	warmAt    time.Duration
	devErr    error
}

// runPolicy formats the device for one policy, runs the workload and returns its report
// run.
func (p *planned) runPolicy(ctx context.Context, pol string) (reports.Run, error) {
	o, t := p.o, p.t
	policy, err := placement.Parse(pol, p.handles)
	if err != nil {
		return reports.Run{}, err
	}
	if p.model == nil && p.noShadow == "" {
		if p.model, err = ftl.New(p.fc); err != nil {
			return reports.Run{}, err
		}
	}
	sh := NewShadow(t.dev, p.model)
	sh.KeepInnerOpen = true
	note, err := sh.Precondition(ctx, o.Precondition, 1<<20)
	if err != nil {
		return reports.Run{}, fmt.Errorf("precondition: %w", err)
	}
	ecfg := p.ecfg
	ecfg.Placer = policy
	ecfg.MetadataHandle = policy.Place(placement.Write{Metadata: true, ChunkIndex: -1})
	e, err := engine.Format(sh, ecfg)
	if err != nil {
		return reports.Run{}, fmt.Errorf("format: %w", err)
	}
	closed := false
	defer func() {
		if !closed {
			e.Close()
		}
	}()
	gen, err := p.src.New()
	if err != nil {
		return reports.Run{}, err
	}
	be := NewBackend(e, o.Workload.Model, gen.Salts(), gen.ChunkBytes())
	dc, err := o.Workload.Driver(p.src, p.fc.RUBytes, ecfg.SlotBytes)
	if err != nil {
		return reports.Run{}, err
	}
	dc.WarmupBytes = int64(o.Warmup * float64(be.Slots()*int64(gen.ChunkBytes())))
	dc.WarmupTimeout = o.WarmupTimeout
	dc.Duration = o.Duration

	var w window
	dealloc0, start := sh.DeallocatedBytes(), time.Now()
	dc.OnWarm = func() {
		var ws ftl.Stats
		var wd *fdp.Stats
		var werr error
		sh.Quiesce(func() {
			ws = sh.Stats()
			if t.stats != nil {
				wd, werr = t.stats()
			}
		})
		w.mu.Lock()
		w.warmStats, w.warmAt, w.warmDev, w.devErr = ws, time.Since(start), wd, werr
		w.mu.Unlock()
	}
	d, err := workloads.NewDriver(dc, gen, be)
	if err != nil {
		return reports.Run{}, err
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.sample(&w, d, sh, policy.Name(), start, stop)
	}()
	res, runErr := d.Run(ctx)
	close(stop)
	wg.Wait()
	if o.Progress != nil {
		o.Progress(Progress{Policy: policy.Name(), Warm: res != nil && res.Warmed, Window: o.Duration, Done: true})
	}
	w.mu.Lock() // the sampler has stopped; this orders the OnWarm writes before the reads below
	defer w.mu.Unlock()
	endStats := sh.Stats()
	var endDev *fdp.Stats
	if t.stats != nil && w.devErr == nil {
		endDev, w.devErr = t.stats()
	}
	closed = true
	if err := e.Close(); err != nil && runErr == nil {
		runErr = fmt.Errorf("close: %w", err)
	}
	run := reports.FromResult(policy.Name(), res, true)
	if runErr != nil {
		run.Error = runErr.Error()
	}
	p.figures(&run, &w, sh, policy, endStats, endDev, dealloc0)
	var notes []string
	if res.Interrupted && !res.Warmed {
		notes = append(notes, warmupCut)
	}
	if res.WarmupTimedOut {
		notes = append(notes, "warm-up timed out before the target was stored")
	}
	if note != "" {
		notes = append(notes, note)
	}
	if p.noShadow != "" {
		notes = append(notes, p.noShadow)
	} else if run.Infeasible {
		notes = append(notes, fmt.Sprintf("the shadow FTL model ran out of free reclaim units (%d handles, %d-byte RUs, op %g): "+
			"no host WAF", p.handles, p.fc.RUBytes, p.fc.OP))
	}
	if ff := sh.ForeignHandleWrites(); ff > 0 {
		notes = append(notes, fmt.Sprintf("%d writes carried a handle beyond the model's %d (modelled on handle 0)", ff, p.handles))
	}
	run.Note = strings.Join(notes, "; ")
	return run, nil
}

// sample records the driver's counters and the model's until stop, and reports progress.
func (p *planned) sample(w *window, d *workloads.Driver, sh *ShadowDevice, pol string, start time.Time, stop <-chan struct{}) {
	tick := time.NewTicker(max(p.o.Duration/50, 100*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			s := sample{t: time.Since(start), c: d.Counters(), stats: sh.Stats()}
			w.mu.Lock()
			w.samples = append(w.samples, s)
			warmAt := w.warmAt
			w.mu.Unlock()
			if p.o.Progress != nil {
				pr := Progress{Policy: pol, Warm: warmAt > 0, Window: p.o.Duration}
				if warmAt > 0 {
					pr.Elapsed = s.t - warmAt
				}
				p.o.Progress(pr)
			}
		}
	}
}

// figures fills run's WAF figures, timeline and utilisation from the recorded window.
func (p *planned) figures(run *reports.Run, w *window, sh *ShadowDevice, policy placement.Policy, endStats ftl.Stats, endDev *fdp.Stats, dealloc0 int64) {
	win := endStats.Sub(w.warmStats)
	run.Infeasible = sh.Infeasible()
	if !run.Infeasible { // a model that gave up has no WAF to report
		run.HostWAF = &reports.WAF{Value: win.WAF(), Source: reports.SourceModelled, HostBytes: win.HostBytes, MediaBytes: win.MediaBytes,
			Handles: reports.HandlesOf(win, placement.Labels(policy))}
	}
	run.DeallocatedBytes = reports.I64(sh.DeallocatedBytes() - dealloc0)
	if p.model != nil {
		run.Utilisation = reports.F64(float64(endStats.ValidBytes) / float64(p.fc.LogicalBytes))
	}
	// Steady state: the second half of the measured window.
	var post []sample
	for _, s := range w.samples {
		if s.t >= w.warmAt {
			post = append(post, s)
		}
	}
	if len(post) >= 2 && run.HostWAF != nil {
		run.HostWAF.Steady = endStats.Sub(post[len(post)/2].stats).WAF()
	}
	ss := w.samples
	for i := 1; i < len(ss); i++ {
		a, z := ss[i-1], ss[i]
		dt := (z.t - a.t).Seconds()
		pt := reports.Point{Seconds: reports.F64(z.t.Seconds()), PayloadBytes: z.c.BytesWritten,
			OpsPerSec: reports.F64(float64(z.c.Ops-a.c.Ops) / dt), WriteGBps: reports.F64(float64(z.c.BytesWritten-a.c.BytesWritten) / dt / 1e9),
			ReadGBps: reports.F64(float64(z.c.BytesRead-a.c.BytesRead) / dt / 1e9)}
		if run.HostWAF != nil { // no model, no modelled WAF (null, never 0)
			pt.WAF, pt.CumWAF = reports.F64(z.stats.Sub(a.stats).WAF()), reports.F64(z.stats.Sub(ss[0].stats).WAF())
		}
		run.Timeline = append(run.Timeline, pt)
	}
	if p.t.stats == nil {
		return
	}
	if w.devErr != nil {
		run.Error = strings.TrimPrefix(run.Error+"; ", "; ") + "FDP statistics: " + w.devErr.Error()
	} else if w.warmDev != nil && endDev != nil {
		dd := endDev.Sub(w.warmDev)
		run.DeviceWAF = &reports.WAF{Value: dd.WAF(), Source: p.t.source, HostBytes: uint64(dd.HBMW.Float64()), MediaBytes: uint64(dd.MBMW.Float64())}
	}
}
