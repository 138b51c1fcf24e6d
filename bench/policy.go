package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/engine/sharded"
	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/internal/sys"
	"github.com/rbctl/rbctl/placement"
	"github.com/rbctl/rbctl/reports"
	"github.com/rbctl/rbctl/workloads"
)

// planned is a comparison checked and ready to run: everything each policy's run shares.
type planned struct {
	o      *Options
	src    *workloads.Source
	shards []*shard // one per device, in the order given
	route  sharded.Route
	region float64  // chunks per eviction region (0: not regional)
	notes  []string // what a recording's replay took from its node
	ran    int      // policies begun, for Progress.Index
	// explained: WAF by cause of each policy run so far (--explain, one device).
	explained []reports.Explanation
}

// plan derives each device's shadow model and engine configuration, and checks the policies
// and the workload against them before anything is formatted.
func plan(o *Options, ts []*target, names []string, src *workloads.Source) (*planned, error) {
	p := &planned{o: o, src: src}
	_, paths := o.devices()
	var logical int64
	for i, t := range ts {
		path := ""
		if i < len(paths) {
			path = paths[i]
		}
		s, err := planShard(o, i, t, names[i], path, src)
		if err != nil {
			return nil, err
		}
		p.shards = append(p.shards, s)
		logical += s.fc.LogicalBytes
	}
	// The workload is checked before any device is formatted (the slot count is an upper
	// bound: the metadata region takes some).
	s0 := p.shards[0]
	var slots int64 // tenant budgets divide the whole cache (H4)
	for _, s := range p.shards {
		slots += s.slots
	}
	if rd := src.Recorded; rd != nil {
		p.notes = rd.Policies(o.Fit, &o.Workload)
		if util, ok := workloads.FitUtil(rd.Capacity.Slots, slots); ok && o.Fit.Size {
			o.Workload.Util = util
			p.notes = append(p.notes, fmt.Sprintf("the recording node's %d slots: the cache keeps %d of the devices' %d (util %.6f)", rd.Capacity.Slots, rd.Capacity.Slots, slots, util))
		} else if o.Fit.Size && rd.Capacity.Slots > 0 {
			p.notes = append(p.notes, fmt.Sprintf("the devices hold %d slots, fewer than the recording node's %d: the replay runs on a smaller cache", slots, rd.Capacity.Slots))
		}
	}
	dc, err := o.Workload.Driver(src, s0.fc.RUBytes, s0.ecfg.SlotBytes)
	if err != nil {
		return nil, err
	}
	if err := workloads.CheckRegion(dc.RegionSlots, int64(o.Workload.Util*float64(logical/s0.ecfg.SlotBytes))); err != nil {
		return nil, err
	}
	if err := o.Workload.CheckBudgets(src, slots, s0.ecfg.SlotBytes, o.Workload.Util); err != nil {
		return nil, err
	}
	p.region = dc.RegionSlots
	return p, nil
}

// report starts the comparison's report: the device (the first one's geometry; with several,
// every path and their total size), the shadow model and the notes.
func (p *planned) report() *reports.Report {
	o, s0, fc := p.o, p.shards[0], p.shards[0].fc
	rep := reports.New("bench")
	rep.Host = &reports.Host{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Kernel: sys.KernelRelease()}
	var size, slots int64
	fdpAll := true
	for _, s := range p.shards {
		size += s.t.dev.Info().Size
		slots += s.slots
		fdpAll = fdpAll && s.t.stats != nil
	}
	rep.Device = reports.Device{Path: strings.Join(p.names(), ", "), Kind: p.kinds(), SizeBytes: size, FDP: fdpAll, Handles: s0.handles,
		RUBytes: fc.RUBytes, OP: fc.OP, MappingUnit: fc.MappingUnit, Isolation: fc.Isolation.String(), GC: fc.GC.String(),
		Precondition: precondition(o.Precondition), Deallocate: o.Deallocate}
	shadowed, emuStats := false, false
	for i, s := range p.shards {
		for _, n := range s.t.notes {
			rep.Notes = append(rep.Notes, p.on(i)+n)
		}
		shadowed = shadowed || s.noShadow == ""
		emuStats = emuStats || (s.t.source == reports.SourceEmulatorModel && s.t.stats != nil)
	}
	if shadowed {
		rep.Notes = append(rep.Notes, "host WAF is modelled: a shadow FTL model fed with every write and deallocate the engine issued")
	}
	if len(p.shards) > 1 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("one cache sharded over %d devices by %s; each device has its own engine and shadow model", len(p.shards), p.route))
		if p.route == sharded.RouteKVRank {
			if r := p.o.ShardRanks; r != nil {
				rep.Notes = append(rep.Notes, fmt.Sprintf("kv-rank: the workload's chunks carry the configured TP ranks %v by chunk hash, each on its rank's device (per_tp_device_paths)", r))
			} else {
				rep.Notes = append(rep.Notes, fmt.Sprintf("kv-rank: the workload's chunks carry kv ranks 0..%d by chunk hash (a TP-%d model), rank r on device r", len(p.shards)-1, len(p.shards)))
			}
		}
	}
	if o.LMCache != nil {
		rep.Notes = append(rep.Notes, lmcacheNotes(o.LMCache)...)
	}
	rep.Notes = append(rep.Notes, p.notes...)
	if emuStats {
		rep.Notes = append(rep.Notes, "emulator WAF is model output too: the emulated SSD's FDP log comes from its own FTL model, "+
			"fed the same writes as the host estimate, so it does not confirm it; with one worker the two agree exactly, with more "+
			"they differ by the order concurrent writes reach each model (the shadow applies each batch whole, the emulator command by command)")
	}
	w, src := o.Workload, p.src
	rep.Workload = reports.Workload{Name: src.Name, Seed: w.Seed, Tenants: src.Salts, ChunkBytes: src.ChunkBytes, SlotBytes: s0.ecfg.SlotBytes,
		Slots: slots, TargetUtil: w.Util, Eviction: string(w.Eviction), RegionSlots: p.region, Workers: w.Workers, Rate: w.Rate,
		Description: src.Description}
	if rep.Workload.Eviction == "" {
		rep.Workload.Eviction = string(workloads.LRU)
	}
	rep.Window.Description = WindowDescription(o.Warmup, o.WarmupTimeout, o.Duration, o.Workload.Requests)
	rep.Trace = src.Trace
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
	stats ftl.Stats // every shadow model's, summed
}

// window is what a policy's run recorded: the samples and, per device, the counters at
// the start of the measured window.
type window struct {
	mu        sync.Mutex
	samples   []sample
	warmStats []ftl.Stats
	warmHost  int64 // bytes written to the devices when the window began (measured)
	warmDev   []*fdp.Stats
	warmAt    time.Duration
	devErr    error
	mark      int // shadow ops recorded when the window began (explain)
}

// unshard returns a one-device cache's error as the engine's own (no shard index).
func (p *planned) unshard(err error) error {
	var se *sharded.ShardError
	if len(p.shards) == 1 && errors.As(err, &se) {
		return se.Err
	}
	return err
}

// runPolicy formats the devices for one policy, runs the workload and returns its report
// run.
func (p *planned) runPolicy(ctx context.Context, pol string) (reports.Run, error) {
	o, n := p.o, len(p.shards)
	p.ran++
	k := p.ran
	policies := make([]placement.Policy, n)
	shs := make([]*ShadowDevice, n)
	devs := make([]blockdev.Device, n)
	var notes []string
	var meta []placement.Handle
	var affinity []bool
	for i, s := range p.shards {
		policy, err := placement.Parse(pol, s.handles)
		if isLMCacheRun(o, pol) {
			var mh placement.Handle
			var aff bool
			policy, mh, aff, err = lmcachePolicy(o.LMCache, s)
			meta, affinity = append(meta, mh), append(affinity, aff)
		}
		if err != nil {
			return reports.Run{}, err
		}
		if s.model == nil && s.noShadow == "" {
			if s.model, err = newModel(s.fc); err != nil {
				return reports.Run{}, err
			}
		}
		sh := NewShadow(s.t.dev, s.model)
		sh.KeepInnerOpen = true
		if o.Causes != "" && n == 1 && s.model != nil {
			sh.Record()
		}
		note, err := sh.Precondition(ctx, o.Precondition, 1<<20)
		if err != nil {
			return reports.Run{}, fmt.Errorf("precondition: %s%w", p.on(i), err)
		}
		if note != "" {
			notes = append(notes, p.on(i)+note)
		}
		policies[i], shs[i], devs[i] = policy, sh, sh
	}
	rec := newRecorder(n)
	cache, err := sharded.Format(devs, p.shards[0].ecfg, sharded.Config{Route: p.route, Ranks: p.o.ShardRanks, Observe: rec.observe,
		Config: func(i int, _ engine.Config) engine.Config {
			c := p.shards[i].ecfg
			c.Placer = policies[i]
			c.MetadataHandle = policies[i].Place(placement.Write{Metadata: true, ChunkIndex: -1})
			if meta != nil {
				c.MetadataHandle, c.SlotAffinity = meta[i], affinity[i]
			}
			return c
		}})
	if err != nil {
		return reports.Run{}, fmt.Errorf("format: %w", p.unshard(err))
	}
	closed := false
	var be *Backend
	defer func() {
		if !closed {
			cache.Close()
		}
		if be != nil {
			be.Release() // after the devices let go of the registration
		}
	}()
	gen, err := p.src.New()
	if err != nil {
		return reports.Run{}, err
	}
	be = NewShardedBackend(cache, o.Workload.Model, gen.Salts(), gen.ChunkBytes())
	if p.route == sharded.RouteKVRank {
		be.Ranks = n
		be.RankSet = p.o.ShardRanks
	}
	be.Legacy = lmcacheLegacy(o)
	dc, err := o.Workload.Driver(p.src, p.shards[0].fc.RUBytes, p.shards[0].ecfg.SlotBytes)
	if err != nil {
		return reports.Run{}, err
	}
	// Aligned, registered load buffers, 64 per worker: loads read into them directly.
	if _, err := be.UseLoadBuffers(max(dc.Workers, 1)*64, int64(p.shards[0].ecfg.BlockAlign)); err != nil {
		return reports.Run{}, err
	}
	dc.WarmupBytes = int64(o.Warmup * float64(be.Slots()*int64(gen.ChunkBytes())))
	dc.WarmupTimeout = o.WarmupTimeout
	dc.Duration = o.Duration

	var w window
	var dealloc0 int64
	for _, sh := range shs {
		dealloc0 += sh.DeallocatedBytes()
	}
	start := time.Now()
	dc.OnWarm = func() {
		ws, wd, werr := p.snapshot(shs, true)
		w.mark = shs[0].lastMark()
		rec.begin(time.Now(), cache.StatsByShard())
		wh := writtenBytes(shs)
		w.mu.Lock()
		w.warmStats, w.warmAt, w.warmDev, w.devErr, w.warmHost = ws, time.Since(start), wd, werr, wh
		w.mu.Unlock()
	}
	d, err := workloads.NewDriver(dc, gen, be)
	if err != nil {
		return reports.Run{}, err
	}
	policy, name := policies[0], policies[0].Name()
	if meta != nil {
		name = pol
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.sample(&w, d, shs, Progress{Policy: name, Index: k, Of: len(o.Policies), Window: o.Duration}, dc.WarmupBytes, start, stop)
	}()
	res, runErr := d.Run(ctx)
	close(stop)
	wg.Wait()
	if o.Progress != nil {
		o.Progress(Progress{Policy: name, Index: k, Of: len(o.Policies), Warm: res != nil && res.Warmed, Window: o.Duration, Frac: 1, Done: true})
	}
	w.mu.Lock() // the sampler has stopped; this orders the OnWarm writes before the reads below
	defer w.mu.Unlock()
	endStats, endDev, endErr := p.snapshot(shs, w.devErr == nil)
	endMark := shs[0].lastMark()
	if w.devErr == nil {
		w.devErr = endErr
	}
	engEnd := cache.StatsByShard()
	closed = true
	if err := cache.Close(); err != nil && runErr == nil {
		runErr = fmt.Errorf("close: %w", p.unshard(err))
	}
	run := reports.FromResult(name, res, true)
	if p.src.Trace != nil || (o.Workload.Admission != "" && o.Workload.Admission != workloads.AdmitAll) {
		run.Admission = cmp.Or(o.Workload.Admission, workloads.AdmitAll)
	}
	if runErr != nil {
		run.Error = runErr.Error()
	}
	p.figures(&run, &w, shs, policy, endStats, endDev, dealloc0)
	if ops, ok := shs[0].recorded(); ok && n == 1 && run.HostWAF != nil && endMark <= len(ops) {
		e, err := explainReplay(name, o.Causes, p.shards[0].fc, ops[:endMark], w.mark, run.HostWAF.Value)
		if err != nil {
			notes = append(notes, "--explain: "+err.Error())
		} else {
			p.explained = append(p.explained, *e)
		}
	}
	rows, total, warmErrs := rec.rows(p.names(), res.Elapsed, engEnd)
	p.deviceWAF(rows, &total, &w, shs, endStats, endDev)
	run.Devices, run.DevicesTotal = rows, &total
	if res.Interrupted && !res.Warmed {
		notes = append(notes, warmupCut)
	}
	if res.Cut && p.src.Trace != nil {
		win := p.src.TraceWindow(res.Total.Requests)
		notes = append(notes, fmt.Sprintf("the trace was cut by the %s duration after %d of its %d requests; the ceiling of those is %.2f %% of chunks "+
			"(the whole trace's: %.2f %%; the whole trace runs without --duration)",
			o.Duration, res.Total.Requests, p.src.Trace.Requests, 100*win.CeilingRatio(), 100*p.src.Trace.CeilingRatio()))
	}
	if res.WarmupTimedOut {
		notes = append(notes, "warm-up timed out before the target was stored")
	}
	if warmErrs > 0 {
		notes = append(notes, fmt.Sprintf("%d device errors during the warm-up (not in the device rows)", warmErrs))
	}
	for i, s := range p.shards {
		switch {
		case s.noShadow != "":
			notes = append(notes, p.on(i)+s.noShadow)
		case shs[i].Infeasible():
			notes = append(notes, fmt.Sprintf("%sthe shadow FTL model ran out of free reclaim units (%d handles, %d-byte RUs, op %g): "+
				"no host WAF", p.on(i), s.handles, s.fc.RUBytes, s.fc.OP))
		}
		if ff := shs[i].ForeignHandleWrites(); ff > 0 {
			notes = append(notes, fmt.Sprintf("%s%d writes carried a handle beyond the model's %d (modelled on handle 0)", p.on(i), ff, s.handles))
		}
	}
	run.Note = strings.Join(notes, "; ")
	return run, nil
}

// snapshot reads every shadow model and, with dev, every device's FDP statistics, with
// all writes held back so both cover the same operations. The error names the device.
func (p *planned) snapshot(shs []*ShadowDevice, dev bool) ([]ftl.Stats, []*fdp.Stats, error) {
	ms := make([]ftl.Stats, len(shs))
	ds := make([]*fdp.Stats, len(shs))
	var errs []error
	quiesceAll(shs, func() {
		for i, sh := range shs {
			ms[i] = sh.Stats()
			sh.setMark()
			if st := p.shards[i].t.stats; st != nil && dev {
				var err error
				if ds[i], err = st(); err != nil {
					errs = append(errs, fmt.Errorf("%s%w", p.on(i), err))
				}
			}
		}
	})
	return ms, ds, errors.Join(errs...)
}

// sample records the driver's counters and the models' until stop, and reports progress.
func (p *planned) sample(w *window, d *workloads.Driver, shs []*ShadowDevice, pr0 Progress, warmBytes int64, start time.Time, stop <-chan struct{}) {
	tick := time.NewTicker(max(p.o.Duration/50, 100*time.Millisecond))
	defer tick.Stop()
	ms := make([]ftl.Stats, len(shs))
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			for i, sh := range shs {
				ms[i] = sh.Stats()
			}
			s := sample{t: time.Since(start), c: d.Counters(), stats: sumFTL(ms)}
			w.mu.Lock()
			w.samples = append(w.samples, s)
			warmAt := w.warmAt
			w.mu.Unlock()
			if p.o.Progress != nil {
				pr := pr0
				pr.Warm = warmAt > 0
				switch {
				case !pr.Warm:
					pr.WarmFrac = min(float64(s.c.BytesWritten)/float64(max(warmBytes, 1)), 1)
				case pr.Window > 0:
					pr.Elapsed = s.t - warmAt
					pr.Frac = min(float64(pr.Elapsed)/float64(pr.Window), 1)
				case p.o.Workload.Requests > 0:
					pr.Elapsed = s.t - warmAt
					pr.Frac = min(float64(s.c.Requests)/float64(p.o.Workload.Requests), 1)
				}
				p.o.Progress(pr)
			}
		}
	}
}
