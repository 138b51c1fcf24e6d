// Package bench runs a KV-cache workload through the engine on a real or emulated device,
// once per placement policy, and compares them (rbctl bench): ops/s, bandwidth, latency
// percentiles, hit ratio, the host WAF of a shadow FTL model fed exactly the writes and
// deallocates the engine issued, and the device WAF from the FDP statistics log when the
// device has FDP. Run takes an Options struct and returns a reports.Report.
package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/engine/sharded"
	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/internal/sys"
	"github.com/rbctl/rbctl/lmcache"
	"github.com/rbctl/rbctl/placement"
	"github.com/rbctl/rbctl/reports"
	"github.com/rbctl/rbctl/workloads"
)

// Options is one bench comparison.
type Options struct {
	// Drive, when set, projects every run's drive life against it (capacity: the device's).
	Drive *reports.Drive
	// Causes, "sequential" or "shapley", adds WAF by cause for every run of a one-device
	// bench: replays of the shadow model's recorded input under other device settings
	// (explain.go).
	Causes string
	// The device: an open Device (the caller keeps and closes it; bench formats it), or a
	// Path: a file, a block device, /dev/ngXnY, emu:PATH?... or mem:SIZE.
	Device blockdev.Device
	Path   string
	// Several devices (Devices, or Paths) hold one cache sharded over them (engine/sharded):
	// each gets its own engine, shadow model and row in Run.Devices. A device error fails
	// only the keys on that device and the run goes on (one device: the run stops, as ever).
	Devices []blockdev.Device
	Paths   []string
	ShardBy string // sharded.Route: hash (default) or kv-rank
	// ShardRanks, with kv-rank routing, is the TP rank each device serves (sharded.Options.Ranks;
	// an LMCache config's per_tp_device_paths): the workload's chunks carry these ranks.
	ShardRanks []uint64
	// LMCache, when set, takes the devices, I/O settings, engine layout and a first
	// placement run from an LMCache config (lmcache.go); no device may be given besides.
	LMCache *lmcache.File
	Create  int64 // Path(s): create each as a sparse file of this size if it does not exist
	// Force skips the safety gate (a block device, a file holding data, a device in use).
	Force      bool
	IOPath     string // devices.Options.IOPath (--io-engine)
	QueueDepth int    // device and engine queue depth

	Policies []string // placement.Parse specs, run in order
	Workload workloads.Spec
	// Fit, for a node's recording (workloads l2trace:), takes the recording node's slots
	// (as the target, when the devices hold them), eviction and admission where the
	// caller gave none.
	Fit           workloads.Fit
	Duration      time.Duration // measured window per policy (0: bounded by Workload.Requests)
	Warmup        float64       // warm-up, in cache capacities of payload stored
	WarmupTimeout time.Duration
	Precondition  string // trim (default) or fill
	Deallocate    bool   // deallocate freed slots (H6)

	// The shadow model, where the device does not state its own geometry.
	Handles   int
	RUBytes   int64
	OP        float64
	Isolation *ftl.Isolation // nil: an emulated device's own, else initial
	GC        ftl.GCPolicy

	SlotGroups         bool          // group slots per handle into RU-sized groups (H4)
	MetaBytes          int64         // metadata region; 0: engine.MetaBytesFor a full index
	CheckpointInterval time.Duration // engine checkpoint interval (0: 1 s)

	// Progress, when set, is called about every Duration/50 while a policy runs.
	Progress func(Progress)
	// Explain phrases an error that becomes a note of the report rather than a failure (the
	// shadow model's refusal); nil: err.Error(). A front end adds what to type.
	Explain func(error) string
}

// Progress is a running policy's position in its measured window.
type Progress struct {
	Policy  string
	Index   int           // the policy's place in Options.Policies, from 1
	Of      int           // policies in the comparison
	Warm    bool          // the measured window has begun
	Elapsed time.Duration // into the measured window
	Window  time.Duration // Options.Duration
	// WarmFrac is the warm-up's progress (payload stored of what it needs) before the window
	// begins; Frac the window's (Elapsed of Window, or requests of Workload.Requests).
	WarmFrac, Frac float64
	Done           bool // the policy's run has ended
}

// ErrNoPolicy: Options.Policies is empty.
var ErrNoPolicy = errors.New("no placement policy to compare")

// Run benches every policy of o in order. A policy that fails becomes a run carrying its
// error and the next one runs; a cancelled ctx stops the loop and marks the report
// Interrupted and Partial. The error is for a comparison that cannot start or a device
// that could not be reset between policies.
func Run(ctx context.Context, o Options) (*reports.Report, error) {
	if o.LMCache != nil {
		if err := applyLMCache(&o); err != nil {
			return nil, err
		}
	}
	if len(o.Policies) == 0 {
		return nil, ErrNoPolicy
	}
	// A misspelt policy is reported as such before the device is looked at (the handle
	// count is checked once it is open).
	for _, p := range o.Policies {
		if isLMCacheRun(&o, p) {
			continue
		}
		if _, err := placement.Parse(p, 1<<15); err != nil {
			return nil, fmt.Errorf("placement %s: %w", p, err)
		}
	}
	if _, err := ParsePrecondition(o.Precondition); err != nil {
		return nil, err // before a device is made or a policy runs
	}
	src, err := o.Workload.Build()
	if err != nil {
		return nil, err
	}
	if strings.Contains(o.Workload.Admission, ",") {
		return nil, fmt.Errorf("%w: bench runs one admission policy, not %q (simulate compares several)", workloads.ErrSpec, o.Workload.Admission)
	}
	if src.Trace != nil || src.Recorded != nil {
		// A trace or a recording is measured whole, from its first request, as simulate does.
		o.Warmup = 0
	}
	route, err := sharded.ParseRoute(o.ShardBy)
	if err != nil {
		return nil, err
	}
	_, paths := o.devices()
	for _, path := range paths {
		if !emu.IsSpec(path) {
			continue
		}
		// The emulated SSD runs its own FTL model: refuse a geometry whose GC can run out of
		// room before the device is created.
		sp, err := emu.ResolveSpec(path) // an existing device's saved geometry, not the defaults
		if err != nil {
			return nil, err
		}
		if err := sp.FTLConfig().CheckFeasible("this emulated device", emuTunable); err != nil {
			return nil, fmt.Errorf("%s: %w", path, &emu.SpecError{Err: err}) // its fixes are spec parameters
		}
	}
	made := missingFiles(paths) // --create makes these; a bench refused before it runs removes them
	ts, names, err := openTargets(&o)
	if err != nil {
		removeFiles(made)
		return nil, err
	}
	defer closeTargets(ts)
	p, err := plan(&o, ts, names, src)
	if err != nil {
		removeFiles(made) // unlinked while open: the deferred close releases them
		return nil, err
	}
	p.route = route
	for i := range min(len(paths), len(ts)) {
		ts[i].mark = markFile(paths[i]) // bench formats it from here on: its own (own.go)
	}
	rep := p.report()
	err = runAll(ctx, rep, o.Policies, o.Duration, resetTargets(ts, names), func(pol string) (reports.Run, error) { return p.runPolicy(ctx, pol) })
	if err != nil {
		return nil, err
	}
	for _, r := range rep.Runs {
		if !r.Failed() {
			rep.Window.MeasuredBytes = r.WrittenBytes
			break
		}
	}
	rep.Explain = p.explained
	if o.Causes != "" && len(p.shards) > 1 {
		rep.Notes = append(rep.Notes, "--explain: not made for a cache sharded over several devices (one shadow model per device)")
	}
	if o.Drive != nil {
		d := *o.Drive
		d.WithCapacity(rep.Device.SizeBytes)
		tokens := 0
		if o.Workload.Kind == "kv" || strings.HasPrefix(o.Workload.Kind, "mooncake:") {
			tokens = o.Workload.ChunkTokens
		}
		rep.ProjectDrive(&d, tokens)
	}
	return rep, nil
}

var (
	emuTunable    = ftl.Tunable{OP: true, OPMax: 1, RU: true, Handles: true}
	modelTunable  = ftl.Tunable{OP: true, OPMax: 0.9, RU: true, Handles: true}
	shadowTunable = ftl.Tunable{OP: true, OPMax: 0.9} // a real FDP device sets RUs and handles
)

// runAll runs one bench per policy in order (reset, when set, re-creates the device
// between them). A policy that fails becomes a run carrying its error and the next one
// runs; an interruption stops the loop and sets rep.Interrupted and rep.Partial. It fails
// only with the error of a reset (the device is gone).
func runAll(ctx context.Context, rep *reports.Report, policies []string, window time.Duration, reset func() error,
	runOne func(pol string) (reports.Run, error)) error {
	for i, pol := range policies {
		if ctx.Err() != nil {
			rep.Partial = partial(rep.Runs, policies[i:], window)
			break
		}
		if i > 0 && reset != nil {
			if err := reset(); err != nil {
				return err
			}
		}
		load0, _ := sys.LoadAvg()
		run, err := runOne(pol)
		load1, _ := sys.LoadAvg()
		if err != nil && ctx.Err() != nil {
			// Stopped before its window began (preconditioning, formatting): nothing measured.
			rep.Partial = partial(rep.Runs, policies[i:], window)
			break
		}
		if err != nil {
			run = reports.Run{Policy: pol, Error: err.Error()}
		}
		run.LoadStart, run.LoadEnd = load0, load1
		rep.Runs = append(rep.Runs, run)
		if ctx.Err() != nil {
			rep.Partial = partial(rep.Runs, policies[i+1:], window)
			break
		}
	}
	rep.Interrupted = rep.Partial != ""
	return nil
}

// partial says what an interrupted bench covers: the run cut short, if any, and the
// policies that never ran.
func partial(runs []reports.Run, notRun []string, window time.Duration) string {
	var parts []string
	done := 0
	for _, r := range runs {
		switch {
		case !r.Interrupted:
			done++
		case strings.Contains(r.Note, warmupCut):
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

// warmupCut is the note of a run interrupted before its measured window began.
const warmupCut = "interrupted during warm-up: the figures cover the warm-up, not a measured window"

// WindowDescription states the measured window: bounded by the duration, by the request
// count (ops counted from the start, warm-up included), or by whichever ends first.
func WindowDescription(warmup float64, timeout, duration time.Duration, requests int64) string {
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

// engineConfig is the engine configuration every policy's run formats with.
func engineConfig(o *Options, path string, slotBytes, logical, ru int64) engine.Config {
	c := engine.DefaultConfig()
	c.DevicePath = path
	c.SlotBytes = slotBytes
	c.CheckpointInterval = o.CheckpointInterval
	if c.CheckpointInterval <= 0 {
		c.CheckpointInterval = time.Second
	}
	c.IdleQuiet = 10 * time.Millisecond
	c.ForceAfterOps = 4096
	c.DeallocateOnDelete = o.Deallocate
	// One worker: the deallocates go out in the operation stream's order (no background
	// goroutine, no age tick), so a run's WAF is the same every time.
	c.DeallocateInline = o.Workload.Workers <= 1
	c.LoadCheckpoint = false
	c.QueueDepth = max(o.QueueDepth, 1)
	if o.SlotGroups {
		c.SlotGroupBytes = max(ru, slotBytes)
	}
	c.MetaTotalBytes = o.MetaBytes
	if c.MetaTotalBytes == 0 {
		c.MetaTotalBytes = engine.MetaBytesFor(logical, slotBytes, c.BlockAlign, c.CheckpointFormat)
	}
	return c
}

// missingFiles is the plain file paths among paths that do not exist yet (not mem: or emu:
// devices).
func missingFiles(paths []string) []string {
	var out []string
	for _, p := range paths {
		if emu.IsSpec(p) || strings.HasPrefix(p, devices.MemPrefix) {
			continue
		}
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			out = append(out, p)
		}
	}
	return out
}

// removeFiles removes the regular files of paths that exist now (bench's own, just made).
func removeFiles(paths []string) {
	for _, p := range paths {
		if st, err := os.Lstat(p); err == nil && st.Mode().IsRegular() {
			os.Remove(p)
		}
	}
}
