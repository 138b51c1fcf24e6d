package reports

import (
	"fmt"
	"strconv"
	"strings"
)

// DeviceRun is one device's share of a bench run over a cache sharded across devices: the
// put and load operations its engine served (one per key), those that failed with a device
// error, its payload bandwidth and latency over the measured window, its WAF, and when it
// last failed and last served (seconds into the measured window; null when it never did).
type DeviceRun struct {
	Device   string  `json:"device"`
	Ops      int64   `json:"ops"`    // keys put or loaded on this device
	Errors   int64   `json:"errors"` // of them: failed by a device error, plus failed checkpoints and deallocates
	PutBytes int64   `json:"put_bytes"`
	GetBytes int64   `json:"get_bytes"`
	PutMiBs  float64 `json:"put_mib_s"`
	GetMiBs  float64 `json:"get_mib_s"`
	P50Us    float64 `json:"p50_us"` // the device's part of each put and load batch
	P99Us    float64 `json:"p99_us"`
	// WAF is the device's FDP statistics WAF when it has one, else its shadow model's
	// (modelled); WAFSource says which (SourceFDPStats, SourceEmulatorModel, SourceModelled)
	// or "none".
	WAF        *float64 `json:"waf"`
	WAFSource  string   `json:"waf_source"`
	FirstError *float64 `json:"first_error_s"`
	LastError  *float64 `json:"last_error_s"`
	LastOK     *float64 `json:"last_ok_s"`
}

// DeviceErrors sums the device errors of every run and names the devices that had any.
func (r *Report) DeviceErrors() (int64, []string) {
	var n int64
	var names []string
	seen := map[string]bool{}
	for _, run := range r.Runs {
		for _, d := range run.Devices {
			n += d.Errors
			if d.Errors > 0 && !seen[d.Device] {
				seen[d.Device] = true
				names = append(names, d.Device)
			}
		}
	}
	return n, names
}

// DeviceError is an error stating the device errors of the report's runs, nil when there
// were none (bench exits 1 on it after printing the report).
func (r *Report) DeviceError() error {
	n, names := r.DeviceErrors()
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%d I/O errors on %s (the report counts them per device)", n, strings.Join(names, ", "))
}

// sharded reports whether any run has more than one device (the per-device table is shown).
func (r *Report) sharded() bool {
	for _, run := range r.Runs {
		if len(run.Devices) > 1 {
			return true
		}
	}
	return false
}

// perDevice returns the per-device table: a row per device of each run and its total.
func perDevice(r *Report) ([]string, [][]string) {
	h := []string{"policy", "device", "ops", "errors", "put MiB/s", "get MiB/s", "p50", "p99", "WAF", "source",
		"1st err s", "last err s", "last ok s"}
	var rows [][]string
	sec := func(v *float64) string {
		return optF(v, func(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) })
	}
	row := func(pol string, d DeviceRun) []string {
		return []string{pol, d.Device, strconv.FormatInt(d.Ops, 10), strconv.FormatInt(d.Errors, 10), f2(d.PutMiBs), f2(d.GetMiBs),
			us(d.P50Us), us(d.P99Us), optF(d.WAF, f3), d.WAFSource, sec(d.FirstError), sec(d.LastError), sec(d.LastOK)}
	}
	for _, run := range shown(r) {
		if len(run.Devices) < 2 {
			continue
		}
		for _, d := range run.Devices {
			rows = append(rows, row(run.Policy, d))
		}
		if t := run.DevicesTotal; t != nil {
			rows = append(rows, row(run.Policy, *t))
		}
	}
	return h, rows
}

// deviceErrorLine is the footer line naming the devices that failed, "" when none did.
func deviceErrorLine(r *Report) string {
	n, names := r.DeviceErrors()
	if n == 0 || !r.sharded() {
		return ""
	}
	return fmt.Sprintf("%d device errors (%v): those operations failed, the other devices went on serving", n, names)
}
