package cachereport

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/reports"
)

// ErrRefused marks a repair Recover did not write because it would do harm that only an
// explicit override accepts (RecoverOptions.Force).
var ErrRefused = errors.New("nothing written")

// RecoverOptions choose whether Recover writes the repaired checkpoint.
type RecoverOptions struct {
	DryRun bool // report only
	Force  bool // write even when the choice is in doubt or the repaired index loses every key
}

// Recovery is what recover found and did.
type Recovery struct {
	Device     string                `json:"device"`
	DryRun     bool                  `json:"dry_run"`
	Container  int                   `json:"checkpoint_container"`
	Seq        uint64                `json:"checkpoint_seq"`
	Format     string                `json:"checkpoint_format"`
	Choice     Choice                `json:"checkpoint_choice"`
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
	Scan       *Scan                 `json:"scan,omitempty"` // no checkpoint usable: rebuilt from the slot headers

	sel engine.Selection
}

// Recover reports the recovery e (opened on path, with VerifyOnLoad) made and, unless
// opts.DryRun, writes the repaired checkpoint when anything needs repair. It closes e
// without a further checkpoint. A refused write returns the report and an error wrapping
// ErrRefused; ctx cancelled before the write returns one wrapping ctx.Err().
func Recover(ctx context.Context, e *engine.Engine, path string, opts RecoverOptions) (*Recovery, error) {
	st := e.Stats().Recovery
	u := e.Usage()
	r := &Recovery{Device: path, DryRun: opts.DryRun, Container: st.Container, Seq: st.Seq, Format: string(st.Format),
		Choice: ChoiceOf(st.Selection), Loaded: st.Loaded, Kept: st.Kept, Dropped: st.Dropped, FreeSlots: u.SlotsFree,
		NeverUsed: u.SlotsTotal - u.NextSlot, TotalFree: u.SlotsFree + u.SlotsTotal - u.NextSlot, NextSlot: u.NextSlot,
		DurationMs: float64(st.Duration.Microseconds()) / 1000, Repairs: Repairs(st), Scan: scanOf(st.Scan), sel: st.Selection}
	if r.Dropped == nil {
		r.Dropped = []engine.DroppedEntry{}
	}
	var refused error
	if !opts.DryRun && len(r.Repairs) > 0 {
		if why := Refusal(st); why != "" && !opts.Force {
			r.Refused = why
			refused = fmt.Errorf("%s: %w: %s", path, ErrRefused, why)
		} else if ctx.Err() != nil {
			e.CloseNoCheckpoint()
			return nil, fmt.Errorf("stopped before writing the repaired checkpoint; nothing was written: %w", ctx.Err())
		} else if err := e.RepairCheckpoints(); err != nil {
			e.CloseNoCheckpoint()
			return nil, fmt.Errorf("%s: writing the repaired checkpoint: %w", path, err)
		} else {
			r.Written, r.NewSeq = true, e.Stats().CheckpointSeq
		}
	}
	if err := e.CloseNoCheckpoint(); err != nil {
		return nil, err
	}
	return r, refused
}

// Repairs lists what writing a checkpoint would repair after the recovery st.
func Repairs(st engine.RecoveryReport) []string {
	sel := st.Selection
	out := []string{}
	if n := len(st.Dropped); n > 0 && st.Scan == nil {
		out = append(out, fmt.Sprintf("drop %d stale entries from the index", n))
	}
	if st.Scan != nil {
		return append(out, fmt.Sprintf("write a fresh checkpoint pair (both containers) holding the %d entries rebuilt from the slot headers", st.Kept))
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

// Refusal says why writing after the recovery st would do harm an override must accept
// ("" when none): the choice is in doubt, or the repaired index would lose every key.
func Refusal(st engine.RecoveryReport) string {
	sel := st.Selection
	if st.Scan != nil && st.Kept == 0 {
		return fmt.Sprintf("the scan of %d slots rebuilt no key (%d without a key record, %d failed verification); writing would replace both damaged containers with an empty index", st.Scan.Slots, st.Scan.NoKey, st.Scan.Failed)
	}
	if st.Scan != nil {
		return ""
	}
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
			why = fmt.Sprintf(" (first: %s in slot %d: %s)", reports.Escape(st.Dropped[0].Key), st.Dropped[0].Slot, st.Dropped[0].Reason)
		}
		return fmt.Sprintf("the repaired index would hold no key: all %d entries of container %d (seq %d) fail verification%s", st.Loaded, sel.Container, sel.Seq, why)
	case sel.Fallback && !sel.LostKnown:
		return fmt.Sprintf("the chosen checkpoint (container %d) holds no key, and container %d, which may be newer, cannot be read: what it held is unknown", sel.Container, other.Container)
	case other.Entries > 0 && (sel.Fallback || other.Problem != ""):
		return fmt.Sprintf("the chosen checkpoint (container %d) holds no key; writing replaces container %d and its %d entries", sel.Container, other.Container, other.Entries)
	}
	return ""
}

// WriteText renders the recovery for people; the last line says what was written.
func (r *Recovery) WriteText(w io.Writer) error {
	if s := r.Scan; s != nil {
		fmt.Fprintf(w, "%s: no checkpoint usable: index rebuilt from the slot headers (layout from %s): %d slots read, %d entries rebuilt, %d older versions superseded, %d failed verification, %d headers without a key record, %d empty; %d free slots (%.1f ms)\n",
			r.Device, reports.Escape(s.LayoutSource), s.Slots, s.Rebuilt, s.Superseded, s.Failed, s.NoKeyRecord, s.Empty, r.TotalFree, r.DurationMs)
	} else {
		fmt.Fprintf(w, "%s: checkpoint container %d seq %d (%s): %d entries, kept %d, dropped %d, %d free slots (%d on the free lists + %d never used) (%.1f ms)\n",
			r.Device, r.Container, r.Seq, r.Format, r.Loaded, r.Kept, len(r.Dropped), r.TotalFree, r.FreeSlots, r.NeverUsed, r.DurationMs)
	}
	lines := ChoiceLines(r.sel)
	for _, d := range r.Dropped {
		lines = append(lines, fmt.Sprintf("dropped %s (slot %d): %s", reports.Escape(d.Key), d.Slot, d.Reason))
	}
	for _, rp := range r.Repairs {
		lines = append(lines, "repair: "+rp)
	}
	switch {
	case r.Refused != "":
	case r.DryRun:
		lines = append(lines, "dry run: nothing written")
	case r.Written:
		lines = append(lines, fmt.Sprintf("repaired checkpoint written (seq %d)", r.NewSeq))
	default:
		lines = append(lines, "nothing to repair")
	}
	return writeLines(w, lines)
}

// Scan is a rebuild from the slot headers (engine.ScanReport) as JSON.
type Scan struct {
	LayoutSource string `json:"layout_source"`
	Slots        int64  `json:"slots_read"`
	Rebuilt      int    `json:"rebuilt"`
	Superseded   int    `json:"superseded"`
	Failed       int    `json:"failed"`
	NoKeyRecord  int64  `json:"no_key_record"`
	Empty        int64  `json:"empty_slots"`
}

func scanOf(s *engine.ScanReport) *Scan {
	if s == nil {
		return nil
	}
	return &Scan{LayoutSource: s.LayoutSource, Slots: s.Slots, Rebuilt: s.Rebuilt, Superseded: s.Superseded, Failed: s.Failed,
		NoKeyRecord: s.NoKey, Empty: s.Empty}
}
