package cli

import (
	"fmt"
	"os"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/rbctl/rbctl/engine"
)

func init() { register(newRecoverCmd) }

type recoverFlags struct {
	dev            rbDevFlags
	verify, dryRun bool
	json           bool
	place          rbPlaceFlag
}

type recoverReport struct {
	Device     string                `json:"device"`
	DryRun     bool                  `json:"dry_run"`
	Container  int                   `json:"checkpoint_container"`
	Seq        uint64                `json:"checkpoint_seq"`
	Format     string                `json:"checkpoint_format"`
	Loaded     int                   `json:"loaded"`
	Kept       int                   `json:"kept"`
	Dropped    []engine.DroppedEntry `json:"dropped"`
	FreeSlots  int64                 `json:"free_slots"`
	NextSlot   int64                 `json:"next_slot"`
	DurationMs float64               `json:"duration_ms"`
	Written    bool                  `json:"checkpoint_written"`
	NewSeq     uint64                `json:"new_checkpoint_seq,omitempty"`
}

func newRecoverCmd() *cobra.Command {
	f := &recoverFlags{}
	cmd := &cobra.Command{
		Use:   "recover DEV",
		Short: "Rebuild a cache's index from its newest valid checkpoint, verifying every slot",
		Long: `recover loads the newest valid metadata container, reads every entry's slot header in
parallel and drops entries whose header is stale (wrong magic, identity, length or
checksum), rebuilds the free slots, and writes a repaired checkpoint. --verify also reads
every payload and checks its CRC-32C. --dry-run changes nothing (read-only open).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runRecover(cmd, args[0], f) },
	}
	cmd.Flags().BoolVar(&f.verify, "verify", false, "also verify every payload checksum (reads all data)")
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "report what would be dropped; write nothing")
	cmd.Flags().BoolVar(&f.json, "json", false, "print JSON")
	f.dev.add(cmd)
	f.place.add(cmd, "the repaired checkpoint")
	return cmd
}

func runRecover(cmd *cobra.Command, path string, f *recoverFlags) error {
	var bar *progressbar.ProgressBar
	if term.IsTerminal(int(os.Stderr.Fd())) && !f.json {
		bar = progressbar.NewOptions(-1, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetDescription("verifying slots"),
			progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())
	}
	if err := f.place.check(); err != nil {
		return err
	}
	e, err := rbOpenEnginePlaced(&f.dev, &f.place, "", path, f.dryRun, func(c *engine.Config) {
		c.VerifyOnLoad = true
		c.VerifyPayloadOnRecover = f.verify
		if bar != nil {
			c.Progress = func(done, total int) {
				bar.ChangeMax(total)
				_ = bar.Set(done)
			}
		}
	})
	if bar != nil {
		_ = bar.Finish()
	}
	if err != nil {
		return err
	}
	st := e.Stats().Recovery
	u := e.Usage()
	rep := recoverReport{Device: path, DryRun: f.dryRun, Container: st.Container, Seq: st.Seq, Format: string(st.Format),
		Loaded: st.Loaded, Kept: st.Kept, Dropped: st.Dropped, FreeSlots: u.SlotsFree, NextSlot: u.NextSlot,
		DurationMs: float64(st.Duration.Microseconds()) / 1000}
	if rep.Dropped == nil {
		rep.Dropped = []engine.DroppedEntry{}
	}
	if !f.dryRun && len(st.Dropped) > 0 {
		if err := e.CheckpointNow(); err != nil {
			e.CloseNoCheckpoint()
			return fmt.Errorf("%s: writing the repaired checkpoint: %w", path, err)
		}
		rep.Written, rep.NewSeq = true, e.Stats().CheckpointSeq
	}
	if err := e.Close(); err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if f.json {
		return rbJSON(out, rep)
	}
	fmt.Fprintf(out, "%s: checkpoint container %d seq %d (%s): %d entries, kept %d, dropped %d, %d free slots (%.1f ms)\n",
		path, rep.Container, rep.Seq, rep.Format, rep.Loaded, rep.Kept, len(rep.Dropped), rep.FreeSlots, rep.DurationMs)
	for _, d := range rep.Dropped {
		fmt.Fprintf(out, "dropped %s (slot %d): %s\n", d.Key, d.Slot, d.Reason)
	}
	switch {
	case f.dryRun:
		fmt.Fprintln(out, "dry run: nothing written")
	case rep.Written:
		fmt.Fprintf(out, "repaired checkpoint written (seq %d)\n", rep.NewSeq)
	default:
		fmt.Fprintln(out, "nothing to repair")
	}
	return nil
}
