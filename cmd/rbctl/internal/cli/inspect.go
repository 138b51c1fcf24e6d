package cli

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/engine"
)

func init() { register(newInspectCmd) }

type inspectFlags struct {
	dev        rbDevFlags
	keys, json bool
	verify     bool
	maxKeys    int
}

type inspectContainer struct {
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

type inspectKey struct {
	Key    string `json:"key"`
	Slot   uint32 `json:"slot"`
	Offset int64  `json:"offset"`
	Size   int    `json:"size"`
	Salt   string `json:"cache_salt,omitempty"`
	Handle int32  `json:"handle"`
	CRC    string `json:"crc32c,omitempty"`
}

type inspectReport struct {
	Device      string                `json:"device"`
	Layout      rbLayoutJSON          `json:"layout"`
	Containers  []inspectContainer    `json:"containers"`
	UsedFrom    int                   `json:"checkpoint_container"`
	Seq         uint64                `json:"checkpoint_seq"`
	Choice      rbChoiceJSON          `json:"checkpoint_choice"`
	Entries     int64                 `json:"entries"`
	SlotsFree   int64                 `json:"free_slots"`
	NextSlot    int64                 `json:"next_slot"`
	Usage       float64               `json:"usage"`
	BytesBySalt map[string]int64      `json:"bytes_by_cache_salt"`
	Dropped     []engine.DroppedEntry `json:"dropped_by_verify,omitempty"`
	Keys        []inspectKey          `json:"keys,omitempty"`
}

func newInspectCmd() *cobra.Command {
	f := &inspectFlags{}
	cmd := &cobra.Command{
		Use:   "inspect DEV",
		Short: "Show a raw-block cache's layout, metadata containers, entries and usage (read-only)",
		Long: `inspect opens DEV read-only, detects its layout, key namespace and checkpoint format
from the checkpoint recovery chooses (rbctl compact or LMCache v1 JSON), and shows both
metadata containers with their sequence number (and whether a checksum covers it), CRC,
validity, format and entry count; which checkpoint was chosen and why, and what a
fallback from a newer, damaged one lost; the entry count, usage, free slots and bytes per
cache_salt. Nothing is written to the device.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runInspect(cmd, args[0], f) },
	}
	cmd.Flags().BoolVar(&f.keys, "keys", false, "list the keys")
	cmd.Flags().IntVar(&f.maxKeys, "max-keys", 0, "with --keys, list at most this many (0 = all)")
	cmd.Flags().BoolVar(&f.json, "json", false, "print JSON")
	cmd.Flags().BoolVar(&f.verify, "verify", false, "also read every slot header and report entries recovery would drop")
	f.dev.add(cmd)
	return cmd
}

func runInspect(cmd *cobra.Command, path string, f *inspectFlags) error {
	dev, err := f.dev.open(path, true)
	if err != nil {
		return err
	}
	d, err := engine.Detect(dev)
	if err != nil {
		dev.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	cfg := d.Config
	cfg.ReadOnly, cfg.Periodic, cfg.VerifyOnLoad = true, false, f.verify
	infos, err := engine.ReadContainers(dev, cfg)
	if err != nil {
		dev.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	lay, _ := engine.ReadLayout(dev, cfg)
	rep := inspectReport{Device: path, Layout: rbLayoutOf(lay, cfg), BytesBySalt: map[string]int64{}, Choice: rbChoiceOf(d.Selection)}
	for _, c := range infos {
		ic := inspectContainer{Index: c.Index, Offset: c.Offset, Valid: c.Valid, Seq: c.Seq, PayloadLen: c.PayloadLen,
			CRC: fmt.Sprintf("%08x", c.CRC), Format: string(c.Format), Problem: c.Problem}
		if c.PayloadLen > 0 && c.Problem != "empty" {
			ic.ComputedCRC = fmt.Sprintf("%08x", c.ComputedCRC)
		}
		rep.Containers = append(rep.Containers, ic)
	}
	e, err := engine.Open(dev, cfg)
	if err != nil {
		dev.Close()
		if !f.json {
			printInspectContainers(cmd, rep)
			for _, l := range rbChoiceLines(d.Selection) {
				fmt.Fprintln(cmd.OutOrStdout(), l)
			}
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	defer e.Close()
	st := e.Stats().Recovery
	u := e.Usage()
	rep.UsedFrom, rep.Seq, rep.Choice = st.Container, st.Seq, rbChoiceOf(st.Selection)
	rep.Entries, rep.SlotsFree, rep.NextSlot, rep.Usage = u.SlotsUsed, u.SlotsFree, u.NextSlot, u.Fraction
	rep.BytesBySalt = u.BytesBySalt
	rep.Dropped = st.Dropped
	if f.keys {
		e.Entries(func(k engine.Key, m engine.EntryMeta) bool {
			ik := inspectKey{Key: k.String(), Slot: m.Slot, Offset: m.Offset, Size: m.Size, Salt: k.CacheSalt(), Handle: int32(m.Handle)}
			if m.HasChecksum {
				ik.CRC = fmt.Sprintf("%08x", m.Checksum)
			}
			rep.Keys = append(rep.Keys, ik)
			return true
		})
		sort.Slice(rep.Keys, func(i, j int) bool { return rep.Keys[i].Slot < rep.Keys[j].Slot })
		if f.maxKeys > 0 && len(rep.Keys) > f.maxKeys {
			rep.Keys = rep.Keys[:f.maxKeys]
		}
	}
	out := cmd.OutOrStdout()
	if f.json {
		return rbJSON(out, rep)
	}
	fmt.Fprintf(out, "%s\n", path)
	if err := rbTable(out, []string{"field", "value"}, rbLayoutRows(lay, cfg)); err != nil {
		return err
	}
	printInspectContainers(cmd, rep)
	for _, l := range rbChoiceLines(st.Selection) {
		fmt.Fprintln(out, l)
	}
	rows := [][]string{
		{"checkpoint", fmt.Sprintf("container %d, seq %d, %s", rep.UsedFrom, rep.Seq, st.Format)},
		{"entries", strconv.FormatInt(rep.Entries, 10)},
		{"usage", fmt.Sprintf("%.2f%% of %d slots", 100*rep.Usage, lay.MaxSlots)},
		{"free slots", fmt.Sprintf("%d (plus %d never used from next_slot %d)", rep.SlotsFree, lay.MaxSlots-rep.NextSlot, rep.NextSlot)},
	}
	salts := make([]string, 0, len(rep.BytesBySalt))
	for s := range rep.BytesBySalt {
		salts = append(salts, s)
	}
	sort.Strings(salts)
	for _, s := range salts {
		name := s
		if name == "" {
			name = "(none)"
		}
		rows = append(rows, []string{"cache_salt " + name, rbBytes(rep.BytesBySalt[s])})
	}
	if f.verify {
		rows = append(rows, []string{"verify", fmt.Sprintf("%d entries would be dropped", len(rep.Dropped))})
	}
	if err := rbTable(out, []string{"index", "value"}, rows); err != nil {
		return err
	}
	for _, d := range rep.Dropped {
		fmt.Fprintf(out, "would drop %s (slot %d): %s\n", rbEscape(d.Key), d.Slot, d.Reason)
	}
	if f.keys {
		var kr [][]string
		for _, k := range rep.Keys {
			kr = append(kr, []string{strconv.FormatUint(uint64(k.Slot), 10), rbEscape(k.Key), strconv.Itoa(k.Size), rbEscape(k.Salt), k.CRC})
		}
		return rbTable(out, []string{"slot", "key", "size", "cache_salt", "crc32c"}, kr)
	}
	return nil
}

func printInspectContainers(cmd *cobra.Command, rep inspectReport) {
	var rows [][]string
	for i, c := range rep.Containers {
		state := "valid"
		if !c.Valid {
			state = "invalid: " + c.Problem
		}
		seq, entries := strconv.FormatUint(c.Seq, 10), "-"
		if i < len(rep.Choice.Candidates) {
			cd := rep.Choice.Candidates[i]
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
	_ = rbTable(cmd.OutOrStdout(), []string{"container", "offset", "seq [checked by]", "payload_len", "crc32", "format", "entries", "state"}, rows)
}
