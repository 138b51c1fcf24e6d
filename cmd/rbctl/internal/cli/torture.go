package cli

import (
	"fmt"
	"os"
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
	"github.com/rbctl/rbctl/cmd/rbctl/internal/torture"
)

func init() { register(newTortureCmd) }

func newTortureCmd() *cobra.Command {
	var (
		opts    torture.Options
		asJSON  bool
		verbose bool
	)
	cmd := &cobra.Command{
		Use:   "torture",
		Short: "Crash-torture the engine: SIGKILL a writer process repeatedly and verify recovery",
		Long: `torture formats a small file-backed cache in a scratch directory, then repeatedly runs a
writer process ("rbctl torture writer") that puts, deletes, loads, locks and checkpoints
while logging every acknowledged operation to an fsync'ed side log, SIGKILLs it at a random
point, recovers the image and verifies: every key served loads byte-exact, no slot is owned
twice, free + used slots add up (a fill test finds every free slot), and every key
acknowledged before the last completed checkpoint survives. Some cycles tear a checkpoint
write, corrupt the newest metadata container or flip single bits in a container (its seq
or anywhere; no silent rollback: never an older state than the newest valid checkpoint
without a report), some close cleanly. It never touches a real device. Exit status 1 when
any invariant failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("torture: cannot find this binary to re-run as the writer: %w", err)
			}
			opts.Command = func() *exec.Cmd { return exec.Command(exe, "torture", "writer") }
			if verbose {
				opts.Progress = cmd.ErrOrStderr()
			}
			opts.Stop = cmd.Context().Done()
			finish := flagsets.TortureProgress(&opts, verbose)
			sum, err := torture.Run(opts)
			finish()
			if err != nil {
				return fmt.Errorf("torture: harness failed: %w", err)
			}
			err = show(cmd, asJSON, sum, sum.WriteText)
			switch v := sum.Violations(); {
			case err != nil:
				return err
			case v > 0:
				return &ExitError{Code: exitError, Err: fmt.Errorf("torture: %d invariant violations (seed %d); first: %v", v, sum.Seed, sum.Problems)}
			case sum.Interrupted:
				return fmt.Errorf("torture: %w after %d of %d kills: partial result above", errInterrupted, sum.Kills, opts.Kills)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&opts.Kills, "kills", 200, "number of SIGKILLs (cycles that close cleanly come on top)")
	f.Uint64Var(&opts.Seed, "seed", 1, "random seed (a run is reproducible up to scheduling)")
	f.StringVar(&opts.Dir, "dir", "", "keep the device file and side logs in a new rbctl-torture-* directory under this one (default: a temporary one, removed afterwards)")
	f.IntVar(&opts.Workers, "workers", 3, "writer goroutines")
	f.Int64Var(&opts.Slots, "slots", 0, "cache slots of 64 KiB (default 96)")
	f.DurationVar(&opts.MinRun, "min-run", 0, "shortest time a writer runs before the kill (default 20ms)")
	f.DurationVar(&opts.MaxRun, "max-run", 0, "longest time a writer runs before the kill (default 250ms)")
	f.IntVar(&opts.TornEvery, "torn-every", 3, "every Nth cycle tears a checkpoint write and dies there (0: never)")
	f.IntVar(&opts.CorruptEvery, "corrupt-every", 4, "every Nth cycle also recovers with the newest container corrupted (0: never)")
	f.IntVar(&opts.CleanEvery, "clean-every", 10, "every Nth cycle closes cleanly instead of being killed (0: never; at least 2: with 1 no cycle is a kill and --kills is never reached)")
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
