package cli

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/rbctl/rbctl/devices/safety"
	"github.com/rbctl/rbctl/engine"
)

func init() { register(newRecoverCmd) }

type recoverFlags struct {
	dev            rbDevFlags
	verify, dryRun bool
	force          bool
	json           bool
	place          rbPlaceFlag
}

type recoverReport struct {
	Device     string                `json:"device"`
	DryRun     bool                  `json:"dry_run"`
	Container  int                   `json:"checkpoint_container"`
	Seq        uint64                `json:"checkpoint_seq"`
	Format     string                `json:"checkpoint_format"`
	Choice     rbChoiceJSON          `json:"checkpoint_choice"`
	Loaded     int                   `json:"loaded"`
	Kept       int                   `json:"kept"`
	Dropped    []engine.DroppedEntry `json:"dropped"`
	FreeSlots  int64                 `json:"free_slots"`       // on the free lists (used before, now free)
	NeverUsed  int64                 `json:"never_used_slots"` // [next_slot, slots): free too, never written
	TotalFree  int64                 `json:"total_free_slots"` // free_slots + never_used_slots
	NextSlot   int64                 `json:"next_slot"`
	DurationMs float64               `json:"duration_ms"`
	Repairs    []string              `json:"repairs"` // what a write fixes ([]: nothing to repair)
	Refused    string                `json:"refused,omitempty"`
	Written    bool                  `json:"checkpoint_written"`
	NewSeq     uint64                `json:"new_checkpoint_seq,omitempty"`
}

func newRecoverCmd() *cobra.Command {
	f := &recoverFlags{}
	cmd := &cobra.Command{
		Use:   "recover DEV",
		Short: "Rebuild a cache's index from its newest valid checkpoint, verifying every slot",
		Long: `recover chooses the checkpoint to continue from (the newest valid metadata container,
with sequence numbers checked against their checksums, each other and the slot headers),
says which one and why, and what a fallback from a newer, damaged one lost. It reads every
entry's slot header in parallel and drops entries whose header is stale (wrong magic,
identity, length or checksum), rebuilds the free slots, and writes a repaired checkpoint
when anything was dropped or a container is damaged. --verify also reads every payload
and checks its CRC-32C; Ctrl-C stops it and nothing is written. --dry-run changes nothing.

It refuses to write, unless --force, when the choice between the containers is in doubt,
or when the repaired index would hold no key although the device's checkpoints did.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runRecover(cmd, args[0], f) },
	}
	cmd.Flags().BoolVar(&f.verify, "verify", false, "also verify every payload checksum (reads all data)")
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "report what would be dropped; write nothing")
	cmd.Flags().BoolVar(&f.force, "force", false, "write even when the checkpoint choice is in doubt or the repaired index drops every key")
	cmd.Flags().BoolVar(&f.json, "json", false, "print JSON")
	f.dev.add(cmd)
	f.dev.cache.addNamespace(cmd)
	f.place.add(cmd, "the repaired checkpoint")
	return cmd
}

// recoverRepairs lists what writing a checkpoint would repair.
func recoverRepairs(st engine.RecoveryReport) []string {
	sel := st.Selection
	out := []string{}
	if n := len(st.Dropped); n > 0 {
		out = append(out, fmt.Sprintf("drop %d stale entries from the index", n))
	}
	for _, c := range sel.Candidates {
		note := c.SeqNote
		if note == "" {
			note = "its seal was damaged and repaired"
		}
		switch {
		case c.Container == sel.Container && c.Damaged():
			out = append(out, fmt.Sprintf("rewrite container %d, the one recovered from, whose header is damaged (%s)", c.Container, note))
		case c.Container == sel.Container:
		case c.Problem != "" && c.Problem != "empty":
			out = append(out, fmt.Sprintf("replace container %d (%s)", c.Container, c.Problem))
		case sel.Doubt:
			out = append(out, fmt.Sprintf("replace container %d (rejected, in doubt)", c.Container))
		case c.Damaged():
			out = append(out, fmt.Sprintf("replace container %d, whose header is damaged (%s)", c.Container, note))
		}
	}
	return out
}

// recoverRefusal says why writing would do harm that --force must accept ("" when none).
func recoverRefusal(st engine.RecoveryReport) string {
	sel := st.Selection
	if sel.Doubt {
		return fmt.Sprintf("the checkpoint choice is in doubt (%s); writing replaces container %d for good", sel.Reason, 1-sel.Container)
	}
	if st.Kept > 0 {
		return ""
	}
	other := sel.Candidates[1-sel.Container]
	switch {
	case st.Loaded > 0:
		why := ""
		if len(st.Dropped) > 0 {
			why = fmt.Sprintf(" (first: %s in slot %d: %s)", rbEscape(st.Dropped[0].Key), st.Dropped[0].Slot, st.Dropped[0].Reason)
		}
		return fmt.Sprintf("the repaired index would hold no key: all %d entries of container %d (seq %d) fail verification%s", st.Loaded, sel.Container, sel.Seq, why)
	case sel.Fallback && !sel.LostKnown:
		return fmt.Sprintf("the chosen checkpoint (container %d) holds no key, and container %d, which may be newer, cannot be read: what it held is unknown", sel.Container, other.Container)
	case other.Entries > 0 && (sel.Fallback || other.Problem != ""):
		return fmt.Sprintf("the chosen checkpoint (container %d) holds no key; writing replaces container %d and its %d entries", sel.Container, other.Container, other.Entries)
	}
	return ""
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
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	if !f.dryRun && !f.force {
		// Mounted, held, or holding something besides a cache: recover must not write there.
		if err := safety.Gate(safety.Recover, path); err != nil {
			return err
		}
	}
	// recover reports the checkpoint choice itself and decides below whether to write.
	f.dev.cache.ctx, f.dev.cache.accept = ctx, true
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
		if ctx.Err() != nil || errors.Is(err, context.Canceled) {
			return fmt.Errorf("recover %w: %v", errInterrupted, err)
		}
		return err
	}
	st := e.Stats().Recovery
	u := e.Usage()
	rep := recoverReport{Device: path, DryRun: f.dryRun, Container: st.Container, Seq: st.Seq, Format: string(st.Format),
		Choice: rbChoiceOf(st.Selection), Loaded: st.Loaded, Kept: st.Kept, Dropped: st.Dropped, FreeSlots: u.SlotsFree,
		NeverUsed: u.SlotsTotal - u.NextSlot, TotalFree: u.SlotsFree + u.SlotsTotal - u.NextSlot, NextSlot: u.NextSlot, DurationMs: float64(st.Duration.Microseconds()) / 1000, Repairs: recoverRepairs(st)}
	if rep.Dropped == nil {
		rep.Dropped = []engine.DroppedEntry{}
	}
	var refused error
	if !f.dryRun && len(rep.Repairs) > 0 {
		if why := recoverRefusal(st); why != "" && !f.force {
			rep.Refused = why
			refused = fmt.Errorf("%s: nothing written: %s; pass --force to write it anyway (--dry-run lists what would be dropped)", path, why)
		} else if ctx.Err() != nil {
			e.CloseNoCheckpoint()
			return fmt.Errorf("recover %w before writing; nothing was written", errInterrupted)
		} else if err := e.RepairCheckpoints(); err != nil {
			e.CloseNoCheckpoint()
			return fmt.Errorf("%s: writing the repaired checkpoint: %w", path, err)
		} else {
			rep.Written, rep.NewSeq = true, e.Stats().CheckpointSeq
		}
	}
	if err := e.CloseNoCheckpoint(); err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if f.json {
		if err := rbJSON(out, rep); err != nil {
			return err
		}
		return refused
	}
	fmt.Fprintf(out, "%s: checkpoint container %d seq %d (%s): %d entries, kept %d, dropped %d, %d free slots (%d on the free lists + %d never used) (%.1f ms)\n",
		path, rep.Container, rep.Seq, rep.Format, rep.Loaded, rep.Kept, len(rep.Dropped), rep.TotalFree, rep.FreeSlots, rep.NeverUsed, rep.DurationMs)
	for _, l := range rbChoiceLines(st.Selection) {
		fmt.Fprintln(out, l)
	}
	for _, d := range rep.Dropped {
		fmt.Fprintf(out, "dropped %s (slot %d): %s\n", rbEscape(d.Key), d.Slot, d.Reason)
	}
	for _, r := range rep.Repairs {
		fmt.Fprintf(out, "repair: %s\n", r)
	}
	switch {
	case refused != nil:
		return refused
	case f.dryRun:
		fmt.Fprintln(out, "dry run: nothing written")
	case rep.Written:
		fmt.Fprintf(out, "repaired checkpoint written (seq %d)\n", rep.NewSeq)
	default:
		fmt.Fprintln(out, "nothing to repair")
	}
	return nil
}
