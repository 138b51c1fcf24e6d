package reports

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
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
	return strconv.FormatFloat(v, 'f', 0, 64) + "µs"
}

// GiB formats bytes in GiB.
func GiB(b int64) string { return f2(float64(b) / (1 << 30)) }

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

func latOf(r *Run, op string) *Latency {
	for i := range r.Latency {
		if r.Latency[i].Op == op {
			return &r.Latency[i]
		}
	}
	return nil
}

// summary returns the header and rows of the main comparison.
func summary(r *Report) ([]string, [][]string) {
	if r.Command == "simulate" {
		h := []string{"policy"}
		if r.Sweep == "ru" {
			h = append(h, "ru GiB")
		} else if r.Sweep != "" {
			h = append(h, r.Sweep)
		}
		h = append(h, "hit %", "written GiB", "WAF (modelled)", "steady WAF", "live", "evicted", "expired", "note")
		var rows [][]string
		for _, run := range r.Runs {
			row := []string{run.Policy}
			if r.Sweep == "ru" {
				row = append(row, GiB(int64(run.Param)))
			} else if r.Sweep != "" {
				row = append(row, f2(run.Param))
			}
			note := ""
			if run.Infeasible {
				note = "infeasible"
			}
			if run.Note != "" {
				note = strings.TrimPrefix(note+"; "+run.Note, "; ")
			}
			if run.Error != "" {
				note = strings.TrimPrefix(note+"; error: "+run.Error, "; ")
			}
			row = append(row, f2(100*run.HitRatio), GiB(run.WrittenBytes), wafCell(run.HostWAF, false),
				wafCell(run.HostWAF, true), f3(run.Utilisation), strconv.FormatInt(run.Evicted, 10),
				strconv.FormatInt(run.Expired, 10), note)
			rows = append(rows, row)
		}
		return h, rows
	}
	h := []string{"policy", "ops/s", "read GB/s", "write GB/s", "hit %", "req p50", "req p99", "req p99.9", "req max",
		"host WAF (modelled)", "steady", "device WAF", "dealloc GiB"}
	var rows [][]string
	for _, run := range r.Runs {
		p50, p99, p999, pmax := "-", "-", "-", "-"
		if l := latOf(&run, "request"); l != nil {
			p50, p99, p999, pmax = us(l.P50Us), us(l.P99Us), us(l.P999Us), us(l.MaxUs)
		}
		name := run.Policy
		if run.Error != "" {
			name += " (error: " + run.Error + ")"
		}
		rows = append(rows, []string{name, strconv.FormatFloat(run.OpsPerSec, 'f', 0, 64), f3(run.ReadGBps), f3(run.WriteGBps),
			f2(100 * run.HitRatio), p50, p99, p999, pmax, wafCell(run.HostWAF, false), wafCell(run.HostWAF, true),
			wafCell(run.DeviceWAF, false), GiB(run.DeallocatedBytes)})
	}
	return h, rows
}

// latencies returns the per-operation latency table.
func latencies(r *Report) ([]string, [][]string) {
	h := []string{"policy", "op", "count", "mean", "p50", "p99", "p99.9", "max"}
	var rows [][]string
	for _, run := range r.Runs {
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
	for _, run := range r.Runs {
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
	t := tablewriter.NewTable(w, tablewriter.WithHeaderAutoFormat(tw.Off))
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
	fmt.Fprintf(w, "%s on %s (%s), workload %s, %s\n", r.Command, deviceName(r), r.Device.Kind, workloadName(r), r.Window.Description)
	h, rows := summary(r)
	if err := renderTable(w, h, rows); err != nil {
		return err
	}
	if r.Command == "bench" {
		h, rows = latencies(r)
		if len(rows) > 0 {
			if err := renderTable(w, h, rows); err != nil {
				return err
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
	for _, run := range r.Runs {
		if r.Command == "bench" && run.Note != "" {
			fmt.Fprintf(w, "note (%s): %s\n", run.Policy, run.Note)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	return nil
}

func deviceName(r *Report) string {
	if r.Device.Path != "" {
		return r.Device.Path
	}
	return fmt.Sprintf("a %s GiB model", GiB(r.Device.SizeBytes))
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
	md(summary(r))
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
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\n_%s_\n", n)
	}
	return nil
}

// CSV writes one row per run with every scalar field (latency columns per op).
func CSV(w io.Writer, r *Report) error {
	cw := csv.NewWriter(w)
	h := []string{"command", "policy", "param", "ops", "requests", "elapsed_sec", "ops_per_sec", "read_bytes", "written_bytes",
		"read_gbps", "write_gbps", "hit_ratio", "host_waf", "host_waf_steady", "device_waf", "deallocated_bytes",
		"evicted", "expired", "store_failed", "utilisation", "infeasible"}
	ops := []string{"request", "lookup", "load", "store", "delete"}
	for _, op := range ops {
		h = append(h, op+"_p50_us", op+"_p99_us", op+"_p999_us", op+"_max_us")
	}
	if err := cw.Write(h); err != nil {
		return err
	}
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	for _, run := range r.Runs {
		hw, hs, dw := "", "", ""
		if run.HostWAF != nil {
			hw, hs = g(run.HostWAF.Value), g(run.HostWAF.Steady)
		}
		if run.DeviceWAF != nil {
			dw = g(run.DeviceWAF.Value)
		}
		row := []string{r.Command, run.Policy, g(run.Param), strconv.FormatInt(run.Ops, 10), strconv.FormatInt(run.Requests, 10),
			g(run.ElapsedSec), g(run.OpsPerSec), strconv.FormatInt(run.ReadBytes, 10), strconv.FormatInt(run.WrittenBytes, 10),
			g(run.ReadGBps), g(run.WriteGBps), g(run.HitRatio), hw, hs, dw, strconv.FormatInt(run.DeallocatedBytes, 10),
			strconv.FormatInt(run.Evicted, 10), strconv.FormatInt(run.Expired, 10), strconv.FormatInt(run.StoreFailed, 10),
			g(run.Utilisation), strconv.FormatBool(run.Infeasible)}
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
