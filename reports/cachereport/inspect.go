package cachereport

import (
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/reports"
)

// InspectOptions choose what Inspect reads besides the metadata.
type InspectOptions struct {
	Keys    bool // list the keys
	MaxKeys int  // with Keys, at most this many (0: all)
	Verify  bool // read every slot header and report the entries recovery would drop
}

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
	Device      string                `json:"device"`
	Layout      Layout                `json:"layout"`
	Containers  []Container           `json:"containers"`
	UsedFrom    int                   `json:"checkpoint_container"`
	Seq         uint64                `json:"checkpoint_seq"`
	Choice      Choice                `json:"checkpoint_choice"`
	Entries     int64                 `json:"entries"`
	SlotsFree   int64                 `json:"free_slots"`
	NextSlot    int64                 `json:"next_slot"`
	Usage       float64               `json:"usage"`
	BytesBySalt map[string]int64      `json:"bytes_by_cache_salt"`
	Dropped     []engine.DroppedEntry `json:"dropped_by_verify,omitempty"`
	Keys        []Key                 `json:"keys,omitempty"`

	opts   InspectOptions
	sel    engine.Selection
	format engine.CheckpointFormat
	opened bool // the index was recovered (false: the containers and choice only)
}

// Inspect reads the cache on dev (named path in the report) without writing, and closes dev.
// When the index cannot be recovered it returns the containers and the choice read so far
// with the error; WriteText then shows those.
func Inspect(dev blockdev.Device, path string, opts InspectOptions) (*Inspection, error) {
	d, err := engine.Detect(dev)
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	cfg := d.Config
	cfg.ReadOnly, cfg.Periodic, cfg.VerifyOnLoad = true, false, opts.Verify
	infos, err := engine.ReadContainers(dev, cfg)
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	lay, _ := engine.ReadLayout(dev, cfg)
	r := &Inspection{Device: path, Layout: LayoutOf(lay, cfg), BytesBySalt: map[string]int64{}, Choice: ChoiceOf(d.Selection),
		opts: opts, sel: d.Selection}
	for _, c := range infos {
		ic := Container{Index: c.Index, Offset: c.Offset, Valid: c.Valid, Seq: c.Seq, PayloadLen: c.PayloadLen,
			CRC: fmt.Sprintf("%08x", c.CRC), Format: string(c.Format), Problem: c.Problem}
		if c.PayloadLen > 0 && c.Problem != "empty" {
			ic.ComputedCRC = fmt.Sprintf("%08x", c.ComputedCRC)
		}
		r.Containers = append(r.Containers, ic)
	}
	e, err := engine.Open(dev, cfg)
	if err != nil {
		dev.Close()
		return r, fmt.Errorf("%s: %w", path, err)
	}
	defer e.Close()
	st := e.Stats().Recovery
	u := e.Usage()
	r.opened, r.sel, r.format = true, st.Selection, st.Format
	r.UsedFrom, r.Seq, r.Choice = st.Container, st.Seq, ChoiceOf(st.Selection)
	r.Entries, r.SlotsFree, r.NextSlot, r.Usage = u.SlotsUsed, u.SlotsFree, u.NextSlot, u.Fraction
	r.BytesBySalt = u.BytesBySalt
	r.Dropped = st.Dropped
	if opts.Keys {
		r.Keys = Keys(e, "")
		sort.Slice(r.Keys, func(i, j int) bool { return r.Keys[i].Slot < r.Keys[j].Slot })
		if opts.MaxKeys > 0 && len(r.Keys) > opts.MaxKeys {
			r.Keys = r.Keys[:opts.MaxKeys]
		}
	}
	return r, nil
}

// WriteText renders the inspection for people.
func (r *Inspection) WriteText(w io.Writer) error {
	if !r.opened {
		r.writeContainers(w)
		return writeLines(w, ChoiceLines(r.sel))
	}
	fmt.Fprintf(w, "%s\n", r.Device)
	if err := r.Layout.WriteText(w); err != nil {
		return err
	}
	r.writeContainers(w)
	if err := writeLines(w, ChoiceLines(r.sel)); err != nil {
		return err
	}
	rows := [][]string{
		{"checkpoint", fmt.Sprintf("container %d, seq %d, %s", r.UsedFrom, r.Seq, r.format)},
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
	if r.opts.Verify {
		rows = append(rows, []string{"verify", fmt.Sprintf("%d entries would be dropped", len(r.Dropped))})
	}
	if err := Table(w, []string{"index", "value"}, rows); err != nil {
		return err
	}
	for _, d := range r.Dropped {
		fmt.Fprintf(w, "would drop %s (slot %d): %s\n", reports.Escape(d.Key), d.Slot, d.Reason)
	}
	if !r.opts.Keys {
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
			if cd.Entries >= 0 {
				entries = strconv.Itoa(cd.Entries)
			}
			if cd.Stale > 0 {
				entries += fmt.Sprintf(" (%d stale)", cd.Stale)
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
