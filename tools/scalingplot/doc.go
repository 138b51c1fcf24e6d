package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// Doc is docs/scaling.json: every measured run (host, VM) and the saturation points derived
// from them.
type Doc struct {
	Schema        string      `json:"schema"`
	SchemaVersion int         `json:"schema_version"`
	Generated     string      `json:"generated"`
	Method        string      `json:"method"`
	Runs          []Run       `json:"runs"`
	Saturation    []Saturated `json:"saturation"`
}

// Saturated is the first point of a run's kind, by device count, at which the busy cores
// reached saturatedFrac of the cores there are.
type Saturated struct {
	Where     string  `json:"where"`
	Kind      string  `json:"kind"`
	Devices   int     `json:"devices"`
	BusyCores float64 `json:"busy_cores"`
	Cores     int     `json:"cores"`
}

const (
	schema = "rbctl.scaling"
	// saturatedFrac: busy cores / cores at which the CPU counts as saturated.
	saturatedFrac = 0.8
	method        = "rbctl bench over 1, 2 and 4 devices of a kind as one sharded cache (--shard-by hash): " +
		"uniform workload, 256 KiB values, half gets, 4 workers per device, queue depth 32, io_uring, no warm-up, " +
		"one key space for every point (3/4 of one device's slots); put/get MiB/s are payload bytes over the measured window; busy_cores is every core's " +
		"busy time over that window (/proc/stat), proc_cores rbctl's own threads (/proc/PID/stat), busy_before every core's " +
		"busy time in the second before the bench (other work); " +
		"cpu_s_per_gib = busy CPU seconds per GiB put + got (scripts/vmtest/guest.d/80-scaling.sh)"
)

// Merge keeps, for each place (vm, host), the last fresh run with points, and the previous
// document's run for a place not measured this time.
func Merge(fresh, prev []Run) []Run {
	by := map[string]Run{}
	for _, r := range prev {
		if len(r.Points) > 0 {
			by[r.Where] = r
		}
	}
	for _, r := range fresh {
		if len(r.Points) > 0 {
			by[r.Where] = r
		}
	}
	var out []Run
	for _, w := range []string{"host", "vm"} {
		if r, ok := by[w]; ok {
			sortPoints(r.Points)
			out = append(out, r)
		}
	}
	return out
}

func sortPoints(ps []Point) {
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].Kind != ps[j].Kind {
			return ps[i].Kind < ps[j].Kind
		}
		return ps[i].Devices < ps[j].Devices
	})
}

// kinds lists a run's device kinds in order of first appearance.
func kinds(r Run) []string {
	var out []string
	for _, p := range r.Points {
		found := false
		for _, k := range out {
			found = found || k == p.Kind
		}
		if !found {
			out = append(out, p.Kind)
		}
	}
	return out
}

// pointsOf returns a run's points of one kind, by device count.
func pointsOf(r Run, kind string) []Point {
	var out []Point
	for _, p := range r.Points {
		if p.Kind == kind {
			out = append(out, p)
		}
	}
	sortPoints(out)
	return out
}

// Saturation finds, per run and kind, the first point whose busy cores reached
// saturatedFrac of the run's cores; kinds that never got there are absent.
func Saturation(runs []Run) []Saturated {
	out := []Saturated{}
	for _, r := range runs {
		for _, k := range kinds(r) {
			for _, p := range pointsOf(r, k) {
				if p.BusyCores >= saturatedFrac*float64(r.Cores) {
					out = append(out, Saturated{Where: r.Where, Kind: k, Devices: p.Devices, BusyCores: p.BusyCores, Cores: r.Cores})
					break
				}
			}
		}
	}
	return out
}

// NewDoc builds the document of runs.
func NewDoc(runs []Run, generated string) Doc {
	return Doc{Schema: schema, SchemaVersion: 1, Generated: generated, Method: method, Runs: runs, Saturation: Saturation(runs)}
}

// ReadDoc reads a previous docs/scaling.json; a missing file is no runs.
func ReadDoc(path string) ([]Run, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var d Doc
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if d.Schema != schema {
		return nil, fmt.Errorf("%s: schema %q, want %q", path, d.Schema, schema)
	}
	return d.Runs, nil
}

// WriteTable prints the points as a Markdown table (docs/scaling.md).
func WriteTable(w io.Writer, runs []Run) error {
	var b strings.Builder
	b.WriteString("| where | kind | devices | workers | put MiB/s | get MiB/s | total MiB/s | × 1 device | ops/s | hit ratio | busy cores | rbctl cores | busy before | CPU s/GiB |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range runs {
		where := r.Where
		if r.Where == "vm" {
			where = "vm (" + r.Accel + ")"
		}
		for _, k := range kinds(r) {
			ps := pointsOf(r, k)
			base := 0.0
			for _, p := range ps {
				tot := p.PutMiBs + p.GetMiBs
				if p.Devices == 1 {
					base = tot
				}
				speedup := "–"
				if base > 0 {
					speedup = fmt.Sprintf("%.2f", tot/base)
				}
				fmt.Fprintf(&b, "| %s | %s | %d | %d | %.0f | %.0f | %.0f | %s | %.0f | %.2f | %.2f of %d | %.2f | %.2f | %.2f |\n",
					where, k, p.Devices, p.Workers, p.PutMiBs, p.GetMiBs, tot, speedup, p.OpsS, p.HitRatio, p.BusyCores, r.Cores, p.ProcCores, p.BusyBefore, p.CPUSPerGiB)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
