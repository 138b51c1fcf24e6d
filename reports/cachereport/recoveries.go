package cachereport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/rbctl/rbctl/reports"
)

// DeviceRecovery is one device of a recover over several devices: its Recovery (nil when
// it failed before there was one) and its failure, a refused write included.
type DeviceRecovery struct {
	*Recovery
	Device string `json:"device"`
	Error  string `json:"error,omitempty"`
	// Interrupted: Ctrl-C stopped it (before or while verifying); nothing was written.
	Interrupted bool `json:"interrupted,omitempty"`

	err error
}

// RecoverTotal sums a recover over its devices.
type RecoverTotal struct {
	Devices   int   `json:"devices"`
	Failed    int   `json:"failed"`
	Loaded    int   `json:"loaded"`
	Kept      int   `json:"kept"`
	Dropped   int   `json:"dropped"`
	FreeSlots int64 `json:"total_free_slots"`
	Written   int   `json:"checkpoints_written"`
}

// Recoveries is recover over several devices: each device's report, and the total.
type Recoveries struct {
	Devices []DeviceRecovery `json:"devices"`
	Total   RecoverTotal     `json:"total"`
}

// NewRecoveries collects the recovery (or failure) of every path, in order, and sums them;
// the error is nil when every device recovered (and wrote what it needed), else a
// *DevicesError.
func NewRecoveries(paths []string, reps []*Recovery, errs []error) (*Recoveries, error) {
	r := &Recoveries{Total: RecoverTotal{Devices: len(paths)}}
	for i, p := range paths {
		d := DeviceRecovery{Recovery: reps[i], Device: p, Error: errText(errs[i]), err: errs[i],
			Interrupted: errors.Is(errs[i], context.Canceled)}
		if errs[i] != nil {
			r.Total.Failed++
		}
		if reps[i] != nil {
			r.Total.Loaded += d.Loaded
			r.Total.Kept += d.Kept
			r.Total.Dropped += len(d.Dropped)
			r.Total.FreeSlots += d.TotalFree
			if d.Written {
				r.Total.Written++
			}
		}
		r.Devices = append(r.Devices, d)
	}
	return r, DevicesErr(paths, errs)
}

// Output is what recover prints: for one device its Recovery as always, else the whole
// report. For one device without a Recovery (it failed or was interrupted before there
// was one), JSON gets the device, its error and whether it was interrupted — a --json
// caller always gets JSON — and text gets nothing (the error says it). nil: nothing.
func (r *Recoveries) Output(asJSON bool) any {
	switch {
	case r == nil:
		return nil
	case len(r.Devices) != 1:
		return r
	}
	switch d := r.Devices[0]; {
	case d.Recovery != nil:
		return d.Recovery
	case asJSON:
		return d
	}
	return nil
}

// WriteText renders each device as recover shows one, then a row per device and the total
// (for one device: its report only).
func (r *Recoveries) WriteText(w io.Writer) error {
	if len(r.Devices) == 1 {
		if d := r.Devices[0]; d.Recovery != nil {
			return d.WriteText(w)
		}
		return nil
	}
	var rows [][]string
	for _, d := range r.Devices {
		if d.Recovery != nil {
			if err := d.Recovery.WriteText(w); err != nil {
				return err
			}
		}
		if d.err != nil {
			fmt.Fprintf(w, "%s: error: %s\n", reports.Escape(d.Device), d.Error)
		}
		if d.Recovery == nil {
			rows = append(rows, []string{reports.Escape(d.Device), "-", "-", "-", "-", "error"})
			continue
		}
		rows = append(rows, []string{reports.Escape(d.Device), strconv.Itoa(d.Loaded), strconv.Itoa(d.Kept), strconv.Itoa(len(d.Dropped)),
			strconv.FormatInt(d.TotalFree, 10), d.outcome()})
	}
	t := r.Total
	rows = append(rows, []string{"total", strconv.Itoa(t.Loaded), strconv.Itoa(t.Kept), strconv.Itoa(t.Dropped), strconv.FormatInt(t.FreeSlots, 10),
		fmt.Sprintf("%d of %d ok, %d written", t.Devices-t.Failed, t.Devices, t.Written)})
	fmt.Fprintln(w)
	return Table(w, []string{"device", "entries", "kept", "dropped", "free slots", "checkpoint"}, rows)
}

// outcome is the checkpoint column: what recover wrote, or why not.
func (d DeviceRecovery) outcome() string {
	switch {
	case d.Refused != "":
		return "refused"
	case d.DryRun:
		return "dry run"
	case d.Written:
		return fmt.Sprintf("written (seq %d)", d.NewSeq)
	}
	return "nothing to repair"
}
