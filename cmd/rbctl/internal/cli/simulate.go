package cli

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/placement"
	"github.com/rbctl/rbctl/reports"
	"github.com/rbctl/rbctl/reports/plots"
	"github.com/rbctl/rbctl/units"
	"github.com/rbctl/rbctl/workloads"
)

func init() { register(newSimulateCmd) }

// wlFlags are the generator and driver knobs bench and simulate share.
type wlFlags struct {
	kind         string
	preset       string
	tenants      []string
	model        string
	bytesPerTok  string
	chunkTokens  int
	maxContext   int
	readOnlyFrac float64
	requests     int64
	seed         uint64
	keys         uint64
	theta        float64
	readFrac     float64
	size         string
	synthTenants int
	eviction     string
	region       string
	util         float64
	workers      int
	rate         float64
	writeTrace   string
	traceLoops   int
}

func (w *wlFlags) register(fs *pflag.FlagSet, defaultModel string) {
	fs.StringVar(&w.kind, "workload", "kv", "kv, sequential, uniform, zipf, or trace:FILE (.jsonl or .csv; docs/bench.md)")
	fs.StringVar(&w.preset, "preset", "multi-tenant", "kv tenants when no --tenant is given: multi-tenant (chat/rag/agent with different lifetimes) or chat")
	fs.StringArrayVar(&w.tenants, "tenant", nil, "kv tenant SALT:k=v,... (w, prefixes, prefix, theta, sessions, turns, prompt, output, ttl); repeatable")
	fs.StringVar(&w.model, "model", defaultModel, "model preset for KV bytes per token: "+wlModelNames())
	fs.StringVar(&w.bytesPerTok, "bytes-per-token", "", "override the model's KV bytes per token (e.g. 128K)")
	fs.IntVar(&w.chunkTokens, "chunk-tokens", 256, "tokens per cached chunk (LMCache chunk_size)")
	fs.IntVar(&w.maxContext, "max-context", 32768, "kv: a conversation ends when its context would exceed this many tokens")
	fs.Float64Var(&w.readOnlyFrac, "read-only-frac", 0, "kv: fraction of requests that only look up and load")
	fs.Int64Var(&w.requests, "requests", 0, "stop after this many ops (0: no limit)")
	fs.Uint64Var(&w.seed, "seed", 1, "generator seed (same seed, same ops)")
	fs.Uint64Var(&w.keys, "keys", 100000, "synthetic: key space")
	fs.Float64Var(&w.theta, "theta", 0.99, "synthetic zipf: skew")
	fs.Float64Var(&w.readFrac, "read-frac", 0.5, "synthetic: fraction of gets")
	fs.StringVar(&w.size, "value-size", "", "synthetic: payload bytes per key (default: one kv chunk)")
	fs.IntVar(&w.synthTenants, "synthetic-tenants", 4, "synthetic: spread keys over this many salts")
	fs.StringVar(&w.eviction, "eviction", "lru", "cache eviction at the target utilisation: lru, fifo, region (whole regions of one tenant, least recent first) or region-fifo")
	fs.StringVar(&w.region, "region", "", "region size for --eviction region/region-fifo (default: the reclaim unit size: the device's FDP configuration, else --ru)")
	fs.Float64Var(&w.util, "util", 0.9, "target utilisation: the cache evicts to keep this fraction of its slots in use")
	fs.IntVar(&w.workers, "workers", 1, "concurrent requests")
	fs.Float64Var(&w.rate, "rate", 0, "arrival rate in requests/s (Poisson); 0 = closed loop")
	fs.StringVar(&w.writeTrace, "write-trace", "", "write the generated ops (--requests of them) as a trace file (.jsonl or .csv) and exit")
	fs.IntVar(&w.traceLoops, "trace-loops", 1, "trace: replay the trace this many times")
}

func wlModelNames() string {
	var n []string
	for _, m := range workloads.ModelPresets {
		n = append(n, fmt.Sprintf("%s (%d KiB/token)", m.Name, m.BytesPerToken()>>10))
	}
	return strings.Join(n, ", ")
}

// wlBuilt is a generator factory (a fresh, identical stream per run) and what to report.
type wlBuilt struct {
	newGen     func() (workloads.Generator, error)
	ttl        []float64
	chunkBytes int
	name       string
	desc       string
	salts      []string
}

func (w *wlFlags) build() (*wlBuilt, error) {
	m, err := workloads.LookupModel(w.model)
	if err != nil {
		return nil, err
	}
	bpt := m.BytesPerToken()
	if w.bytesPerTok != "" {
		v, err := units.ParseSize(w.bytesPerTok)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("--bytes-per-token %q: want a positive byte count such as 128K", w.bytesPerTok)
		}
		bpt = int(v)
	}
	if _, _, err := w.evictionFlags(); err != nil {
		return nil, err
	}
	chunk := w.chunkTokens * bpt
	b := &wlBuilt{name: w.kind, chunkBytes: chunk}
	switch {
	case w.kind == "kv":
		var ts []workloads.Tenant
		if len(w.tenants) > 0 {
			for _, s := range w.tenants {
				t, err := workloads.ParseTenant(s)
				if err != nil {
					return nil, err
				}
				ts = append(ts, t)
			}
		} else {
			switch w.preset {
			case "multi-tenant":
				ts = workloads.MultiTenant()
			case "chat":
				ts = []workloads.Tenant{workloads.DefaultTenant("chat")}
			default:
				return nil, fmt.Errorf("unknown --preset %q (multi-tenant or chat)", w.preset)
			}
		}
		cfg := workloads.KVConfig{Tenants: ts, ChunkTokens: w.chunkTokens, BytesPerToken: bpt, MaxContextTokens: w.maxContext,
			ReadOnlyFrac: w.readOnlyFrac, Requests: w.requests, Seed: w.seed}
		if _, err := workloads.NewKV(cfg); err != nil {
			return nil, err
		}
		b.newGen = func() (workloads.Generator, error) { return workloads.NewKV(cfg) }
		var parts []string
		for _, t := range ts {
			b.ttl = append(b.ttl, t.TTL)
			b.salts = append(b.salts, t.Salt)
			parts = append(parts, fmt.Sprintf("%s(w=%g,ttl=%g,turns=%g)", t.Salt, t.Weight, t.TTL, t.Turns))
		}
		b.desc = fmt.Sprintf("kv %s, %d tokens/chunk × %d KiB/token = %g MiB chunks, tenants %s", w.model, w.chunkTokens, bpt>>10,
			float64(chunk)/(1<<20), strings.Join(parts, " "))
	case strings.HasPrefix(w.kind, "trace:"):
		path := strings.TrimPrefix(w.kind, "trace:")
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("--workload %s: %w", w.kind, err)
		}
		tr, err := workloads.ReadTrace(f, workloads.FormatOf(path))
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		b.newGen = func() (workloads.Generator, error) { return tr.Replay(w.traceLoops), nil }
		g := tr.Replay(1)
		b.chunkBytes, b.salts = g.ChunkBytes(), g.Salts()
		b.desc = fmt.Sprintf("trace %s: %d ops, %d salts", path, len(tr.Ops), len(b.salts))
	default:
		size := int64(chunk)
		if w.size != "" {
			if size, err = units.ParseSize(w.size); err != nil {
				return nil, fmt.Errorf("--value-size: %w", err)
			}
		}
		cfg := workloads.SyntheticConfig{Pattern: workloads.Pattern(w.kind), Keys: w.keys, Theta: w.theta, ReadFrac: w.readFrac,
			Size: int(size), Tenants: w.synthTenants, Ops: w.requests, Seed: w.seed}
		g, err := workloads.NewSynthetic(cfg)
		if err != nil {
			return nil, fmt.Errorf("--workload %s: %w", w.kind, err)
		}
		b.newGen = func() (workloads.Generator, error) { return workloads.NewSynthetic(cfg) }
		b.chunkBytes, b.salts = int(size), g.Salts()
		b.desc = fmt.Sprintf("%s over %d keys of %d B, read fraction %g", w.kind, w.keys, size, w.readFrac)
	}
	return b, nil
}

// evictionFlags parses --eviction and --region; region is 0 when --region was not given.
func (w *wlFlags) evictionFlags() (ev workloads.Eviction, region int64, err error) {
	if ev, err = workloads.ParseEviction(w.eviction); err != nil {
		return "", 0, fmt.Errorf("--eviction: %w", err)
	}
	if w.region == "" {
		return ev, 0, nil
	}
	if !ev.Regional() {
		return "", 0, fmt.Errorf("--region is for --eviction region or region-fifo, not %s", ev)
	}
	if region, err = units.ParseSize(w.region); err != nil || region <= 0 {
		return "", 0, fmt.Errorf("--region %q: want a positive size such as 2G", w.region)
	}
	return ev, region, nil
}

// driverConfig is the driver part of the flags. ruBytes (0: unknown) and slotBytes size
// the regions of region eviction.
func (w *wlFlags) driverConfig(b *wlBuilt, ruBytes, slotBytes int64) (workloads.DriverConfig, error) {
	ev, rb, err := w.evictionFlags()
	if err != nil {
		return workloads.DriverConfig{}, err
	}
	if w.util <= 0 || w.util > 1 {
		return workloads.DriverConfig{}, fmt.Errorf("--util %g: want a fraction in (0, 1]", w.util)
	}
	dc := workloads.DriverConfig{Eviction: ev, TargetUtil: w.util, TTL: b.ttl, Workers: w.workers, Rate: w.rate,
		MaxOps: w.requests, Seed: w.seed}
	if ev.Regional() {
		if rb == 0 {
			rb = ruBytes
		}
		if rb == 0 {
			return dc, fmt.Errorf("--eviction %s: the device's reclaim unit size is unknown; give --region SIZE", ev)
		}
		if rb < slotBytes {
			return dc, fmt.Errorf("--eviction %s: region %s is smaller than one %s slot; give --region of at least a slot", ev, rbBytes(rb), rbBytes(slotBytes))
		}
		dc.RegionSlots = float64(rb) / float64(slotBytes)
	}
	return dc, nil
}

// writeTraceFile writes the first --requests ops of the workload as a trace.
func (w *wlFlags) writeTraceFile(b *wlBuilt, out io.Writer) error {
	if w.requests <= 0 {
		return fmt.Errorf("--write-trace needs --requests N (how many ops to write)")
	}
	g, err := b.newGen()
	if err != nil {
		return err
	}
	f, err := os.Create(w.writeTrace)
	if err != nil {
		return err
	}
	defer f.Close()
	tw, err := workloads.NewTraceWriter(f, workloads.FormatOf(w.writeTrace))
	if err != nil {
		return err
	}
	var op workloads.Op
	n := int64(0)
	for ; n < w.requests && g.Next(&op); n++ {
		if err := tw.Write(&op, g.Salts()); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote %d ops to %s\n", n, w.writeTrace)
	return f.Close()
}

// reportOutFlags select the report format and plots.
type reportOutFlags struct {
	json, csv, markdown bool
	perHandle           bool
	plot                string
	save                string
}

func (o *reportOutFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&o.json, "json", false, "print the report as JSON (schema "+reports.Schema+" v"+strconv.Itoa(reports.SchemaVersion)+")")
	fs.BoolVar(&o.csv, "csv", false, "print the report as CSV")
	fs.BoolVar(&o.markdown, "markdown", false, "print the report as Markdown tables")
	fs.BoolVar(&o.perHandle, "per-handle", false, "also print the modelled WAF per placement handle (always in --json)")
	fs.StringVar(&o.plot, "plot", "", "write PNG and SVG figures into this directory")
	fs.StringVar(&o.save, "save", "", "also write the JSON report to this file")
}

func (o *reportOutFlags) emit(cmd *cobra.Command, r *reports.Report) error {
	format := "table"
	n := 0
	for f, on := range map[string]bool{"json": o.json, "csv": o.csv, "markdown": o.markdown} {
		if on {
			format = f
			n++
		}
	}
	if n > 1 {
		return fmt.Errorf("choose one of --json, --csv, --markdown")
	}
	r.PerHandle = o.perHandle
	if err := reports.Write(cmd.OutOrStdout(), r, format); err != nil {
		return err
	}
	if o.save != "" {
		fh, err := os.Create(o.save)
		if err != nil {
			return fmt.Errorf("--save: %w", err)
		}
		if err := reports.JSON(fh, r); err != nil {
			fh.Close()
			return fmt.Errorf("--save: %w", err)
		}
		if err := fh.Close(); err != nil {
			return fmt.Errorf("--save: %w", err)
		}
	}
	if o.plot != "" && r.Interrupted {
		// Figures of a cut-short run would carry no mark; the table and JSON do.
		fmt.Fprintf(cmd.ErrOrStderr(), "plots: none drawn (interrupted)\n")
	} else if o.plot != "" {
		files, err := plots.All(r, o.plot)
		if err != nil {
			return fmt.Errorf("--plot %s: %w", o.plot, err)
		}
		reports.WriteWrapped(cmd.ErrOrStderr(), "plots: "+strings.Join(files, " "))
	}
	return nil
}

// simSweep is --sweep NAME=FROM:TO:STEP.
type simSweep struct {
	name   string
	values []float64
}

func simParseSweep(s string) (*simSweep, error) {
	name, rng, ok := strings.Cut(s, "=")
	parts := strings.Split(rng, ":")
	if !ok || len(parts) != 3 {
		return nil, fmt.Errorf("--sweep %q: want NAME=FROM:TO:STEP, e.g. util=0.5:0.95:0.05", s)
	}
	switch name {
	case "util", "op", "ru":
	default:
		return nil, fmt.Errorf("--sweep %q: can sweep util, op or ru", s)
	}
	var v [3]float64
	for i, p := range parts {
		x, err := units.ParseSize(p)
		if err != nil || strings.ContainsAny(p, ".") {
			f, ferr := strconv.ParseFloat(p, 64)
			if ferr != nil {
				return nil, fmt.Errorf("--sweep %q: %q is not a number", s, p)
			}
			v[i] = f
		} else {
			v[i] = float64(x)
		}
	}
	if v[2] <= 0 || v[1] < v[0] {
		return nil, fmt.Errorf("--sweep %q: want FROM ≤ TO and STEP > 0", s)
	}
	sw := &simSweep{name: name}
	for i := 0; ; i++ {
		x := v[0] + float64(i)*v[2]
		if x > v[1]+v[2]*1e-6 {
			break
		}
		sw.values = append(sw.values, math.Round(x*1e9)/1e9)
	}
	return sw, nil
}

type simFlags struct {
	wl            wlFlags
	out           reportOutFlags
	capacity      string
	op            float64
	ru            string
	unit          string
	handles       int
	isolation     string
	gc            string
	reserve       int
	precondition  string
	placement     string
	deallocate    bool
	checkpointOps int64
	warmup        float64
	measure       float64
	sweep         string
}

func newSimulateCmd() *cobra.Command {
	var f simFlags
	cmd := &cobra.Command{
		Use:   "simulate",
		Short: "Run a KV-cache workload straight into the FTL model (no data movement) and compare placement policies",
		Long: `simulate runs the same workloads as bench through a model of the engine (slots, slot
allocation, checkpoints, deallocate) into the FTL model of an FDP SSD, once per policy in
--placement, and reports the modelled WAF over a stated window: after --warmup capacities
written, over --measure capacities, plus the second half as the steady state.
A terabyte-class device simulates in seconds. --sweep util=0.5:0.95:0.05 repeats the
comparison over a parameter (util, op or ru) and --plot draws WAF against it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSimulate(cmd, &f) },
	}
	fs := cmd.Flags()
	f.wl.register(fs, "llama3-8b")
	f.out.register(fs)
	fs.StringVar(&f.capacity, "capacity", "1T", "logical device capacity")
	fs.Float64Var(&f.op, "op", 0.07, "over-provisioning: spare factor physical/logical − 1")
	fs.StringVar(&f.ru, "ru", "auto", "reclaim unit size (auto: capacity/512, rounded to the mapping unit)")
	fs.StringVar(&f.unit, "unit", "auto", "FTL mapping unit (auto: a power of two ≤ slot/16 and ≤ RU/256, ≥ 4K); slots are rounded up to it")
	fs.IntVar(&f.handles, "handles", 8, "placement handles (reclaim unit handles)")
	fs.StringVar(&f.isolation, "isolation", "persistent", "handle isolation: initial or persistent")
	fs.StringVar(&f.gc, "gc", "greedy", "GC victim policy: greedy or cost-benefit")
	fs.IntVar(&f.reserve, "reserve", 0, "free RUs kept for GC (0: the minimum, 1)")
	fs.StringVar(&f.precondition, "precondition", "trim", "state before the run: trim (all deallocated) or fill (sequentially written)")
	fs.StringVar(&f.placement, "placement", "none,cache-salt,metadata-class+cache-salt,hotness", "comma-separated placement policies to compare ("+strings.Join(placement.Known(), ", ")+", compositions with +), or future-knowledge references oracle:"+strings.Join(workloads.OracleModes, ", oracle:")+" (two passes; docs/bench.md)")
	fs.BoolVar(&f.deallocate, "deallocate", true, "deallocate a slot when its key is evicted or deleted (H6)")
	fs.Int64Var(&f.checkpointOps, "checkpoint-ops", 2000, "write a checkpoint every this many stores+deletes (0: never)")
	fs.Float64Var(&f.warmup, "warmup", 1, "warm-up, in device capacities of payload written")
	fs.Float64Var(&f.measure, "measure", 4, "measured window, in device capacities of payload written")
	fs.StringVar(&f.sweep, "sweep", "", "sweep a parameter: util=FROM:TO:STEP, op=..., ru=... (sizes with suffixes)")
	return cmd
}

// simGeometry derives RU and mapping-unit sizes from the flags.
func simGeometry(capacity, slotBytes int64, ruFlag, unitFlag string) (ru, unit int64, err error) {
	if ruFlag == "auto" {
		ru = capacity / 512
	} else if ru, err = units.ParseSize(ruFlag); err != nil {
		return 0, 0, fmt.Errorf("--ru: %w", err)
	}
	if unitFlag == "auto" {
		unit = 4096
		for unit*2 <= slotBytes/16 && unit*2 <= ru/256 {
			unit *= 2
		}
	} else if unit, err = units.ParseSize(unitFlag); err != nil {
		return 0, 0, fmt.Errorf("--unit: %w", err)
	}
	if unit <= 0 || ru < unit {
		return 0, 0, fmt.Errorf("reclaim unit %d must be at least one mapping unit (%d)", ru, unit)
	}
	ru = ru / unit * unit
	return ru, unit, nil
}

func runSimulate(cmd *cobra.Command, f *simFlags) error {
	b, err := f.wl.build()
	if err != nil {
		return err
	}
	if f.wl.writeTrace != "" {
		return f.wl.writeTraceFile(b, cmd.OutOrStdout())
	}
	capB, err := units.ParseSize(f.capacity)
	if err != nil {
		return fmt.Errorf("--capacity: %w", err)
	}
	iso, err := ftl.ParseIsolation(f.isolation)
	if err != nil {
		return err
	}
	gc, err := ftl.ParseGCPolicy(f.gc)
	if err != nil {
		return err
	}
	pre, err := ftl.ParsePrecondition(f.precondition)
	if err != nil {
		return err
	}
	var sw *simSweep
	if f.sweep != "" {
		if sw, err = simParseSweep(f.sweep); err != nil {
			return err
		}
	}
	policies := wlSplitList(f.placement)
	if len(policies) == 0 {
		return fmt.Errorf("--placement: give at least one policy, e.g. none,cache-salt")
	}
	for _, pol := range policies {
		var err error
		if workloads.IsOracle(pol) {
			err = workloads.CheckOracle(pol, f.handles)
		} else {
			_, err = placement.Parse(pol, f.handles)
		}
		if err != nil {
			return fmt.Errorf("--placement %s: %w", pol, err)
		}
	}
	slotBytes := int64(engine.DefaultHeaderBytes + b.chunkBytes) // SimBackend rounds it to the mapping unit
	rep := reports.New("simulate")
	rep.Workload = reports.Workload{Name: b.name, Seed: f.wl.seed, Tenants: b.salts, ChunkBytes: b.chunkBytes,
		TargetUtil: f.wl.util, Eviction: f.wl.eviction, Workers: 1, Description: b.desc}
	rep.Window = reports.Window{Description: fmt.Sprintf("WAF after %g× capacity warm-up over %g× capacity; steady = last half", f.warmup, f.measure)}
	values := []float64{math.NaN()}
	if sw != nil {
		rep.Sweep = sw.name
		values = sw.values
	}
	if err := f.out.checkOutputs(); err != nil {
		return err
	}
	// Every point of the sweep is checked before the first one runs: GC can always make
	// room, and the largest run fits in memory.
	type simPoint struct {
		v                 float64
		util              float64
		ru, unit, logical int64
		fc                ftl.Config
	}
	var points []simPoint
	var peak, peakModel, peakCache int64
	var peakFC ftl.Config
	for _, v := range values {
		pt := simPoint{v: v, util: f.wl.util}
		op, ruFlag := f.op, f.ru
		if sw != nil {
			switch sw.name {
			case "util":
				pt.util = v
			case "op":
				op = v
			case "ru":
				ruFlag = strconv.FormatInt(int64(v), 10)
			}
		}
		var err error
		if pt.ru, pt.unit, err = simGeometry(capB, slotBytes, ruFlag, f.unit); err != nil {
			return err
		}
		pt.logical = capB / pt.unit * pt.unit
		pt.fc = ftl.Config{MappingUnit: pt.unit, LogicalBytes: pt.logical, OP: op, RUBytes: pt.ru, Handles: f.handles,
			Isolation: iso, GC: gc, FreeReserve: f.reserve}
		if err := checkFeasible(pt.fc, "this model", flagKnobs); err != nil {
			if sw != nil {
				return fmt.Errorf("--sweep %s=%s: %w", sw.name, strconv.FormatFloat(v, 'g', -1, 64), err)
			}
			return err
		}
		for _, pol := range policies {
			model, cache, err := workloads.SimMemoryBytes(workloads.SimRun{FTL: pt.fc, SlotBytes: slotBytes, Policy: pol,
				WarmupCaps: f.warmup, MeasureCaps: f.measure})
			if err != nil {
				return fmt.Errorf("simulate: %w", err)
			}
			if model+cache > peak {
				peak, peakModel, peakCache, peakFC = model+cache, model, cache, pt.fc
			}
		}
		points = append(points, pt)
	}
	if avail, err := memAvailable(); err == nil && peak > avail {
		return simMemoryError(peakFC, slotBytes, peakModel, peakCache, avail)
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	var failed, notRun []string
	cut, done := "", 0
	nRuns := len(points) * len(policies)
	rest := func(pi, qi int) []string {
		vals := make([]float64, 0, len(points)-pi)
		for _, p := range points[pi:] {
			vals = append(vals, p.v)
		}
		return simRemaining(vals, policies, qi, sw)
	}
runs:
	for pi, pt := range points {
		fc := pt.fc
		rep.Device = reports.Device{Kind: "model", SizeBytes: pt.logical, FDP: false, Handles: f.handles, RUBytes: pt.ru, OP: fc.OP,
			MappingUnit: pt.unit, Isolation: iso.String(), GC: gc.String(), Precondition: pre.String(), Deallocate: f.deallocate}
		for qi, pol := range policies {
			name := pol
			if sw != nil {
				name += " @ " + sw.name + "=" + strconv.FormatFloat(pt.v, 'g', 4, 64)
			}
			if ctx.Err() != nil {
				notRun = rest(pi, qi)
				break runs
			}
			g, err := b.newGen()
			if err != nil {
				return err
			}
			dc, err := f.wl.driverConfig(b, pt.ru, (slotBytes+pt.unit-1)/pt.unit*pt.unit)
			if err != nil {
				return err
			}
			dc.TargetUtil = pt.util
			dc.Workers = 1 // the model is deterministic only single-threaded
			// An RU sweep changes the region size per value: the workload cannot state one.
			if sw == nil || sw.name != "ru" {
				rep.Workload.RegionSlots = dc.RegionSlots
			}
			res, err := workloads.RunSim(ctx, workloads.SimRun{Gen: g, Driver: dc, FTL: fc, Precondition: pre, Policy: pol, Regen: b.newGen,
				Model: f.wl.model, SlotBytes: slotBytes, Deallocate: f.deallocate, CheckpointOps: f.checkpointOps,
				WarmupCaps: f.warmup, MeasureCaps: f.measure})
			if err != nil && ctx.Err() != nil {
				// Stopped before anything of this run was measured (an oracle's recording pass).
				notRun = rest(pi, qi)
				break runs
			}
			var run reports.Run
			if err != nil {
				run = reports.Run{Policy: pol, Error: err.Error()}
			} else {
				run = simRun(res, pt.logical)
				rep.Workload.SlotBytes, rep.Workload.Slots = res.SlotBytes, res.Slots
				rep.Window.WarmupBytes = reports.I64(res.WarmupBytes)
				if rep.Window.MeasuredBytes == 0 && !run.Failed() {
					rep.Window.MeasuredBytes = res.Run.Counters.BytesWritten
				}
			}
			if sw != nil {
				run.Param = pt.v
			}
			rep.Runs = append(rep.Runs, run)
			if run.Failed() {
				failed = append(failed, name)
			}
			if run.Interrupted {
				cut = fmt.Sprintf("%s stopped at %.2f of its %g capacities of payload", name,
					float64(res.Run.Total.BytesWritten)/float64(pt.logical), f.warmup+f.measure)
				notRun = rest(pi, qi+1)
				break runs
			}
			done++
		}
	}
	rep.Notes = append(rep.Notes, "WAF is modelled (FTL model fed with the simulated engine's writes and deallocates), not measured on a drive")
	if ctx.Err() != nil {
		rep.Interrupted = true
		rep.Partial = simPartial(done, nRuns, cut, notRun)
	}
	if err := f.out.emit(cmd, rep); err != nil {
		return err
	}
	switch {
	case rep.Interrupted:
		return fmt.Errorf("%w: partial result (%s)", errInterrupted, rep.Partial)
	case len(failed) > 0:
		return fmt.Errorf("simulate: %d of %d runs failed (%s); their errors are under the table", len(failed), nRuns, strings.Join(failed, ", "))
	}
	return nil
}

// simRemaining lists the runs not started: the policies from index q at sweep value
// values[0], then every policy at the later values.
func simRemaining(values []float64, policies []string, q int, sw *simSweep) []string {
	var out []string
	for i, v := range values {
		for _, pol := range policies[min(q, len(policies)):] {
			if sw != nil {
				pol += " @ " + sw.name + "=" + strconv.FormatFloat(v, 'g', 4, 64)
			}
			out = append(out, pol)
		}
		if i == 0 {
			q = 0
		}
	}
	return out
}

// simPartial says what an interrupted simulate covers.
func simPartial(done, total int, cut string, notRun []string) string {
	parts := []string{fmt.Sprintf("%d of %d runs complete", done, total)}
	if cut != "" {
		parts = append(parts, cut)
	}
	if len(notRun) > 0 {
		parts = append(parts, "not run: "+strings.Join(notRun, ", "))
	}
	return strings.Join(parts, "; ")
}

// simMemoryError refuses a simulation that cannot fit in memory, with the estimate and the
// knob that shrinks the larger part.
func simMemoryError(fc ftl.Config, slotBytes, model, cache, avail int64) error {
	fits := int64(float64(fc.LogicalBytes) * float64(avail) / float64(model+cache))
	fix := fmt.Sprintf("a smaller --capacity (about %s fits)", emuFormatDown(fits))
	if model > cache {
		fix = fmt.Sprintf("a bigger --unit (%s or more; slots round up to it) or a smaller --capacity", emu.FormatSize(2*fc.MappingUnit))
	}
	return fmt.Errorf("simulate of %s needs about %s of memory (FTL model %s at %s mapping units, simulated cache %s for %d slots); "+
		"this machine has %s available: use %s",
		rbBytes(fc.LogicalBytes), rbBytes(model+cache), rbBytes(model), rbBytesExact(fc.MappingUnit), rbBytes(cache),
		fc.LogicalBytes/max(slotBytes, fc.MappingUnit), rbBytes(avail), fix)
}

// emuFormatDown renders n rounded down to a whole number of its largest binary unit, as a
// size flag takes it.
func emuFormatDown(n int64) string {
	for _, m := range []int64{1 << 40, 1 << 30, 1 << 20} {
		if n >= m {
			return emu.FormatSize(n / m * m)
		}
	}
	return emu.FormatSize(max(n, 1))
}

// simRun converts a simulate result into a report run.
func simRun(res *workloads.SimResult, logical int64) reports.Run {
	run := reports.FromResult(res.Policy, res.Run, false)
	run.Infeasible = res.Infeasible
	if res.Infeasible {
		// The up-front feasibility check makes this unreachable for one reclaim group; when it
		// happens the figures stop at a model that gave up, so there is no WAF to report.
		run.Error = "the FTL model could not make room: " + ftl.ErrInfeasible.Error()
	} else {
		run.HostWAF = &reports.WAF{Value: res.WAF, Steady: res.SteadyWAF, Source: reports.SourceModelled,
			HostBytes: res.Measured.HostBytes, MediaBytes: res.Measured.MediaBytes, Handles: reports.HandlesOf(res.Measured, res.Labels)}
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
	for i := 1; i < len(tl); i++ {
		run.Timeline = append(run.Timeline, reports.Point{PayloadBytes: tl[i].PayloadBytes, WAF: reports.F64(tl[i].Stats.Sub(tl[i-1].Stats).WAF()),
			CumWAF: reports.F64(tl[i].Stats.WAF())})
	}
	return run
}

func wlSplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
