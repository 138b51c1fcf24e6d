package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rbctl/rbctl/reports"
)

// checkOutput says whether one output exists and parses: a report (schema rbctl.report with
// a modelled WAF in at least one run), a PNG, an SVG (well-formed XML with an svg root), or
// a non-empty text table.
func checkOutput(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return errEmpty
	}
	switch filepath.Ext(path) {
	case ".json":
		_, err := readReport(b)
		return err
	case ".png":
		_, err := png.DecodeConfig(bytes.NewReader(b))
		return err
	case ".svg":
		d := xml.NewDecoder(bytes.NewReader(b))
		root := ""
		for {
			t, err := d.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			if s, ok := t.(xml.StartElement); ok && root == "" {
				root = s.Name.Local
			}
		}
		if root != "svg" {
			return fmt.Errorf("root element %q, want svg", root)
		}
	case ".md", ".txt":
		if !strings.Contains(string(b), "|") {
			return errors.New("no table in it")
		}
	}
	return nil
}

func readReport(b []byte) (*reports.Report, error) {
	var r reports.Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	if r.Schema != reports.Schema {
		return nil, fmt.Errorf("schema %q, want %s", r.Schema, reports.Schema)
	}
	for _, run := range r.Runs {
		if run.HostWAF != nil || run.DeviceWAF != nil {
			return &r, nil
		}
	}
	return nil, errors.New("no run has a WAF")
}

// key names a run within a report: policy, sweep value, admission.
func key(run reports.Run) string {
	return fmt.Sprintf("%s|%g|%s", run.Policy, run.Param, run.Admission)
}

func wafOf(run reports.Run) (float64, bool) {
	if run.HostWAF != nil {
		return run.HostWAF.Value, true
	}
	return 0, false
}

// spreadRow is one run's WAF over a job's seeds.
type spreadRow struct {
	Job       string  `json:"job"`
	Policy    string  `json:"policy"`
	Param     float64 `json:"param,omitempty"`
	Admission string  `json:"admission,omitempty"`
	Seeds     int     `json:"seeds"`
	Mean      float64 `json:"mean"`
	Min       float64 `json:"min"`
	Max       float64 `json:"max"`
	SD        float64 `json:"sd"` // sample standard deviation
}

// writeSpread writes spread.json and spread.md: for every job run over several seeds, each
// policy's modelled WAF across them.
func writeSpread(runs []Run, out string) error {
	type acc struct {
		row  spreadRow
		vals []float64
	}
	by := map[string]*acc{}
	var order []string
	for _, r := range runs {
		if len(r.Job.Seeds) < 2 {
			continue
		}
		for _, o := range r.Outputs {
			if filepath.Ext(o) != ".json" {
				continue
			}
			b, err := os.ReadFile(filepath.Join(out, o))
			if err != nil {
				return err
			}
			rep, err := readReport(b)
			if err != nil {
				return fmt.Errorf("%s: %w", o, err)
			}
			add := func(k string, row spreadRow, v float64) {
				a := by[k]
				if a == nil {
					a = &acc{row: row}
					by[k] = a
					order = append(order, k)
				}
				a.vals = append(a.vals, v)
			}
			for _, run := range rep.Runs {
				if v, ok := wafOf(run); ok {
					add(r.Job.Name+"|"+key(run), spreadRow{Job: r.Job.Name, Policy: run.Policy, Param: run.Param, Admission: run.Admission}, v)
				}
			}
			// WAF by cause: each change's part (and the residual) over the seeds.
			for _, e := range rep.Explain {
				for _, s := range e.Steps {
					if s.Skipped == "" {
						pol := e.Policy + ": part of " + s.Change
						add(r.Job.Name+"|"+pol, spreadRow{Job: r.Job.Name, Policy: pol, Admission: e.Admission}, s.Part)
					}
				}
				pol := e.Policy + ": remaining"
				add(r.Job.Name+"|"+pol, spreadRow{Job: r.Job.Name, Policy: pol, Admission: e.Admission}, e.Residual)
			}
		}
	}
	if len(order) == 0 {
		return nil
	}
	sort.Strings(order)
	var rows []spreadRow
	var md strings.Builder
	md.WriteString("| job | policy (or part of WAF − 1) | admission | seeds | mean (modelled) | min | max | sd |\n|---|---|---|---|---|---|---|---|\n")
	for _, k := range order {
		a := by[k]
		row := a.row
		row.Seeds, row.Min, row.Max = len(a.vals), math.Inf(1), math.Inf(-1)
		for _, v := range a.vals {
			row.Mean += v / float64(len(a.vals))
			row.Min, row.Max = math.Min(row.Min, v), math.Max(row.Max, v)
		}
		for _, v := range a.vals {
			row.SD += (v - row.Mean) * (v - row.Mean)
		}
		if len(a.vals) > 1 {
			row.SD = math.Sqrt(row.SD / float64(len(a.vals)-1))
		}
		rows = append(rows, row)
		fmt.Fprintf(&md, "| %s | %s | %s | %d | %.3f | %.3f | %.3f | %.3f |\n", row.Job, row.Policy, row.Admission, row.Seeds, row.Mean, row.Min, row.Max, row.SD)
	}
	b, err := json.MarshalIndent(rows, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "spread.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "spread.md"), []byte(md.String()), 0o644)
}

// compareDirs compares every report of runs in out with the same file in ref: each run's
// modelled WAF must be within the job's tolerance (0: equal to 4 decimals).
func compareDirs(runs []Run, out, ref string) []string {
	var bad []string
	n, missing := 0, 0
	for _, r := range runs {
		for _, o := range r.Outputs {
			if filepath.Ext(o) != ".json" {
				continue
			}
			a, errA := os.ReadFile(filepath.Join(out, o))
			b, errB := os.ReadFile(filepath.Join(ref, o))
			if errors.Is(errB, os.ErrNotExist) {
				missing++ // a job the reference run did not have: nothing to compare
				continue
			}
			if errA != nil || errB != nil {
				bad = append(bad, fmt.Sprintf("compare %s: %v %v", o, errA, errB))
				continue
			}
			ra, errA := readReport(a)
			rb, errB := readReport(b)
			if errA != nil || errB != nil {
				bad = append(bad, fmt.Sprintf("compare %s: %v %v", o, errA, errB))
				continue
			}
			refW := map[string]float64{}
			for _, run := range rb.Runs {
				if v, ok := wafOf(run); ok {
					refW[key(run)] = v
				}
			}
			tol := math.Max(r.Job.Tolerance, 5e-4)
			for _, run := range ra.Runs {
				v, ok := wafOf(run)
				w, ok2 := refW[key(run)]
				if !ok || !ok2 {
					continue
				}
				n++
				if math.Abs(v-w) > tol {
					bad = append(bad, fmt.Sprintf("%s %s: WAF %.4f, reference %.4f (tolerance %g)", o, key(run), v, w, tol))
				}
			}
		}
	}
	fmt.Printf("compare: %d WAF figures against %s, %d outside tolerance; %d reports not in the reference\n", n, ref, len(bad), missing)
	return bad
}
