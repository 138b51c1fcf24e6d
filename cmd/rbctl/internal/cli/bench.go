package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/devices/safety"
	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/nvme"
	"github.com/rbctl/rbctl/placement"
	"github.com/rbctl/rbctl/reports"
	"github.com/rbctl/rbctl/units"
	"github.com/rbctl/rbctl/workloads"
)

func init() { register(newBenchCmd) }

type benchFlags struct {
	wl            wlFlags
	out           reportOutFlags
	placement     string
	duration      time.Duration
	warmup        float64
	warmupTimeout time.Duration
	precondition  string
	deallocate    bool
	handles       int
	ru            string
	op            float64
	isolation     string
	gc            string
	size          string
	slotGroups    bool
	metaBytes     string
	ckptInterval  time.Duration
	queueDepth    int
	ioEngine      string
	force         bool
	quiet         bool
}

func newBenchCmd() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench DEV",
		Short: "Run a KV-cache workload through the engine once per placement policy and compare them",
		Long: `bench formats DEV, runs the workload through the engine, and repeats that for every policy
in --placement, then prints one comparison: ops/s, GB/s read and written, latency percentiles
per operation, hit ratio, the host WAF estimate of a shadow FTL model fed with exactly the
writes and deallocates the engine issued (labelled "modelled"), the device WAF from the FDP
statistics log when DEV has FDP (emulated or real), and bytes deallocated.

DEV is a pre-sized file (created with --size if missing), a block device, an emulated FDP
SSD (emu:PATH?size=1G&ru=16M&ruhs=8, see docs/emulator.md), or mem:SIZE (in memory).
bench ERASES the cache on DEV; block and character devices need --force.

Figures cover the measured window: after --warmup device capacities of payload were stored
(or --warmup-timeout passed), for --duration.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runBench(cmd, args[0], &f) },
	}
	fs := cmd.Flags()
	f.wl.register(fs, "tiny")
	f.out.register(fs)
	fs.StringVar(&f.placement, "placement", "none,cache-salt", "comma-separated placement policies to compare ("+strings.Join(placement.Known(), ", ")+", compositions with +)")
	fs.DurationVar(&f.duration, "duration", 20*time.Second, "measured window per policy (after warm-up)")
	fs.Float64Var(&f.warmup, "warmup", 1, "warm-up, in cache capacities of payload stored (0: none)")
	fs.DurationVar(&f.warmupTimeout, "warmup-timeout", time.Minute, "end the warm-up after this long even if --warmup was not reached")
	fs.StringVar(&f.precondition, "precondition", "trim", "before each run: trim (deallocate the device) or fill (write it sequentially)")
	fs.BoolVar(&f.deallocate, "deallocate", true, "deallocate freed slots on delete/evict (H6)")
	fs.IntVar(&f.handles, "handles", 8, "placement handles for the policy and shadow model when DEV has no FDP")
	fs.StringVar(&f.ru, "ru", "16M", "shadow model reclaim unit size when DEV does not report one")
	fs.Float64Var(&f.op, "op", 0.07, "shadow model over-provisioning when DEV does not report it")
	fs.StringVar(&f.isolation, "isolation", "", "shadow model handle isolation (default: the emulator's, else initial)")
	fs.StringVar(&f.gc, "gc", "greedy", "shadow model GC policy: greedy or cost-benefit")
	fs.StringVar(&f.size, "size", "", "create DEV as a sparse file of this size if it does not exist")
	fs.BoolVar(&f.slotGroups, "slot-groups", false, "group slots per handle into reclaim-unit-sized groups (H4)")
	fs.StringVar(&f.metaBytes, "meta-bytes", "auto", "metadata region (meta_total_bytes); auto sizes it for a full index")
	fs.DurationVar(&f.ckptInterval, "checkpoint-interval", time.Second, "engine checkpoint interval")
	fs.IntVar(&f.queueDepth, "queue-depth", 64, "device queue depth")
	fs.StringVar(&f.ioEngine, "io-engine", "uring", "I/O engine for files and block devices: posix, uring or passthru (/dev/ng* always uses passthru)")
	fs.BoolVar(&f.force, "force", false, "allow formatting a block or character device")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress bar")
	return cmd
}

// benchDevice is an opened bench target and what it says about itself.
type benchDevice struct {
	dev      blockdev.Device
	stats    func() (*fdp.Stats, error) // nil without FDP
	handles  int                        // placement handles the device maps to PIDs (0: none)
	ruBytes  int64                      // 0: unknown
	op       float64                    // <0: unknown
	iso      ftl.Isolation
	isoKnown bool
	kind     string
	notes    []string
	// reset, when set, replaces dev with a brand-new device of the same spec (the emulator:
	// its FTL state would otherwise carry one policy's open RUs into the next run).
	reset func() error
	// model is the shadow FTL model; it lives as long as dev, like the device's own state.
	model *ftl.Model
	// noShadow, when set, says why this device gets no shadow estimate (the run goes on).
	noShadow string
}

// openBenchDevice opens DEV. This is bench's own adapter over the device packages.
func openBenchDevice(path string, f *benchFlags) (*benchDevice, error) {
	// A misspelt policy is reported as such, before the device is looked at (the handle
	// count is checked once it is open).
	for _, p := range wlSplitList(f.placement) {
		if _, err := placement.Parse(p, 1<<16); err != nil {
			return nil, fmt.Errorf("--placement %s: %w", p, err)
		}
	}
	switch {
	case strings.HasPrefix(path, "mem:"):
		n, err := units.ParseSize(strings.TrimPrefix(path, "mem:"))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%s: want mem:SIZE, e.g. mem:256M", path)
		}
		return &benchDevice{dev: blockdev.NewMem(n/4096*4096, 4096), op: -1, kind: string(blockdev.KindMemory)}, nil
	case emu.IsSpec(path):
		// The gate looks at the data file; a device another process has open is refused by
		// its lock. Every run starts on a reset device (bench erases DEV anyway): no file of
		// the user's is ever deleted.
		if !f.force {
			if err := safety.Gate(safety.Bench, path); err != nil {
				return nil, err
			}
		}
		c, err := emu.OpenWith(path, emu.OpenOptions{Create: true})
		if err != nil {
			return nil, err
		}
		if err := c.Reset(); err != nil {
			c.Close()
			return nil, err
		}
		sp := c.Spec() // with the geometry an existing device was made with
		bd := &benchDevice{op: sp.OP, ruBytes: sp.RUSize, iso: sp.Isolation, isoKnown: true, kind: string(blockdev.KindEmulated)}
		dev, disc, err := emu.NewDevice(c, path, nvme.DeviceOptions{})
		if err != nil {
			return nil, err
		}
		bd.dev = dev
		if disc != nil && disc.Config != nil && len(disc.PIDs) > 0 {
			bd.handles = len(disc.PIDs)
			bd.ruBytes = int64(disc.Config.RUNS)
			t, eg := dev.Transport(), disc.EnduranceGroup
			bd.stats = func() (*fdp.Stats, error) { s, _, err := fdp.ReadStats(t, eg); return s, err }
		}
		if bd.stats == nil {
			bd.notes = append(bd.notes, "emulated device has FDP disabled: no device WAF")
		}
		bd.reset = func() error {
			bd.model = nil
			return c.Reset()
		}
		return bd, nil
	}
	st, err := os.Stat(path)
	created := false
	if errors.Is(err, os.ErrNotExist) && f.size != "" {
		n, perr := units.ParseSize(f.size)
		if perr != nil || n <= 0 {
			return nil, fmt.Errorf("--size %q: %v", f.size, perr)
		}
		fh, cerr := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, blockdev.DataFileMode)
		if cerr != nil {
			return nil, cerr
		}
		if terr := fh.Truncate(n / 4096 * 4096); terr != nil {
			fh.Close()
			os.Remove(path) // bench's own, just made
			return nil, terr
		}
		fh.Close()
		created = true
		st, err = os.Stat(path)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w (give --size to create a file)", path, err)
	}
	if !st.Mode().IsRegular() && !f.force {
		return nil, fmt.Errorf("%s is a device: bench formats it and destroys its contents; pass --force if that is intended", path)
	}
	if !created && !f.force {
		if err := safety.Gate(safety.Bench, path); err != nil {
			return nil, err
		}
	}
	opt := devices.DefaultOptions()
	opt.IOEngine, opt.QueueDepth, opt.Exclusive = f.ioEngine, f.queueDepth, !st.Mode().IsRegular()
	dev, err := devices.Open(path, opt)
	if err != nil && st.Mode().IsRegular() && !errors.Is(err, blockdev.ErrLocked) {
		// O_DIRECT refused (tmpfs): buffered I/O still measures the write stream and WAF.
		opt.Direct = false
		dev, err = devices.Open(path, opt)
	}
	if err != nil {
		return nil, err
	}
	bd := &benchDevice{dev: dev, op: -1, kind: string(dev.Info().Kind)}
	if nd, ok := dev.(interface{ Transport() nvme.Transport }); ok { // passthrough, claimed or not
		disc, derr := fdp.Discover(nd.Transport())
		if derr == nil && disc.Config != nil && len(disc.PIDs) > 0 {
			bd.handles, bd.ruBytes = len(disc.PIDs), int64(disc.Config.RUNS)
			t, eg := nd.Transport(), disc.EnduranceGroup
			bd.stats = func() (*fdp.Stats, error) { s, _, err := fdp.ReadStats(t, eg); return s, err }
		}
	}
	if ws, ok := dev.(interface {
		WriteStreams() (blockdev.WriteStreams, error)
	}); ok && bd.stats == nil {
		if w, err := ws.WriteStreams(); err == nil && w.Max > 0 {
			// Linux >= 6.16 block-layer write streams: handle h is stream h+1 (the handle at
			// RUH-status index h on NVMe FDP); the FDP log is read through /dev/ngXnY.
			bd.handles, bd.ruBytes = w.Max, w.Granularity
			bd.notes = append(bd.notes, fmt.Sprintf("placement through kernel write streams (%d streams, %s granularity; handle h = stream h+1); "+
				"no device WAF through the block device: bench the namespace's /dev/ngXnY for the FDP log", w.Max, rbBytes(w.Granularity)))
			return bd, nil
		}
	}
	if bd.stats == nil {
		bd.notes = append(bd.notes, "device has no FDP: placement handles reach only the shadow model")
	}
	return bd, nil
}

func runBench(cmd *cobra.Command, path string, f *benchFlags) error {
	b, err := f.wl.build()
	if err != nil {
		return err
	}
	if f.wl.writeTrace != "" {
		return f.wl.writeTraceFile(b, cmd.OutOrStdout())
	}
	policies := wlSplitList(f.placement)
	if len(policies) == 0 {
		return fmt.Errorf("--placement: give at least one policy, e.g. none,cache-salt")
	}
	if err := f.out.checkOutputs(); err != nil {
		return err
	}
	if emu.IsSpec(path) {
		// The emulated SSD runs its own FTL model: refuse a geometry whose GC can run out of
		// room before the device is created.
		sp, err := emu.ParseSpec(path)
		if err != nil {
			return err
		}
		if err := checkFeasible(emuFTLConfig(sp), "this emulated device", emuKnobs); err != nil {
			return err
		}
	}
	bd, err := openBenchDevice(path, f)
	if err != nil {
		return err
	}
	defer func() { bd.dev.Close() }()
	info := bd.dev.Info()
	handles := bd.handles
	if handles == 0 {
		handles = f.handles
	}
	// Validate every policy before the first format.
	for _, p := range policies {
		if _, err := placement.Parse(p, handles); err != nil {
			return fmt.Errorf("--placement %s: %w", p, err)
		}
	}
	ru := bd.ruBytes
	if ru == 0 {
		if ru, err = units.ParseSize(f.ru); err != nil {
			return fmt.Errorf("--ru: %w", err)
		}
	}
	op := bd.op
	if op < 0 {
		op = f.op
	}
	iso := ftl.InitiallyIsolated
	if bd.isoKnown {
		iso = bd.iso
	}
	if f.isolation != "" {
		if iso, err = ftl.ParseIsolation(f.isolation); err != nil {
			return err
		}
	}
	gc, err := ftl.ParseGCPolicy(f.gc)
	if err != nil {
		return err
	}
	const unit = 4096
	logical := info.Size / unit * unit
	fc := ftl.Config{MappingUnit: unit, LogicalBytes: logical, OP: op, RUBytes: ru / unit * unit, Handles: handles,
		Isolation: iso, GC: gc}

	const align = engine.DefaultBlockAlign
	slotBytes := (engine.DefaultHeaderBytes + int64(b.chunkBytes) + align - 1) / align * align
	ecfg := engine.DefaultConfig()
	ecfg.DevicePath = path
	ecfg.SlotBytes = slotBytes
	ecfg.CheckpointInterval = f.ckptInterval
	ecfg.IdleQuiet = 10 * time.Millisecond
	ecfg.ForceAfterOps = 4096
	ecfg.DeallocateOnDelete = f.deallocate
	ecfg.LoadCheckpoint = false
	ecfg.QueueDepth = max(f.queueDepth, 1)
	if f.slotGroups {
		ecfg.SlotGroupBytes = max(ru, slotBytes)
	}
	// Workload flags are checked before any device is formatted (the slot count is an
	// upper bound: the metadata region takes some).
	if dc, err := f.wl.driverConfig(b, fc.RUBytes, slotBytes); err != nil {
		return err
	} else if err := workloads.CheckRegion(dc.RegionSlots, int64(f.wl.util*float64(logical/slotBytes))); err != nil {
		return err
	}
	knobs := flagKnobs
	switch {
	case bd.kind == string(blockdev.KindEmulated):
		knobs = emuKnobs
	case bd.stats != nil: // a real FDP device sets RUs and handles; only the model's OP is ours
		knobs = shadowKnobs
	}
	// The emulator's own FTL is the device: an infeasible one cannot run. On any other device
	// the shadow model is only an estimate and never blocks the run: without it the bench
	// reports the device's own WAF (FDP) or none, and says which flag gives an estimate.
	shadowErr := checkFeasible(fc, "the shadow FTL model of "+path, knobs)
	if shadowErr == nil {
		if _, err := ftl.New(fc); err != nil {
			shadowErr = fmt.Errorf("the shadow FTL model of %s: %w", path, err)
		}
	}
	if shadowErr != nil {
		if bd.kind == string(blockdev.KindEmulated) {
			return shadowErr
		}
		bd.noShadow = "no host WAF estimate: " + shadowErr.Error()
	}
	devSource := benchDeviceWAFSource(bd)
	if f.metaBytes == "auto" {
		ecfg.MetaTotalBytes = engine.MetaBytesFor(logical, slotBytes, ecfg.BlockAlign, ecfg.CheckpointFormat)
	} else {
		n, err := units.ParseSize(f.metaBytes)
		if err != nil {
			return fmt.Errorf("--meta-bytes: %w", err)
		}
		ecfg.MetaTotalBytes = n
	}

	rep := reports.New("bench")
	rep.Device = reports.Device{Path: path, Kind: bd.kind, SizeBytes: info.Size, FDP: bd.stats != nil, Handles: handles,
		RUBytes: fc.RUBytes, OP: op, MappingUnit: unit, Isolation: iso.String(), GC: gc.String(),
		Precondition: f.precondition, Deallocate: f.deallocate}
	rep.Notes = append(rep.Notes, bd.notes...)
	if bd.noShadow == "" {
		rep.Notes = append(rep.Notes, "host WAF is modelled: a shadow FTL model fed with every write and deallocate the engine issued")
	}
	if devSource == reports.SourceEmulatorModel {
		rep.Notes = append(rep.Notes, "emulator WAF is model output too: the emulated SSD's FDP log comes from its own FTL model, "+
			"fed the same writes as the host estimate, so it does not confirm it; with one worker the two agree exactly, with more "+
			"they differ by the order concurrent writes reach each model (the shadow applies each batch whole, the emulator command by command)")
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	failed, err := benchRunAll(ctx, rep, policies, f.duration, bd.reset, func(pol string) (reports.Run, reports.Workload, error) {
		return benchOne(ctx, cmd, f, bd, b, pol, handles, fc, ecfg, devSource)
	})
	if err != nil {
		return fmt.Errorf("re-creating %s: %w", path, err)
	}
	rep.Window.Description = benchWindowDesc(f.warmup, f.warmupTimeout, f.duration, f.wl.requests)
	for _, r := range rep.Runs {
		if !r.Failed() {
			rep.Window.MeasuredBytes = r.WrittenBytes
			break
		}
	}
	if err := f.out.emit(cmd, rep); err != nil {
		return err
	}
	return benchOutcome(rep, failed, len(policies))
}

// benchRunAll runs one bench per policy in order (reset, when set, re-creates the device
// between them). A policy that fails becomes a run carrying its error and the next one
// runs; an interruption stops the loop and sets rep.Interrupted and rep.Partial. It returns
// the policies that failed, or the error of a reset (the device is gone).
func benchRunAll(ctx context.Context, rep *reports.Report, policies []string, window time.Duration, reset func() error,
	runOne func(pol string) (reports.Run, reports.Workload, error)) (failed []string, err error) {
	for i, pol := range policies {
		if ctx.Err() != nil {
			rep.Partial = benchPartial(rep.Runs, policies[i:], window)
			break
		}
		if i > 0 && reset != nil {
			if err := reset(); err != nil {
				return failed, err
			}
		}
		run, wl, err := runOne(pol)
		if err != nil && ctx.Err() != nil {
			// Stopped before its window began (preconditioning, formatting): nothing measured.
			rep.Partial = benchPartial(rep.Runs, policies[i:], window)
			break
		}
		if err != nil {
			run = reports.Run{Policy: pol, Error: err.Error()}
		} else {
			rep.Workload = wl
		}
		rep.Runs = append(rep.Runs, run)
		if run.Failed() {
			failed = append(failed, pol)
		}
		if ctx.Err() != nil {
			rep.Partial = benchPartial(rep.Runs, policies[i+1:], window)
			break
		}
	}
	rep.Interrupted = rep.Partial != ""
	return failed, nil
}

// benchOutcome is the command's error once the report is out: an interruption (exit 130),
// else failed policies (exit 1).
func benchOutcome(rep *reports.Report, failed []string, n int) error {
	switch {
	case rep.Interrupted:
		return fmt.Errorf("%w: partial result (%s)", errInterrupted, rep.Partial)
	case len(failed) > 0:
		return fmt.Errorf("bench: %d of %d policies failed (%s); their errors are under the table", len(failed), n, strings.Join(failed, ", "))
	}
	return nil
}

// benchPartial says what an interrupted bench covers: the run cut short, if any, and the
// policies that never ran.
func benchPartial(runs []reports.Run, notRun []string, window time.Duration) string {
	var parts []string
	done := 0
	for _, r := range runs {
		switch {
		case !r.Interrupted:
			done++
		case strings.Contains(r.Note, benchWarmupCut):
			parts = append(parts, r.Policy+" stopped during warm-up (its figures cover the warm-up)")
		case window > 0:
			parts = append(parts, fmt.Sprintf("%s stopped %.1f s into its %s window", r.Policy, r.ElapsedSec, window))
		default:
			parts = append(parts, fmt.Sprintf("%s stopped after %.1f s of its window", r.Policy, r.ElapsedSec))
		}
	}
	parts = append([]string{fmt.Sprintf("%d of %d policies complete", done, len(runs)+len(notRun))}, parts...)
	if len(notRun) > 0 {
		parts = append(parts, "not run: "+strings.Join(notRun, ", "))
	}
	return strings.Join(parts, "; ")
}

// benchWarmupCut is the note of a run interrupted before its measured window began.
const benchWarmupCut = "interrupted during warm-up: the figures cover the warm-up, not a measured window"

// benchDeviceWAFSource labels the device WAF: the emulator's FDP log (in process, or served
// over NVMe/TCP and reached as a kernel NVMe device) is its FTL model's output; a real
// drive's log is a measurement.
func benchDeviceWAFSource(bd *benchDevice) string {
	if bd.kind == string(blockdev.KindEmulated) {
		return reports.SourceEmulatorModel
	}
	if nd, ok := bd.dev.(*nvme.Device); ok && bd.stats != nil {
		if c, err := nvme.ReadController(nd.Transport()); err == nil && c.ModelNumber == emu.ModelNumber {
			return reports.SourceEmulatorModel
		}
	}
	return reports.SourceFDPStats
}

// emuFTLConfig is the FTL model configuration an emulated SSD of spec sp runs (as emu.New
// builds it; TestEmuFTLConfigMatchesEmulator keeps the two together).
func emuFTLConfig(sp emu.Spec) ftl.Config {
	return ftl.Config{MappingUnit: sp.MappingUnit, LogicalBytes: sp.Size, OP: sp.OP, RUBytes: sp.RUSize, ReclaimGroups: sp.RGs,
		Handles: sp.RUHs, Isolation: sp.Isolation, HandleIsolation: sp.HandleIsolation, GC: sp.GC}
}

type benchSample struct {
	t     time.Duration
	c     workloads.Counters
	stats ftl.Stats
}

// benchOne formats the device for one policy, runs the workload and returns its report run.
func benchOne(ctx context.Context, cmd *cobra.Command, f *benchFlags, bd *benchDevice, b *wlBuilt, pol string,
	handles int, fc ftl.Config, ecfg engine.Config, devSource string) (reports.Run, reports.Workload, error) {
	var wl reports.Workload
	policy, err := placement.Parse(pol, handles)
	if err != nil {
		return reports.Run{}, wl, err
	}
	if bd.model == nil && bd.noShadow == "" {
		if bd.model, err = ftl.New(fc); err != nil {
			return reports.Run{}, wl, err
		}
	}
	sh := workloads.NewShadow(bd.dev, bd.model)
	sh.KeepInnerOpen = true
	note, err := sh.Precondition(ctx, f.precondition, 1<<20)
	if err != nil {
		return reports.Run{}, wl, fmt.Errorf("precondition: %w", err)
	}
	placer := workloads.PolicyPlacer{Policy: policy, Model: f.wl.model}
	ecfg.Placer = placer
	ecfg.MetadataHandle = placer.MetadataHandle()
	e, err := engine.Format(sh, ecfg)
	if err != nil {
		return reports.Run{}, wl, fmt.Errorf("format: %w", err)
	}
	closed := false
	defer func() {
		if !closed {
			e.Close()
		}
	}()
	gen, err := b.newGen()
	if err != nil {
		return reports.Run{}, wl, err
	}
	be := workloads.NewEngineBackend(e, f.wl.model, gen.Salts(), gen.ChunkBytes())
	dc, err := f.wl.driverConfig(b, fc.RUBytes, ecfg.SlotBytes)
	if err != nil {
		return reports.Run{}, wl, err
	}
	capBytes := be.Slots() * int64(gen.ChunkBytes())
	dc.WarmupBytes = int64(f.warmup * float64(capBytes))
	dc.WarmupTimeout = f.warmupTimeout
	dc.Duration = f.duration

	var (
		mu        sync.Mutex
		samples   []benchSample
		warmStats ftl.Stats
		warmDev   *fdp.Stats
		warmAt    time.Duration
		devErr    error
		dealloc0  = sh.DeallocatedBytes()
		start     = time.Now()
	)
	dc.OnWarm = func() {
		var ws ftl.Stats
		var wd *fdp.Stats
		var werr error
		sh.Quiesce(func() {
			ws = sh.Stats()
			if bd.stats != nil {
				wd, werr = bd.stats()
			}
		})
		mu.Lock()
		warmStats, warmAt, warmDev, devErr = ws, time.Since(start), wd, werr
		mu.Unlock()
	}
	d, err := workloads.NewDriver(dc, gen, be)
	if err != nil {
		return reports.Run{}, wl, err
	}
	every := max(f.duration/50, 100*time.Millisecond)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var bar *progressbar.ProgressBar
	if !f.quiet && term.IsTerminal(int(os.Stderr.Fd())) {
		bar = progressbar.NewOptions64(int64(f.duration/time.Millisecond), progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription(pol), progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(200*time.Millisecond))
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				s := benchSample{t: time.Since(start), c: d.Counters(), stats: sh.Stats()}
				mu.Lock()
				samples = append(samples, s)
				w := warmAt
				mu.Unlock()
				if bar != nil && w > 0 {
					bar.Set64(int64((s.t - w) / time.Millisecond))
				}
			}
		}
	}()
	res, runErr := d.Run(ctx)
	close(stop)
	wg.Wait()
	if bar != nil {
		bar.Finish()
	}
	mu.Lock() // the sampler has stopped; this orders the OnWarm writes before the reads below
	defer mu.Unlock()
	endStats := sh.Stats()
	var endDev *fdp.Stats
	if bd.stats != nil && devErr == nil {
		endDev, devErr = bd.stats()
	}
	usage := e.Usage()
	closed = true
	if err := e.Close(); err != nil && runErr == nil {
		runErr = fmt.Errorf("close: %w", err)
	}
	run := reports.FromResult(policy.Name(), res, true)
	if runErr != nil {
		run.Error = runErr.Error()
	}
	win := endStats.Sub(warmStats)
	run.Infeasible = sh.Infeasible()
	if !run.Infeasible { // a model that gave up has no WAF to report
		run.HostWAF = &reports.WAF{Value: win.WAF(), Source: reports.SourceModelled, HostBytes: win.HostBytes, MediaBytes: win.MediaBytes,
			Handles: reports.HandlesOf(win, placement.Labels(policy))}
	}
	run.DeallocatedBytes = reports.I64(sh.DeallocatedBytes() - dealloc0)
	if bd.model != nil {
		run.Utilisation = reports.F64(float64(endStats.ValidBytes) / float64(fc.LogicalBytes))
	}
	// Steady state: the second half of the measured window.
	var post []benchSample
	for _, s := range samples {
		if s.t >= warmAt {
			post = append(post, s)
		}
	}
	if len(post) >= 2 && run.HostWAF != nil {
		run.HostWAF.Steady = endStats.Sub(post[len(post)/2].stats).WAF()
	}
	for i := 1; i < len(samples); i++ {
		a, z := samples[i-1], samples[i]
		dt := (z.t - a.t).Seconds()
		pt := reports.Point{Seconds: reports.F64(z.t.Seconds()), PayloadBytes: z.c.BytesWritten,
			OpsPerSec: reports.F64(float64(z.c.Ops-a.c.Ops) / dt), WriteGBps: reports.F64(float64(z.c.BytesWritten-a.c.BytesWritten) / dt / 1e9),
			ReadGBps: reports.F64(float64(z.c.BytesRead-a.c.BytesRead) / dt / 1e9)}
		if run.HostWAF != nil { // no model, no modelled WAF (null, never 0)
			pt.WAF, pt.CumWAF = reports.F64(z.stats.Sub(a.stats).WAF()), reports.F64(z.stats.Sub(samples[0].stats).WAF())
		}
		run.Timeline = append(run.Timeline, pt)
	}
	if bd.stats != nil {
		if devErr != nil {
			run.Error = strings.TrimPrefix(run.Error+"; ", "; ") + "FDP statistics: " + devErr.Error()
		} else if warmDev != nil && endDev != nil {
			dd := endDev.Sub(warmDev)
			run.DeviceWAF = &reports.WAF{Value: dd.WAF(), Source: devSource, HostBytes: uint64(dd.HBMW.Float64()), MediaBytes: uint64(dd.MBMW.Float64())}
		}
	}
	var notes []string
	if res.Interrupted && !res.Warmed {
		notes = append(notes, benchWarmupCut)
	}
	if res.WarmupTimedOut {
		notes = append(notes, "warm-up timed out before the target was stored")
	}
	if note != "" {
		notes = append(notes, note)
	}
	if bd.noShadow != "" {
		notes = append(notes, bd.noShadow)
	} else if run.Infeasible {
		notes = append(notes, fmt.Sprintf("the shadow FTL model ran out of free reclaim units (%d handles, %s RUs, op %g): "+
			"no host WAF", handles, rbBytes(fc.RUBytes), fc.OP))
	}
	if ff := sh.ForeignHandleWrites(); ff > 0 {
		notes = append(notes, fmt.Sprintf("%d writes carried a handle beyond the model's %d (modelled on handle 0)", ff, handles))
	}
	run.Note = strings.Join(notes, "; ")
	wl = reports.Workload{Name: b.name, Seed: f.wl.seed, Tenants: b.salts, ChunkBytes: b.chunkBytes,
		SlotBytes: ecfg.SlotBytes, Slots: usage.SlotsTotal, TargetUtil: f.wl.util, Eviction: f.wl.eviction, RegionSlots: dc.RegionSlots,
		Workers: f.wl.workers, Rate: f.wl.rate, Description: b.desc}
	return run, wl, nil
}

// benchWindowDesc states the measured window: bounded by --duration, by --requests (ops
// counted from the start, warm-up included), or by whichever ends first.
func benchWindowDesc(warmup float64, timeout, duration time.Duration, requests int64) string {
	var end string
	switch {
	case duration > 0 && requests > 0:
		end = fmt.Sprintf("for %s or until %d requests in total, whichever comes first", duration, requests)
	case requests > 0:
		end = fmt.Sprintf("until %d requests in total (the same op stream for every policy)", requests)
	case duration > 0:
		end = "for " + duration.String()
	default:
		end = "until the workload ends"
	}
	return fmt.Sprintf("after %g× cache capacity warm-up (≤ %s), %s; steady = last half", warmup, timeout, end)
}
