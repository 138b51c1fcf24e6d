package cachereport

import (
	"fmt"
	"io"
	"strconv"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/reports"
)

// FormatState is what a format left on one device.
type FormatState string

const (
	// Formatted: the device holds an empty cache.
	Formatted FormatState = "formatted"
	// NotFormatted: nothing was written (refused, failed before writing, or interrupted
	// before its turn); the device holds what it held.
	NotFormatted FormatState = "not formatted"
	// HalfFormatted: writing began and failed: the old metadata may be gone and no complete
	// cache is there. Format it again.
	HalfFormatted FormatState = "half-formatted"
)

// DeviceFormat is one device of a format over several devices.
type DeviceFormat struct {
	Rank      int           `json:"rank"` // its position: the shard kv-rank sharding routes rank % N to
	Device    string        `json:"device"`
	Kind      blockdev.Kind `json:"kind,omitempty"`
	State     FormatState   `json:"state"`
	Placement string        `json:"placement"` // the policy the checkpoints were written under
	Layout    *Layout       `json:"layout,omitempty"`
	Error     string        `json:"error,omitempty"`

	err error
}

// Fail records err as the device's outcome, in state s.
func (d *DeviceFormat) Fail(s FormatState, err error) { d.State, d.err, d.Error = s, err, errText(err) }

// FormatTotal sums a format over its devices.
type FormatTotal struct {
	Devices   int   `json:"devices"`
	Formatted int   `json:"formatted"`
	Capacity  int64 `json:"capacity_bytes"`
	Slots     int64 `json:"slots"`
}

// Formats is a format of one cache over several devices: a row per device and the total.
type Formats struct {
	Devices     []DeviceFormat `json:"devices"`
	Total       FormatTotal    `json:"total"`
	Interrupted bool           `json:"interrupted,omitempty"` // stopped before every device's turn
}

// Sum fills Total from the devices, and returns the outcome: nil when every device was
// formatted, else a *DevicesError naming each device that was not.
func (r *Formats) Sum() error {
	r.Total = FormatTotal{Devices: len(r.Devices)}
	paths, errs := make([]string, len(r.Devices)), make([]error, len(r.Devices))
	for i, d := range r.Devices {
		paths[i], errs[i] = d.Device, d.err
		if d.State == Formatted && d.Layout != nil {
			r.Total.Formatted++
			r.Total.Capacity += d.Layout.CapacityBytes
			r.Total.Slots += d.Layout.MaxSlots
		}
	}
	return DevicesErr(paths, errs)
}

// WriteText renders a row per device and the total; the failures follow the table.
func (r *Formats) WriteText(w io.Writer) error {
	rows := make([][]string, 0, len(r.Devices)+1)
	for _, d := range r.Devices {
		capy, slots := "-", "-"
		if d.Layout != nil {
			capy, slots = Bytes(d.Layout.CapacityBytes), strconv.FormatInt(d.Layout.MaxSlots, 10)
		}
		rows = append(rows, []string{strconv.Itoa(d.Rank), reports.Escape(d.Device), string(d.Kind), string(d.State), reports.Escape(d.Placement), capy, slots})
	}
	rows = append(rows, []string{"total", plural(r.Total.Devices, "device"), "", fmt.Sprintf("%d formatted", r.Total.Formatted), "",
		Bytes(r.Total.Capacity), strconv.FormatInt(r.Total.Slots, 10)})
	if err := Table(w, []string{"rank", "device", "kind", "state", "placement", "capacity", "slots"}, rows); err != nil {
		return err
	}
	for _, d := range r.Devices {
		if d.Error != "" {
			fmt.Fprintf(w, "%s: %s: %s\n", reports.Escape(d.Device), d.State, d.Error)
		}
	}
	if r.Interrupted {
		_, err := fmt.Fprintf(w, "interrupted: %d of %s formatted\n", r.Total.Formatted, plural(r.Total.Devices, "device"))
		return err
	}
	return nil
}
