// Package cachereport renders the reports rbctl prints about a raw-block cache: its layout,
// the checkpoint recovery chose and why, what format, inspect and recover found, and the
// keys. Each report is a plain struct whose JSON tags are the --json output (docs/cli.md),
// with a WriteText method for people; package cache fills them (it reads the device, this
// package imports no engine). Text that comes from a device or a user is escaped
// (reports.Escape).
package cachereport

import (
	"fmt"
	"io"
	"strconv"

	"github.com/rbctl/rbctl/reports"
	"github.com/rbctl/rbctl/units"
)

// Layout is a cache's geometry and format as JSON.
type Layout struct {
	DeviceSize       int64  `json:"device_size_bytes"`
	CapacityBytes    int64  `json:"capacity_bytes"`
	BlockAlign       int    `json:"block_align"`
	HeaderBytes      int    `json:"header_bytes"`
	SlotBytes        int64  `json:"slot_bytes"`
	MetaTotalBytes   int64  `json:"meta_total_bytes"`
	ContainerBytes   int64  `json:"container_bytes"`
	PayloadCapacity  int64  `json:"container_payload_capacity_bytes"`
	DataBaseOffset   int64  `json:"data_base_offset"`
	MaxSlots         int64  `json:"max_slots"`
	MetaMagic        string `json:"meta_magic"`
	MetaVersion      uint32 `json:"meta_version"`
	Namespace        string `json:"namespace"`
	CheckpointFormat string `json:"checkpoint_format"`
	// Container1Offset is where the second metadata container starts (text only).
	Container1Offset int64 `json:"-"`
}

func (l Layout) rows() [][]string {
	return [][]string{
		{"device size", fmt.Sprintf("%d (%s)", l.DeviceSize, Bytes(l.DeviceSize))},
		{"capacity", fmt.Sprintf("%d (%s)", l.CapacityBytes, Bytes(l.CapacityBytes))},
		{"block_align", strconv.Itoa(l.BlockAlign)},
		{"header_bytes", strconv.Itoa(l.HeaderBytes)},
		{"slot_bytes", fmt.Sprintf("%d (%s)", l.SlotBytes, Bytes(l.SlotBytes))},
		{"meta_total_bytes", fmt.Sprintf("%d (%s)", l.MetaTotalBytes, Bytes(l.MetaTotalBytes))},
		{"containers", fmt.Sprintf("[0, %d) and [%d, %d), payload capacity %d each", l.ContainerBytes, l.Container1Offset, l.Container1Offset+l.ContainerBytes, l.PayloadCapacity)},
		{"data_base_offset", strconv.FormatInt(l.DataBaseOffset, 10)},
		{"slots", strconv.FormatInt(l.MaxSlots, 10)},
		{"meta_magic / version", fmt.Sprintf("%s / %d", l.MetaMagic, l.MetaVersion)},
		{"namespace", l.Namespace},
		{"checkpoint format", l.CheckpointFormat},
	}
}

// WriteText renders the layout as a field/value table.
func (l Layout) WriteText(w io.Writer) error { return Table(w, []string{"field", "value"}, l.rows()) }

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
