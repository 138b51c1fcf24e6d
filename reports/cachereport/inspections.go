package cachereport

import (
	"fmt"
	"io"
	"strconv"

	"github.com/rbctl/rbctl/reports"
)

// DeviceInspection is one device of an inspect over several devices: its Inspection (nil
// when the device could not be read at all; without the index when it could not be
// recovered) and its failure.
type DeviceInspection struct {
	*Inspection
	Device string `json:"device"`
	Error  string `json:"error,omitempty"`

	err error
}

// InspectTotal sums an inspect over the devices it could read.
type InspectTotal struct {
	Devices   int   `json:"devices"`
	Failed    int   `json:"failed"`
	Entries   int64 `json:"entries"`
	BytesUsed int64 `json:"bytes_used"` // slot bytes of the entries
	FreeSlots int64 `json:"total_free_slots"`
	Slots     int64 `json:"slots"`
}

// Inspections is inspect over several devices: each device's report, and the total.
type Inspections struct {
	Devices []DeviceInspection `json:"devices"`
	Total   InspectTotal       `json:"total"`
}

// NewInspections collects the inspection (or failure) of every path, in order, and sums
// them; the error is nil when every device was read, else a *DevicesError.
func NewInspections(paths []string, reps []*Inspection, errs []error) (*Inspections, error) {
	r := &Inspections{Total: InspectTotal{Devices: len(paths)}}
	for i, p := range paths {
		d := DeviceInspection{Inspection: reps[i], Device: p, Error: errText(errs[i]), err: errs[i]}
		switch {
		case errs[i] != nil:
			r.Total.Failed++
		case reps[i] != nil:
			r.Total.Entries += d.Entries
			r.Total.BytesUsed += d.bytesUsed()
			r.Total.FreeSlots += d.freeSlots()
			r.Total.Slots += d.Layout.MaxSlots
		}
		r.Devices = append(r.Devices, d)
	}
	return r, DevicesErr(paths, errs)
}

func (d DeviceInspection) bytesUsed() int64 {
	var n int64
	for _, b := range d.BytesBySalt {
		n += b
	}
	return n
}

// freeSlots counts the slots on the free lists and those never used yet.
func (d DeviceInspection) freeSlots() int64 { return d.SlotsFree + d.Layout.MaxSlots - d.NextSlot }

// Output is what inspect prints for asJSON: for one device its Inspection as always
// (nothing in JSON when it failed), else the whole report. nil: nothing to print.
func (r *Inspections) Output(asJSON bool) any {
	switch {
	case r == nil:
		return nil
	case len(r.Devices) != 1:
		return r
	}
	if d := r.Devices[0]; d.Inspection != nil && (!asJSON || d.err == nil) {
		return d.Inspection
	}
	return nil
}

// WriteText renders each device as inspect shows one, then a row per device and the total
// (for one device: its report only).
func (r *Inspections) WriteText(w io.Writer) error {
	if len(r.Devices) == 1 {
		if d := r.Devices[0]; d.Inspection != nil {
			return d.WriteText(w)
		}
		return nil
	}
	var rows [][]string
	for i, d := range r.Devices {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if d.err != nil {
			fmt.Fprintf(w, "%s: error: %s\n", reports.Escape(d.Device), d.Error)
		}
		if d.Inspection != nil {
			if err := d.Inspection.WriteText(w); err != nil {
				return err
			}
		}
		if d.err != nil {
			rows = append(rows, []string{reports.Escape(d.Device), "-", "-", "-", "-", "error"})
			continue
		}
		rows = append(rows, []string{reports.Escape(d.Device), strconv.FormatInt(d.Entries, 10), Bytes(d.bytesUsed()),
			strconv.FormatInt(d.freeSlots(), 10), strconv.FormatInt(d.Layout.MaxSlots, 10), "ok"})
	}
	t := r.Total
	rows = append(rows, []string{"total", strconv.FormatInt(t.Entries, 10), Bytes(t.BytesUsed), strconv.FormatInt(t.FreeSlots, 10),
		strconv.FormatInt(t.Slots, 10), fmt.Sprintf("%d of %d ok", t.Devices-t.Failed, t.Devices)})
	fmt.Fprintln(w)
	return Table(w, []string{"device", "entries", "bytes used", "free slots", "slots", "state"}, rows)
}
