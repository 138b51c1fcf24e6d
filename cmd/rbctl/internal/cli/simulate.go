package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagcheck"
	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
	"github.com/rbctl/rbctl/lmcache"
	"github.com/rbctl/rbctl/placement"
	"github.com/rbctl/rbctl/sim"
)

func init() { register(newSimulateCmd) }

type simFlags struct {
	wl           flagsets.Workload
	out          flagsets.ReportOut
	o            sim.Options
	pol, lmcache string
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
	flagcheck.Alias(fs, "capacity", "device-size")
	f.wl.Register(fs, "llama3-8b")
	f.out.Register(cmd)
	o := &f.o
	flagcheck.SizeVar(fs, &o.DeviceSize, "device-size", "1T", "logical size of the modelled device")
	fs.Float64Var(&o.OP, "op", 0.07, "over-provisioning: spare factor physical/logical − 1")
	flagcheck.SizeVar(fs, &o.RUBytes, "ru", "auto", "reclaim unit size (auto: device size/512, rounded to the mapping unit)", "auto")
	flagcheck.SizeVar(fs, &o.MappingUnit, "unit", "auto", "FTL mapping unit (auto: a power of two ≤ slot/16 and ≤ RU/256, ≥ 4K); slots are rounded up to it", "auto")
	fs.IntVar(&o.Handles, "handles", 8, "placement handles (reclaim unit handles)")
	fs.Var(flagsets.Text(&o.Isolation, "initial"), "isolation", "handle isolation: initial or persistent")
	fs.Var(flagsets.Text(&o.GC, "greedy"), "gc", "GC victim policy: greedy or cost-benefit")
	fs.IntVar(&o.Reserve, "reserve", 0, "free RUs kept for GC (0: the minimum, 1)")
	fs.Var(flagsets.Text(&o.Precondition, "trim"), "precondition", "state before the run: trim (all deallocated) or fill (sequentially written)")
	fs.StringVar(&f.pol, "placement", "none,cache-salt,metadata-class+cache-salt,hotness", "comma-separated placement policies to compare ("+strings.Join(placement.Known(), ", ")+", compositions with +), or future-knowledge references oracle:"+strings.Join(sim.OracleModes, ", oracle:")+" (two passes; docs/bench.md)")
	flagsets.DeallocateBool(fs, &o.Deallocate, true, "deallocate a slot when its key is evicted or deleted (all), or not (none)")
	fs.Int64Var(&o.CheckpointOps, "checkpoint-ops", 2000, "write a checkpoint every this many stores+deletes (0: never)")
	fs.Float64Var(&o.WarmupCaps, "warmup", 1, "warm-up, in device capacities of payload written")
	fs.Float64Var(&o.MeasureCaps, "measure", 4, "measured window, in device capacities of payload written")
	fs.StringVar(&f.lmcache, "lmcache-config", "", "run the FDP placement of an LMCache raw-block JSON config (policy, placement and metadata ids; docs/simulate.md), alone or before --placement's if given")
	flagsets.SimCauses(fs, o)
	flagsets.DriveFlag(fs, &o.Drive)
	flagsets.SweepFlag(fs, &o.Sweep, func(name string) (flagRule, bool) { // a point takes its flag's range
		if fl := fs.Lookup(name); fl != nil {
			return ruleFor(cmd, fl)
		}
		return flagRule{}, false
	})
	return cmd
}

// memAvailable is the memory simulate may use; a variable so tests can pose as a small machine.
var memAvailable = sim.MemAvailable

func runSimulate(cmd *cobra.Command, f *simFlags) error {
	o := f.o
	o.Workload = f.wl.Spec
	if done, err := f.wl.Traced(cmd.OutOrStdout()); done {
		return err
	}
	var err error
	if o.Policies, err = flagsets.Policies(f.pol); err != nil {
		return err
	}
	if f.lmcache != "" {
		if o.LMCache, err = lmcache.LoadFile(f.lmcache); err != nil {
			return fmt.Errorf("--lmcache-config: %w", err)
		}
		if !cmd.Flags().Changed("placement") {
			o.Policies = nil
		}
	}
	if err := f.out.Check(append(f.wl.Inputs(), f.lmcache)...); err != nil {
		return err
	}
	o.MemAvailable = memAvailable
	o.Fit = f.wl.Fit(cmd.Flags(), "device-size") // a recording's replay: its node's cache where no flag sets one
	finish := flagsets.SimProgress(&o)
	rep, err := sim.Run(cmd.Context(), o)
	finish()
	if err != nil {
		return err
	}
	return report(cmd, &f.out, rep, "runs")
}
