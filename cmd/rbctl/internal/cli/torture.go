package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/torture"
	"github.com/rbctl/rbctl/reports"
)

func init() { register(newTortureCmd) }

func newTortureCmd() *cobra.Command {
	var (
		opts    torture.Options
		asJSON  bool
		verbose bool
		slots   int64
	)
	cmd := &cobra.Command{
		Use:   "torture",
		Short: "Crash-torture the engine: SIGKILL a writer process repeatedly and verify recovery",
		Long: `torture formats a small file-backed cache in a scratch directory, then repeatedly starts a
writer process (this binary, "rbctl torture writer") that puts, deletes, loads, locks and
checkpoints under load while logging every acknowledged operation to an fsync'ed side log,
kills it with SIGKILL at a random point, recovers the image and verifies: every key served
loads byte-exact, no slot is owned twice, free + used slots add up (a fill test finds every
free slot), and every key acknowledged before the last completed checkpoint survives.
Some cycles tear a checkpoint write mid-way, some corrupt the newest metadata container
and flip single bits in a container's seq or anywhere in it (no silent rollback: never an
older state than the newest valid checkpoint without a report), some close cleanly.
It never touches a real device. Exit status 1 when any invariant failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("torture: cannot find this binary to re-run as the writer: %w", err)
			}
			opts.Command = func() *exec.Cmd { return exec.Command(exe, "torture", "writer") }
			if slots > 0 {
				opts.Geometry = torture.DefaultGeometry()
				opts.Geometry.Slots = slots
			}
			if verbose {
				opts.Progress = cmd.ErrOrStderr()
			}
			if ctx := cmd.Context(); ctx != nil {
				opts.Stop = ctx.Done()
			}
			sum, err := torture.Run(opts)
			if err != nil {
				return fmt.Errorf("torture: harness failed: %w", err)
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(sum); err != nil {
					return err
				}
			} else {
				printTortureSummary(cmd, sum)
			}
			if v := sum.Violations(); v > 0 {
				return &ExitError{Code: 1, Err: fmt.Errorf("torture: %d invariant violations (seed %d); first: %v", v, sum.Seed, sum.Problems)}
			}
			if sum.Interrupted {
				return fmt.Errorf("torture: %w after %d of %d kills: partial result above", errInterrupted, sum.Kills, opts.Kills)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&opts.Kills, "kills", 200, "number of SIGKILLs (cycles that close cleanly come on top)")
	f.Uint64Var(&opts.Seed, "seed", 1, "random seed (a run is reproducible up to scheduling)")
	f.StringVar(&opts.Dir, "dir", "", "scratch directory for the device file and side logs (default: a temporary directory, removed afterwards)")
	f.IntVar(&opts.Workers, "workers", 3, "writer goroutines")
	f.Int64Var(&slots, "slots", 0, "cache slots of 64 KiB (default 96)")
	f.DurationVar(&opts.MinRun, "min-run", 0, "shortest time a writer runs before the kill (default 20ms)")
	f.DurationVar(&opts.MaxRun, "max-run", 0, "longest time a writer runs before the kill (default 250ms)")
	f.IntVar(&opts.TornEvery, "torn-every", 3, "every Nth cycle tears a checkpoint write and dies there (0: never)")
	f.IntVar(&opts.CorruptEvery, "corrupt-every", 4, "every Nth cycle also recovers with the newest container corrupted (0: never)")
	f.IntVar(&opts.CleanEvery, "clean-every", 10, "every Nth cycle closes cleanly instead of being killed (0: never)")
	f.IntVar(&opts.FaultEvery, "fault-every", 4, "every Nth cycle the writer's data writes fail at random (0: never)")
	f.Float64Var(&opts.FaultProb, "fault-prob", 0.02, "probability of each injected write fault (EIO, ENOSPC, torn) in fault cycles")
	f.BoolVar(&asJSON, "json", false, "print the summary as JSON")
	f.BoolVarP(&verbose, "verbose", "v", false, "print one line per cycle on stderr")
	cmd.AddCommand(&cobra.Command{
		Use:    "writer",
		Short:  "Writer process of the torture harness (started by rbctl torture)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ok, err := torture.RunWriterFromEnv()
			if !ok {
				return fmt.Errorf("torture writer: $%s is not set; this sub-command is started by rbctl torture", torture.EnvWriter)
			}
			return err
		},
	})
	return cmd
}

func printTortureSummary(cmd *cobra.Command, s *torture.Summary) {
	t := reports.NewTable(cmd.OutOrStdout())
	t.Header("measure", "value")
	row := func(k string, v any) { t.Append(k, fmt.Sprint(v)) }
	row("seed", s.Seed)
	row("cycles", s.Cycles)
	for _, b := range s.Backends {
		row("  through "+b, s.CyclesByBackend[b])
	}
	if s.UringSkipped != "" {
		row("  io_uring not used", s.UringSkipped)
	}
	row("kills (SIGKILL)", s.Kills)
	row("  of which torn checkpoint + self-kill", s.TornKills)
	row("  torn container invalid, other used", s.TornDetected)
	row("  torn container still valid (tear in padding)", s.TornHarmless)
	row("  tear hit a write of Open itself", s.TornBeforeReady)
	row("clean closes", s.CleanCloses)
	row("cycles with injected write faults", s.FaultCycles)
	row("kills that tore a checkpoint (other container used)", s.KillTornContainers)
	row("corrupt-container recoveries: other used / both bad, refused", fmt.Sprintf("%d: %d / %d", s.CorruptRuns, s.CorruptUsedOther, s.CorruptBothRefused))
	row("bit flips: header seq / anywhere in a container", fmt.Sprintf("%d / %d", s.FlipSeqRuns, s.FlipContainerRuns))
	row("  same state / fallback reported / both bad, refused / rollback reported", fmt.Sprintf("%d / %d / %d / %d", s.FlipSameState, s.FlipFallbacks, s.FlipRefused, s.RollbacksReported))
	row("  damaged header seqs noticed", s.FlipSeqRepaired)
	row("acked puts / deletes / checkpoints", fmt.Sprintf("%d / %d / %d", s.Puts, s.Deletes, s.Checkpoints))
	row("failed puts (no slot or injected fault)", s.FailedPuts)
	row("keys verified byte-exact", s.KeysVerified)
	row("acked-before-checkpoint keys checked", s.MustSurvive)
	row("free slots filled (leak check)", s.FilledSlots)
	row("corrupt reads", s.CorruptReads)
	row("silent rollbacks", s.SilentRollbacks)
	row("lost keys", s.Lost)
	row("resurrected keys", s.Resurrected)
	row("stale versions", s.StaleVersions)
	row("unloadable indexed keys", s.Unloadable)
	row("slots owned twice", s.DupSlots)
	row("leaked slots", s.LeakedSlots)
	row("overbooked slots", s.Overbooked)
	row("accounting errors", s.Accounting)
	row("recovery errors", s.RecoveryErrors)
	row("writer wrong/failed loads", fmt.Sprintf("%d / %d", s.WriterWrong, s.WriterUnloadable))
	row("violations", s.Violations())
	row("elapsed", s.Elapsed.Round(1e6))
	t.Render()
	if s.Interrupted {
		fmt.Fprintln(cmd.OutOrStdout(), "interrupted: partial result (the cycles that completed before Ctrl-C)")
	}
	for _, p := range s.Problems {
		fmt.Fprintln(cmd.OutOrStdout(), "problem:", p)
	}
}
