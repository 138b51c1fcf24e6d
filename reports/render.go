package reports

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/rbctl/rbctl/units"
)

// JSON writes the report as indented JSON.
func JSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func f3(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func us(v float64) string {
	switch {
	case v >= 1e6:
		return f2(v/1e6) + "s"
	case v >= 1e3:
		return f2(v/1e3) + "ms"
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + "us" // ASCII: "µ" is two bytes and ambiguous-width
}

// gibps formats a rate given in GB/s (10^9 B/s, as the JSON's _gbps fields carry it) in
// GiB/s: every size and rate in rbctl's text is binary (docs/cli.md, "Units").
func gibps(gbps float64) string { return f3(gbps * 1e9 / (1 << 30)) }

// GiB formats bytes in GiB.
func GiB(b int64) string { return f2(float64(b) / (1 << 30)) }

// Size is a size in its own unit ("2.0 MiB", "1.5 GiB"), for sizes that GiB with two
// decimals would show as 0.00 (reclaim units, small devices).
func Size(b int64) string { return units.FormatSize(b) }

func wafCell(w *WAF, steady bool) string {
	if w == nil {
		return "-"
	}
	v := w.Value
	if steady {
		v = w.Steady
	}
	if v == 0 {
		return "-"
	}
	return f3(v)
}

// modelCell is a run's modelled WAF cell: "no model" when the run says why it has none
// (Run.NoModel, printed as its note), else wafCell's.
func modelCell(r *Run, steady bool) string {
	if r.HostWAF == nil && r.NoModel != "" {
		return noModel
	}
	return wafCell(r.HostWAF, steady)
}

// noModel fills a modelled figure's cell when the shadow model could not run; the run's
// note says why and what would make it feasible.
const noModel = "no model"

func latOf(r *Run, op string) *Latency {
	for i := range r.Latency {
		if r.Latency[i].Op == op {
			return &r.Latency[i]
		}
	}
	return nil
}

// deviceWAFHeader names the device WAF column by where its figures came from, or "" when
// no run has one and the device has no FDP (the column is left out).
func deviceWAFHeader(r *Report) string {
	for _, run := range r.Runs {
		if run.DeviceWAF == nil {
			continue
		}
		switch run.DeviceWAF.Source {
		case SourceEmulatorModel:
			return "emulator WAF (model)"
		case SourceFDPStats:
			return "device WAF (FDP log)"
		}
		return "device WAF (" + run.DeviceWAF.Source + ")"
	}
	if r.Device.FDP {
		return "device WAF"
	}
	return ""
}

// shown is the runs a table lists: failed runs are reported under it instead.
func shown(r *Report) []Run {
	var out []Run
	for _, run := range r.Runs {
		if !run.Failed() {
			out = append(out, run)
		}
	}
	return out
}

func optF(v *float64, format func(float64) string) string {
	if v == nil {
		return "-"
	}
	return format(*v)
}

// summary returns the header and rows of the main comparison.
func summary(r *Report) ([]string, [][]string) {
	if r.Command == "simulate" {
		h := []string{"policy"}
		if r.Sweep != "" {
			h = append(h, r.Sweep) // sizes carry their unit in the cell (sweepCell)
		}
		adm := hasAdmission(r)
		if adm {
			h = append(h, "admission")
		}
		h = append(h, "hit %", "written GiB", "WAF (modelled)", "steady WAF", "live", "evicted", "expired")
		var rows [][]string
		for _, run := range shown(r) {
			row := []string{run.Policy}
			if r.Sweep != "" {
				row = append(row, sweepCell(r, run.Param))
			}
			if adm {
				row = append(row, cmp.Or(run.Admission, "all"))
			}
			row = append(row, f2(100*run.HitRatio), GiB(run.WrittenBytes), modelCell(&run, false),
				modelCell(&run, true), optF(run.Utilisation, f3), strconv.FormatInt(run.Evicted, 10),
				strconv.FormatInt(run.Expired, 10))
			rows = append(rows, row)
		}
		return h, rows
	}
	dev := deviceWAFHeader(r)
	// req p99.9 and max are in the latency table below; this one stays within 160 columns.
	h := []string{"policy", "ops/s", "read GiB/s", "write GiB/s", "hit %", "req p50", "req p99",
		"host WAF model", "steady"}
	if dev != "" {
		h = append(h, dev)
	}
	h = append(h, "dealloc GiB")
	var rows [][]string
	for _, run := range shown(r) {
		p50, p99 := "-", "-"
		if l := latOf(&run, "request"); l != nil {
			p50, p99 = us(l.P50Us), us(l.P99Us)
		}
		dealloc := "-"
		if run.DeallocatedBytes != nil {
			dealloc = GiB(*run.DeallocatedBytes)
		}
		row := []string{run.Policy, optF(run.OpsPerSec, func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }),
			optF(run.ReadGBps, gibps), optF(run.WriteGBps, gibps), f2(100 * run.HitRatio), p50, p99,
			modelCell(&run, false), modelCell(&run, true)}
		if dev != "" {
			row = append(row, wafCell(run.DeviceWAF, false))
		}
		rows = append(rows, append(row, dealloc))
	}
	return h, rows
}

// hasAdmission reports whether any run names its admission policy.
func hasAdmission(r *Report) bool {
	for _, run := range r.Runs {
		if run.Admission != "" {
			return true
		}
	}
	return false
}

// footer is what goes under the tables: each failed run's error, each run's note, the
// report's notes and, for an interrupted command, what the partial result covers.
func footer(r *Report) []string {
	var out []string
	for _, run := range r.Runs {
		if run.Failed() {
			out = append(out, fmt.Sprintf("error (%s): %s", run.Policy, oneLine(run.Error)))
		}
	}
	for _, run := range r.Runs {
		if run.Note != "" {
			name := run.Policy
			if r.Sweep != "" {
				name += " @ " + r.Sweep + "=" + strconv.FormatFloat(run.Param, 'g', 4, 64)
			}
			out = append(out, fmt.Sprintf("note (%s): %s", name, run.Note))
		}
	}
	if line := deviceErrorLine(r); line != "" {
		out = append(out, line)
	}
	if r.Trace != nil {
		out = append(out, "note: "+traceNote(r))
	}
	if h, rows := queueDepth(r); len(rows) > 0 && h != nil {
		out = append(out, "note: "+queueNote)
	}
	for _, n := range r.Notes {
		out = append(out, "note: "+n)
	}
	if line := hostLine(r); line != "" {
		out = append(out, line)
	}
	if r.Interrupted {
		out = append(out, "interrupted: partial result ("+r.Partial+")")
	}
	return out
}

// hostLine says what machine a bench ran on and its load around each run ("" without Host).
func hostLine(r *Report) string {
	h := r.Host
	if h == nil {
		return ""
	}
	s := fmt.Sprintf("host: %d CPUs (GOMAXPROCS %d)", h.CPUs, h.GOMAXPROCS)
	if h.Kernel != "" {
		s += ", Linux " + h.Kernel
	}
	var loads []string
	notRead := func(l string) string {
		if l == "" {
			return "not read"
		}
		return l
	}
	for _, run := range r.Runs {
		if run.LoadStart != "" || run.LoadEnd != "" {
			loads = append(loads, fmt.Sprintf("%s %s → %s", run.Policy, notRead(run.LoadStart), notRead(run.LoadEnd)))
		}
	}
	if len(loads) > 0 {
		s += "; load average (1, 5, 15 min) at each run's start → end: " + strings.Join(loads, ", ")
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// latencies returns the per-operation latency table.
func latencies(r *Report) ([]string, [][]string) {
	h := []string{"policy", "op", "count", "mean", "p50", "p99", "p99.9", "max"}
	var rows [][]string
	for _, run := range shown(r) {
		for _, l := range run.Latency {
			rows = append(rows, []string{run.Policy, l.Op, strconv.FormatInt(l.Count, 10), us(l.MeanUs), us(l.P50Us),
				us(l.P99Us), us(l.P999Us), us(l.MaxUs)})
		}
	}
	return h, rows
}

// perHandle returns the per-handle breakdown of each run's modelled WAF.
func perHandle(r *Report) ([]string, [][]string) {
	h := []string{"policy", "handle", "holds", "host share %", "host GiB", "relocated GiB", "WAF (modelled)"}
	var rows [][]string
	for _, run := range shown(r) {
		if run.HostWAF == nil {
			continue
		}
		name := run.Policy
		if r.Sweep != "" {
			name += " @ " + r.Sweep + "=" + strconv.FormatFloat(run.Param, 'g', 4, 64)
		}
		for _, hw := range run.HostWAF.Handles {
			waf := "-"
			if hw.WAF > 0 {
				waf = f3(hw.WAF)
			}
			label := hw.Label
			if label == "" {
				label = "-"
			}
			rows = append(rows, []string{name, strconv.Itoa(hw.Handle), label, f2(100 * hw.HostShare), GiB(int64(hw.HostBytes)),
				GiB(int64(hw.RelocatedBytes)), waf})
		}
	}
	return h, rows
}

func renderTable(w io.Writer, h []string, rows [][]string) error {
	t := NewTable(w)
	t.Header(h)
	if err := t.Bulk(rows); err != nil {
		return err
	}
	return t.Render()
}

// workloadName is the workload, with its eviction when that is not the default LRU.
func workloadName(r *Report) string {
	switch wl := r.Workload; {
	case wl.RegionSlots > 0:
		return fmt.Sprintf("%s (%s eviction, %.1f chunks per region)", wl.Name, wl.Eviction, wl.RegionSlots)
	case wl.Eviction != "" && wl.Eviction != "lru":
		return fmt.Sprintf("%s (%s eviction)", wl.Name, wl.Eviction)
	}
	return r.Workload.Name
}

// Table writes the human-readable comparison (and per-op latencies for bench).
func Table(w io.Writer, r *Report) error {
	if err := WriteWrapped(w, fmt.Sprintf("%s on %s (%s), workload %s, %s", r.Command, deviceName(r), r.Device.Kind, workloadName(r), r.Window.Description)); err != nil {
		return err
	}
	if r.Trace != nil {
		if err := WriteWrapped(w, traceLine(r)); err != nil {
			return err
		}
	}
	h, rows := summary(r)
	if err := renderTable(w, h, rows); err != nil {
		return err
	}
	if h, rows = perTrace(r); len(rows) > 0 {
		if err := renderTable(w, h, rows); err != nil {
			return err
		}
	}
	if r.Command == "bench" {
		h, rows = latencies(r)
		if len(rows) > 0 {
			if err := renderTable(w, h, rows); err != nil {
				return err
			}
		}
		for _, tab := range []func(*Report) ([]string, [][]string){queueDepth, queueOverTime} {
			if h, rows = tab(r); len(rows) > 0 {
				if err := renderTable(w, h, rows); err != nil {
					return err
				}
			}
		}
	}
	if r.PerHandle {
		if h, rows = perHandle(r); len(rows) > 0 {
			if err := renderTable(w, h, rows); err != nil {
				return err
			}
		}
	}
	if h, rows = perDevice(r); len(rows) > 0 {
		if err := renderTable(w, h, rows); err != nil {
			return err
		}
	}
	if h, rows = perTenant(r); len(rows) > 0 {
		if err := renderTable(w, h, rows); err != nil {
			return err
		}
	}
	if err := explainTables(w, r, false); err != nil {
		return err
	}
	if err := driveTables(w, r, false); err != nil {
		return err
	}
	for _, line := range footer(r) {
		if err := WriteWrapped(w, line); err != nil {
			return err
		}
	}
	return nil
}

func deviceName(r *Report) string {
	if r.Device.Path != "" {
		return r.Device.Path
	}
	if r.Sweep == "size" {
		return "a model of each swept size"
	}
	return "a " + units.FormatHuman(r.Device.SizeBytes) + " model"
}

// Markdown writes the comparison as GitHub-flavoured Markdown tables.
func Markdown(w io.Writer, r *Report) error {
	md := func(h []string, rows [][]string) {
		fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(h, " | "), strings.Repeat("---|", len(h)))
		for _, row := range rows {
			for i := range row {
				row[i] = strings.ReplaceAll(row[i], "|", "\\|")
			}
			fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
		}
	}
	fmt.Fprintf(w, "%s on %s (%s), workload %s, %s\n\n", r.Command, deviceName(r), r.Device.Kind, workloadName(r), r.Window.Description)
	if r.Trace != nil {
		fmt.Fprintf(w, "%s\n\n", traceLine(r))
	}
	md(summary(r))
	if h, rows := perTrace(r); len(rows) > 0 {
		fmt.Fprintln(w)
		md(h, rows)
	}
	if r.Command == "bench" {
		if h, rows := latencies(r); len(rows) > 0 {
			fmt.Fprintln(w)
			md(h, rows)
		}
	}
	if r.PerHandle {
		if h, rows := perHandle(r); len(rows) > 0 {
			fmt.Fprintln(w)
			md(h, rows)
		}
	}
	if h, rows := perDevice(r); len(rows) > 0 {
		fmt.Fprintln(w)
		md(h, rows)
	}
	if h, rows := perTenant(r); len(rows) > 0 {
		fmt.Fprintln(w)
		md(h, rows)
	}
	if err := explainTables(w, r, true); err != nil {
		return err
	}
	if err := driveTables(w, r, true); err != nil {
		return err
	}
	for _, line := range footer(r) {
		fmt.Fprintf(w, "\n_%s_\n", line)
	}
	return nil
}

// CSV writes one row per run with every scalar field (latency columns per op).
func CSV(w io.Writer, r *Report) error {
	cw := csv.NewWriter(w)
	h := []string{"command", "policy", "param", "ops", "requests", "elapsed_seconds", "ops_per_sec", "read_bytes", "written_bytes",
		"read_gbps", "write_gbps", "hit_ratio", "host_waf", "host_waf_steady", "device_waf", "device_waf_source", "deallocated_bytes",
		"evicted", "expired", "store_failed", "utilisation", "infeasible", "interrupted", "error",
		"admission", "tokens_saved", "token_hit_ratio", "flash_bytes_per_token_saved"}
	ops := []string{"request", "lookup", "load", "store", "delete"}
	for _, op := range ops {
		h = append(h, op+"_p50_us", op+"_p99_us", op+"_p999_us", op+"_max_us")
	}
	if err := cw.Write(h); err != nil {
		return err
	}
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	opt := func(v *float64) string { // not measured: an empty cell, never 0
		if v == nil {
			return ""
		}
		return g(*v)
	}
	for _, run := range r.Runs {
		hw, hs, dw, ds, dealloc := "", "", "", "", ""
		if run.HostWAF != nil {
			hw, hs = g(run.HostWAF.Value), g(run.HostWAF.Steady)
		}
		if run.DeviceWAF != nil {
			dw, ds = g(run.DeviceWAF.Value), run.DeviceWAF.Source
		}
		if run.DeallocatedBytes != nil {
			dealloc = strconv.FormatInt(*run.DeallocatedBytes, 10)
		}
		row := []string{r.Command, run.Policy, g(run.Param), strconv.FormatInt(run.Ops, 10), strconv.FormatInt(run.Requests, 10),
			g(run.ElapsedSec), opt(run.OpsPerSec), strconv.FormatInt(run.ReadBytes, 10), strconv.FormatInt(run.WrittenBytes, 10),
			opt(run.ReadGBps), opt(run.WriteGBps), g(run.HitRatio), hw, hs, dw, ds, dealloc,
			strconv.FormatInt(run.Evicted, 10), strconv.FormatInt(run.Expired, 10), strconv.FormatInt(run.StoreFailed, 10),
			optF(run.Utilisation, g), strconv.FormatBool(run.Infeasible), strconv.FormatBool(run.Interrupted), oneLine(run.Error), run.Admission, "", "", ""}
		if t := run.Trace; t != nil {
			row[len(row)-3], row[len(row)-2] = strconv.FormatInt(t.TokensSaved, 10), g(t.TokenHitRatio)
			if v, _, ok := run.FlashPerToken(); ok {
				row[len(row)-1] = g(v)
			}
		}
		for _, op := range ops {
			if l := latOf(&run, op); l != nil {
				row = append(row, g(l.P50Us), g(l.P99Us), g(l.P999Us), g(l.MaxUs))
			} else {
				row = append(row, "", "", "", "")
			}
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// Write renders r in format: table (default), json, csv or markdown.
func Write(w io.Writer, r *Report, format string) error {
	switch format {
	case "", "table":
		return Table(w, r)
	case "json":
		return JSON(w, r)
	case "csv":
		return CSV(w, r)
	case "markdown", "md":
		return Markdown(w, r)
	}
	return fmt.Errorf("unknown output format %q (table, json, csv, markdown)", format)
}

// Count is n and the noun for it: "1 entry", "2 entries", "0 entries".
func Count(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.FormatInt(n, 10) + " " + many
}
