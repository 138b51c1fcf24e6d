package cli

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/bench"
	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagcheck"
	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
	"github.com/rbctl/rbctl/cmd/rbctl/internal/hints"
	"github.com/rbctl/rbctl/lmcache"
	"github.com/rbctl/rbctl/placement"
)

func init() { register(newBenchCmd) }

type benchFlags struct {
	wl                 flagsets.Workload
	out                flagsets.ReportOut
	o                  bench.Options
	placement, lmcache string
	quiet              bool
}

func newBenchCmd() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench DEV [DEV...]",
		Short: "Run a KV-cache workload through the engine once per placement policy and compare them",
		Long: `bench formats DEV and runs the workload through the engine once per policy in --placement,
then prints one comparison: ops/s, GiB/s read and written, latency percentiles per operation,
hit ratio, the host WAF of a shadow FTL model fed exactly the engine's writes and deallocates
("modelled"), the device WAF from the FDP statistics log when DEV has FDP (emulated or real),
and bytes deallocated. Figures cover the measured window: after --warmup device capacities
of payload were stored (or --warmup-timeout passed), for --duration.

DEV is a pre-sized file (--create SIZE makes one), a block device, an emulated FDP SSD
(emu:PATH?size=1G&ru=16M&ruhs=8, docs/emulator.md) or mem:SIZE (in memory). bench ERASES
the cache on DEV; block and character devices need --force.

Several DEVs hold one cache sharded over them (--shard-by), each checked on its own, with a
row per device and a total; a device error fails only that device's operations, the run
goes on and bench exits 1 after the report. --lmcache-config FILE takes the devices instead.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runBench(cmd, args, &f) },
	}
	fs := cmd.Flags()
	flagcheck.Alias(fs, "size", "create")
	f.wl.Register(fs, "tiny")
	f.out.Register(cmd)
	o := &f.o
	fs.StringVar(&f.placement, "placement", "none,cache-salt", "comma-separated placement policies to compare ("+strings.Join(placement.Known(), ", ")+", compositions with +)")
	fs.DurationVar(&o.Duration, "duration", 20*time.Second, "measured window per policy (after warm-up); a mooncake: trace runs whole unless given (0: no limit)")
	fs.Float64Var(&o.Warmup, "warmup", 1, "warm-up, in cache capacities of payload stored (0: none)")
	fs.DurationVar(&o.WarmupTimeout, "warmup-timeout", time.Minute, "end the warm-up after this long even if --warmup was not reached")
	fs.Var(flagsets.Parsed(&o.Precondition, "trim", bench.ParsePrecondition), "precondition", "before each run: trim (deallocate the device) or fill (write it sequentially)")
	flagsets.DeallocateBool(fs, &o.Deallocate, true, "deallocate freed slots on delete/evict (all), or not (none)")
	fs.IntVar(&o.Handles, "handles", 8, "placement handles for the policy and shadow model when DEV has no FDP")
	flagcheck.SizeVar(fs, &o.RUBytes, "ru", "16M", "shadow model reclaim unit size when DEV does not report one")
	fs.Float64Var(&o.OP, "op", 0.07, "shadow model over-provisioning when DEV does not report it")
	fs.Var(flagsets.Optional(&o.Isolation, "initial"), "isolation", "shadow model handle isolation: initial or persistent (an emulated DEV keeps its own unless given)")
	fs.Var(flagsets.Text(&o.GC, "greedy"), "gc", "shadow model GC policy: greedy or cost-benefit")
	flagcheck.SizeVar(fs, &o.Create, "create", "", "create DEV as a sparse file of this size if it does not exist")
	fs.BoolVar(&o.SlotGroups, "slot-groups", false, "group slots per handle into reclaim-unit-sized groups")
	flagcheck.SizeVar(fs, &o.MetaBytes, "meta-bytes", "auto", "metadata region (meta_total_bytes); auto sizes it for a full index", "auto")
	fs.DurationVar(&o.CheckpointInterval, "checkpoint-interval", time.Second, "engine checkpoint interval")
	fs.IntVar(&o.QueueDepth, "queue-depth", 32, "device queue depth")
	fs.StringVar(&o.IOPath, "io-engine", "uring", "I/O engine for files and block devices: posix, uring, aio, passthru (/dev/ng* always uses passthru) or auto (uring, posix where the kernel has no io_uring)")
	fs.BoolVar(&o.Force, "force", false, flagsets.ForceHelp("format a block or character device, or a file that holds data (never one in use)"))
	fs.BoolVar(&f.quiet, "quiet", false, "no progress bar")
	flagsets.DriveFlag(fs, &o.Drive)
	flagsets.ExplainFlag(fs, &o.Causes, "replays of the shadow model's recorded writes with the device's isolation, RU size or spare changed")
	fs.StringVar(&f.lmcache, "lmcache-config", "", "take the devices, layout, I/O engine and FDP placement from an LMCache JSON config, run first as lmcache:POLICY (docs/bench.md)")
	fs.StringVar(&o.ShardBy, "shard-by", "hash", "with several DEVs, route a key by: hash (of the key) or kv-rank (device kv_rank mod N)")
	return cmd
}

func runBench(cmd *cobra.Command, paths []string, f *benchFlags) error {
	o := f.o
	o.Paths, o.Workload = paths, f.wl.Spec
	o.Fit = f.wl.Fit(cmd.Flags()) // a recording's replay: its node's cache where no flag sets one
	if f.wl.IsTrace() && !cmd.Flags().Changed("duration") {
		o.Duration = 0 // a request trace is measured whole
	}
	if done, err := f.wl.Traced(cmd.OutOrStdout(), paths...); done {
		return err
	}
	var err error
	if o.Policies, err = flagsets.Policies(f.placement); err != nil {
		return err
	}
	if f.lmcache != "" {
		if o.LMCache, err = lmcache.LoadFile(f.lmcache); err != nil {
			return err
		}
		if !cmd.Flags().Changed("placement") {
			o.Policies = nil // the config's placement alone
		}
	}
	if o.ShardBy == "" { // the API takes "" as hash; on the command line it is a mistake
		return fmt.Errorf("--shard-by is empty: give hash or kv-rank")
	}
	if err := f.out.Check(slices.Concat(paths, []string{f.lmcache}, f.wl.Inputs())...); err != nil {
		return err
	}
	o.Explain = func(err error) string { return hints.Add(cmd, err).Error() }
	o.Progress = flagsets.BenchProgress(f.quiet)
	for _, p := range paths {
		if w := cache.SpaceWarning(p); w != "" {
			fmt.Fprintf(cmd.ErrOrStderr(), "rbctl: warning: %s\n", w)
		}
	}
	rep, err := bench.Run(cmd.Context(), o)
	if err != nil {
		return err
	}
	if err := report(cmd, &f.out, rep, "policies"); err != nil {
		return err
	}
	return rep.DeviceError() // printed above, counted per device
}
