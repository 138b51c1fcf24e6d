package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
	"github.com/rbctl/rbctl/engine"
)

func init() { register(newRecoverCmd) }

type recoverFlags struct {
	dev    flagsets.Device
	opts   cache.RepairOptions
	verify bool
	json   bool
	place  flagsets.Placement
}

func newRecoverCmd() *cobra.Command {
	f := &recoverFlags{}
	cmd := &cobra.Command{
		Use:   "recover DEV [DEV...]",
		Short: "Rebuild a cache's index from its newest valid checkpoint, verifying every slot",
		Long: `recover chooses the checkpoint to continue from (the newest valid metadata container,
with sequence numbers checked against their checksums, each other and the slot headers),
says which one and why, and what a fallback from a newer, damaged one lost. It reads every
entry's slot header in parallel, drops entries whose header is stale (wrong magic, identity,
length or checksum), rebuilds the free slots, and writes a repaired checkpoint when anything
was dropped or a container is damaged. --verify also checks every payload's CRC-32C; Ctrl-C
stops it and nothing is written. --dry-run changes nothing. Unless --force, it refuses to
write when the choice between the containers is in doubt, or when the repaired index would
hold no key although the device's checkpoints did. When no checkpoint is usable (both
containers damaged), --scan (and --force) rebuilds the index from the key records in the
slot headers, each header and payload verified, the latest put of a key kept, and writes a
fresh checkpoint pair; the layout comes from the damaged checkpoints or --slot-bytes.
Several DEVs (the shards of one cache) are recovered in parallel, each as one (--force,
--scan and --dry-run apply to each), then a row each and a total; the exit status is 1 if
any failed.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runRecover(cmd, args, f) },
	}
	cmd.Flags().BoolVar(&f.verify, "verify", false, "also verify every payload checksum (reads all data)")
	cmd.Flags().BoolVar(&f.opts.DryRun, "dry-run", false, "report what would be dropped; write nothing")
	cmd.Flags().BoolVar(&f.opts.Force, "force", false, flagsets.ForceHelp("write the repaired checkpoint although the checkpoint choice is in doubt or the repaired index drops every key, or the device holds something besides a cache"))
	cmd.Flags().BoolVar(&f.json, "json", false, "print JSON")
	f.dev.Add(cmd)
	f.dev.Choices.AddNamespace(cmd)
	f.place.Add(cmd, "the repaired checkpoint")
	f.dev.Choices.Scan.AddScan(cmd, &f.opts.Force)
	return cmd
}

func runRecover(cmd *cobra.Command, paths []string, f *recoverFlags) error {
	if err := f.place.Check(); err != nil {
		return err
	}
	ctx := cmd.Context() // cobra sets it
	o := cache.RecoverOptions{Paths: paths, Repair: f.opts, VerifyPayload: f.verify,
		Open: func(path string, readOnly bool, tweak func(*engine.Config)) (*engine.Engine, error) {
			return f.dev.OpenEngine(&f.place, path, readOnly, tweak)
		}}
	var finish func()
	o.Progress, finish = flagsets.SlotProgress(f.json, "verifying slots")
	// recover reports the checkpoint choice itself and decides whether to write.
	f.dev.Choices.Ctx, f.dev.Choices.Accept = ctx, true
	rep, err := cache.RecoverAll(ctx, o)
	finish()
	f.dev.Choices.Scan.WarnUnused(rep)
	if v := rep.Output(f.json); v != nil {
		if perr := show(cmd, f.json, v, rep.WriteText); perr != nil {
			return perr
		}
	}
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("recover %w: %v", errInterrupted, err)
	}
	return err
}
