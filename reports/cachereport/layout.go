// Package cachereport builds the reports rbctl prints about a raw-block cache: its layout,
// the checkpoint recovery chose and why, what inspect and recover found, and the keys. Each
// report is a struct whose JSON tags are the --json output (docs/cli.md), with a WriteText
// method for people. Text that comes from a device or a user is escaped (Escape).
package cachereport

import (
	"fmt"
	"io"
	"strconv"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/reports"
	"github.com/rbctl/rbctl/units"
)

// Layout is a cache's geometry and format as JSON.
type Layout struct {
	DeviceSize       int64  `json:"device_size"`
	CapacityBytes    int64  `json:"capacity_bytes"`
	BlockAlign       int    `json:"block_align"`
	HeaderBytes      int    `json:"header_bytes"`
	SlotBytes        int64  `json:"slot_bytes"`
	MetaTotalBytes   int64  `json:"meta_total_bytes"`
	ContainerBytes   int64  `json:"container_bytes"`
	PayloadCapacity  int64  `json:"container_payload_capacity"`
	DataBaseOffset   int64  `json:"data_base_offset"`
	MaxSlots         int64  `json:"max_slots"`
	MetaMagic        string `json:"meta_magic"`
	MetaVersion      uint32 `json:"meta_version"`
	Namespace        string `json:"namespace"`
	CheckpointFormat string `json:"checkpoint_format"`

	rows [][]string
}

// LayoutOf describes the layout l of a cache configured by cfg.
func LayoutOf(l engine.Layout, cfg engine.Config) Layout {
	return Layout{l.DeviceSize, l.Capacity, l.BlockAlign, l.HeaderBytes, l.SlotBytes, l.MetaTotalBytes,
		l.ContainerBytes, l.PayloadCap, l.DataBase, l.MaxSlots, cfg.MetaMagic, cfg.MetaVersion, string(cfg.Namespace),
		string(cfg.CheckpointFormat), layoutRows(l, cfg)}
}

func layoutRows(l engine.Layout, cfg engine.Config) [][]string {
	return [][]string{
		{"device size", fmt.Sprintf("%d (%s)", l.DeviceSize, Bytes(l.DeviceSize))},
		{"capacity", fmt.Sprintf("%d (%s)", l.Capacity, Bytes(l.Capacity))},
		{"block_align", strconv.Itoa(l.BlockAlign)},
		{"header_bytes", strconv.Itoa(l.HeaderBytes)},
		{"slot_bytes", fmt.Sprintf("%d (%s)", l.SlotBytes, Bytes(l.SlotBytes))},
		{"meta_total_bytes", fmt.Sprintf("%d (%s)", l.MetaTotalBytes, Bytes(l.MetaTotalBytes))},
		{"containers", fmt.Sprintf("[0, %d) and [%d, %d), payload capacity %d each", l.ContainerBytes, l.ContainerOffset[1], l.ContainerOffset[1]+l.ContainerBytes, l.PayloadCap)},
		{"data_base_offset", strconv.FormatInt(l.DataBase, 10)},
		{"slots", strconv.FormatInt(l.MaxSlots, 10)},
		{"meta_magic / version", fmt.Sprintf("%s / %d", cfg.MetaMagic, cfg.MetaVersion)},
		{"namespace", string(cfg.Namespace)},
		{"checkpoint format", string(cfg.CheckpointFormat)},
	}
}

// WriteText renders the layout as a field/value table.
func (l Layout) WriteText(w io.Writer) error { return Table(w, []string{"field", "value"}, l.rows) }

// Bytes renders n in binary units with one decimal ("1.5 MiB"); below 1 KiB in bytes.
func Bytes(n int64) string { return units.FormatSize(n) }

// Table renders rows under header in rbctl's one table style.
func Table(w io.Writer, header []string, rows [][]string) error {
	t := reports.NewTable(w)
	t.Header(header)
	for _, r := range rows {
		if err := t.Append(r); err != nil {
			return err
		}
	}
	return t.Render()
}
