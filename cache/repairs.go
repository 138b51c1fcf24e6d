package cache

// What a write after recovery repairs, and when it must be refused without an override.

import (
	"fmt"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/reports"
)

// Repairs lists what writing a checkpoint would repair after the recovery st.
func Repairs(st engine.RecoveryReport) []string {
	sel := st.Selection
	out := []string{}
	if n := len(st.Dropped); n > 0 && st.Scan == nil {
		out = append(out, fmt.Sprintf("drop %d stale entries from the index", n))
	}
	if n := len(st.Rescued); n > 0 {
		out = append(out, fmt.Sprintf("keep %d keys only the rejected container %d listed, whose slots still hold them (first: %s)",
			n, 1-sel.Container, reports.Escape(st.Rescued[0])))
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
// ("" when none): the choice is in doubt, the repaired index would lose every key, or the
// fallback loses keys the rejected container lists that could not be taken back from their
// slots (engine.RecoveryReport.Rescued).
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
	if n := len(st.NotRescued); sel.Fallback && n > 0 && st.Kept > 0 {
		other := sel.Candidates[1-sel.Container]
		d := st.NotRescued[0]
		return fmt.Sprintf("falling back to container %d (seq %d) loses %d keys that the rejected container %d (seq %d) lists and that could not be taken back from their slots (first: %s: %s); writing replaces that container for good",
			sel.Container, sel.Seq, n, other.Container, other.Seq, reports.Escape(d.Key), d.Reason)
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
