package cachereport

import (
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/rbctl/rbctl/reports"
)

// Container is one metadata container as read from the device.
type Container struct {
	Index       int    `json:"index"`
	Offset      int64  `json:"offset"`
	Valid       bool   `json:"valid"`
	Seq         uint64 `json:"seq"`
	PayloadLen  uint64 `json:"payload_len"`
	CRC         string `json:"crc"`
	ComputedCRC string `json:"computed_crc,omitempty"`
	Format      string `json:"format,omitempty"`
	Problem     string `json:"problem,omitempty"`
}

// Inspection is what inspect shows: the layout, both containers, the checkpoint chosen and
// the index recovered from it.
type Inspection struct {
	Device      string           `json:"device"`
	Layout      Layout           `json:"layout"`
	Containers  []Container      `json:"containers"`
	UsedFrom    int              `json:"checkpoint_container"`
	Seq         uint64           `json:"checkpoint_seq"`
	Choice      Choice           `json:"checkpoint_choice"`
	Entries     int64            `json:"entries"`
	SlotsFree   int64            `json:"free_slots"`
	NextSlot    int64            `json:"next_slot"`
	Usage       float64          `json:"usage"`
	BytesBySalt map[string]int64 `json:"bytes_by_cache_salt"`
	Dropped     []Dropped        `json:"dropped_by_verify,omitempty"`
	Keys        []Key            `json:"keys,omitempty"`

	// For the text only: whether the index was recovered (false: the containers and the
	// choice only), the format of the checkpoint it was recovered from, and whether the
	// keys were listed and the slot headers verified.
	Opened     bool   `json:"-"`
	Format     string `json:"-"`
	KeysListed bool   `json:"-"`
	Verified   bool   `json:"-"`
}

// Dropped is an index entry whose slot header failed verification.
type Dropped struct {
	Key    string
	Slot   int64
	Reason string
}

// WriteText renders the inspection for people.
func (r *Inspection) WriteText(w io.Writer) error {
	if !r.Opened {
		r.writeContainers(w)
		return writeLines(w, r.Choice.Lines())
	}
	fmt.Fprintf(w, "%s\n", r.Device)
	if err := r.Layout.WriteText(w); err != nil {
		return err
	}
	r.writeContainers(w)
	if err := writeLines(w, r.Choice.Lines()); err != nil {
		return err
	}
	rows := [][]string{
		{"checkpoint", fmt.Sprintf("container %d, seq %d, %s", r.UsedFrom, r.Seq, r.Format)},
		{"entries", strconv.FormatInt(r.Entries, 10)},
		{"usage", fmt.Sprintf("%.2f%% of %d slots", 100*r.Usage, r.Layout.MaxSlots)},
		{"free slots", fmt.Sprintf("%d (plus %d never used from next_slot %d)", r.SlotsFree, r.Layout.MaxSlots-r.NextSlot, r.NextSlot)},
	}
	salts := make([]string, 0, len(r.BytesBySalt))
	for s := range r.BytesBySalt {
		salts = append(salts, s)
	}
	sort.Strings(salts)
	for _, s := range salts {
		name := s
		if name == "" {
			name = "(none)"
		}
		rows = append(rows, []string{"cache_salt " + name, Bytes(r.BytesBySalt[s])})
	}
	if r.Verified {
		rows = append(rows, []string{"verify", reports.Count(int64(len(r.Dropped)), "entry", "entries") + " would be dropped (slot headers checked; rbctl recover --verify --dry-run also checks every payload)"})
	}
	if err := Table(w, []string{"index", "value"}, rows); err != nil {
		return err
	}
	for _, d := range r.Dropped {
		fmt.Fprintf(w, "would drop %s (slot %d): %s\n", reports.Escape(d.Key), d.Slot, d.Reason)
	}
	if !r.KeysListed {
		return nil
	}
	var kr [][]string
	for _, k := range r.Keys {
		kr = append(kr, []string{strconv.FormatUint(uint64(k.Slot), 10), reports.Escape(k.Key), strconv.Itoa(k.Size), reports.Escape(k.Salt), k.CRC})
	}
	return Table(w, []string{"slot", "key", "size", "cache_salt", "crc32c"}, kr)
}

func (r *Inspection) writeContainers(w io.Writer) {
	var rows [][]string
	for i, c := range r.Containers {
		state := "valid"
		if !c.Valid {
			state = "invalid: " + c.Problem
		}
		seq, entries := strconv.FormatUint(c.Seq, 10), "-"
		if i < len(r.Choice.Candidates) {
			cd := r.Choice.Candidates[i]
			if cd.Seq != c.Seq {
				seq += fmt.Sprintf(" (damaged: really %d)", cd.Seq)
			}
			seq += " [" + cd.SeqSource + "]"
			if cd.Entries != nil {
				entries = strconv.Itoa(*cd.Entries)
			}
			if cd.Stale != nil && *cd.Stale > 0 {
				entries += fmt.Sprintf(" (%d stale)", *cd.Stale)
			}
		}
		rows = append(rows, []string{strconv.Itoa(c.Index), strconv.FormatInt(c.Offset, 10), seq,
			strconv.FormatUint(c.PayloadLen, 10), c.CRC, c.Format, entries, state})
	}
	_ = Table(w, []string{"container", "offset", "seq [checked by]", "payload_len", "crc32", "format", "entries", "state"}, rows)
}

func writeLines(w io.Writer, lines []string) error {
	for _, l := range lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}
