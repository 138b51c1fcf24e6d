package cachereport

import (
	"fmt"
	"io"

	"github.com/rbctl/rbctl/reports"
)

// Recovery is what recover found and did.
type Recovery struct {
	Device    string    `json:"device"`
	DryRun    bool      `json:"dry_run"`
	Container int       `json:"checkpoint_container"`
	Seq       uint64    `json:"checkpoint_seq"`
	Format    string    `json:"checkpoint_format"`
	Choice    Choice    `json:"checkpoint_choice"`
	Loaded    int       `json:"loaded"`
	Kept      int       `json:"kept"`
	Dropped   []Dropped `json:"dropped"`
	// Rescued: keys only the rejected (newer, damaged) container listed, kept because their
	// slots verified; NotRescued: those that could not be, with why.
	Rescued    []string  `json:"rescued"`
	NotRescued []Dropped `json:"not_rescued"`
	FreeSlots  int64     `json:"free_slots"`       // on the free lists (used before, now free)
	NeverUsed  int64     `json:"never_used_slots"` // [next_slot, slots): free too, never written
	TotalFree  int64     `json:"total_free_slots"` // free_slots + never_used_slots
	NextSlot   int64     `json:"next_slot"`
	DurationMs float64   `json:"duration_ms"`
	Repairs    []string  `json:"repairs"` // what a write fixes ([]: nothing to repair)
	Refused    string    `json:"refused,omitempty"`
	Written    bool      `json:"checkpoint_written"`
	NewSeq     uint64    `json:"new_checkpoint_seq,omitempty"`
	Scan       *Scan     `json:"scan,omitempty"` // no checkpoint usable: rebuilt from the slot headers
}

// WriteText renders the recovery for people; the last line says what was written.
func (r *Recovery) WriteText(w io.Writer) error {
	if s := r.Scan; s != nil {
		fmt.Fprintf(w, "%s: no checkpoint usable: index rebuilt from the slot headers (layout from %s): %s read, %s rebuilt, %d older versions superseded, %d failed verification, %d headers without a key record, %d empty; %s (%.1f ms)\n",
			r.Device, reports.Escape(s.LayoutSource), reports.Count(int64(s.Slots), "slot", "slots"), reports.Count(int64(s.Rebuilt), "entry", "entries"), s.Superseded, s.Failed, s.NoKeyRecord, s.Empty, reports.Count(int64(r.TotalFree), "free slot", "free slots"), r.DurationMs)
	} else {
		fmt.Fprintf(w, "%s: checkpoint container %d seq %d (%s): %s, kept %d, dropped %d, %s (%d on the free lists + %d never used) (%.1f ms)\n",
			r.Device, r.Container, r.Seq, r.Format, reports.Count(int64(r.Loaded), "entry", "entries"), r.Kept, len(r.Dropped), reports.Count(int64(r.TotalFree), "free slot", "free slots"), r.FreeSlots, r.NeverUsed, r.DurationMs)
	}
	lines := r.Choice.Lines()
	for _, d := range r.Dropped {
		lines = append(lines, fmt.Sprintf("dropped %s (slot %d): %s", reports.Escape(d.Key), d.Slot, d.Reason))
	}
	for i, k := range r.Rescued {
		if i == 8 {
			lines = append(lines, fmt.Sprintf("rescued %d more", len(r.Rescued)-8))
			break
		}
		lines = append(lines, fmt.Sprintf("rescued %s: only the rejected container listed it; its slot verified", reports.Escape(k)))
	}
	for _, d := range r.NotRescued {
		lines = append(lines, fmt.Sprintf("not rescued %s (slot %d): %s", reports.Escape(d.Key), d.Slot, d.Reason))
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
