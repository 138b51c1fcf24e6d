package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/reports"
)

// simulate --explain and --drive from the command line: the JSON carries the explanation
// (parts summing to WAF − 1) and the projection, --plot draws the waf-by-cause figure, and
// the text table labels both.
func TestSimulateExplainAndDrive(t *testing.T) {
	dir := t.TempDir()
	args := []string{"simulate", "--device-size", "1G", "--model", "tiny", "--placement", "none", "--util", "0.95",
		"--measure", "1", "--explain", "--drive", "dwpd=1,years=5,req-rate=10", "--plot", dir}
	out, err := runCLI(t, append(args, "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	var r reports.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(r.Explain) != 1 || len(r.DriveLife) != 1 || r.DriveLife[0].LifeDays == nil || r.Drive.Capacity != 1<<30 {
		t.Fatalf("explain %+v, drive %+v %+v", r.Explain, r.Drive, r.DriveLife)
	}
	e := r.Explain[0]
	sum := e.Residual
	for _, s := range e.Steps {
		sum += s.Part
	}
	if d := sum - (e.WAF - 1); d > 1e-9 || d < -1e-9 {
		t.Errorf("parts + residual %.9f, WAF − 1 %.9f", sum, e.WAF-1)
	}
	if _, err := os.Stat(filepath.Join(dir, "waf-by-cause.svg")); err != nil {
		t.Error(err)
	}
	text, err := runCLI(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"WAF by cause, none", "Causes interact", "drive life (projection)", "modelled"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q", want)
		}
	}
}

func TestExplainAndDriveFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"simulate", "--explain=everything"},
		{"simulate", "--explain", "--sweep", "util=0.5:0.9:0.1", "--device-size", "1G", "--model", "tiny"},
		{"simulate", "--drive", "tbw=0"},
		{"simulate", "--drive", "dwpd=1"},
		{"simulate", "--drive", "tbw=10,dwpd=1,years=5"},
		{"simulate", "--slot-reuse", "sometimes"},
		{"bench", "mem:64M", "--drive", "years=5"},
		{"bench", "mem:64M", "--explain=both"},
		{"cluster-bench", "--drive", "tbw=x"},
	} {
		if _, err := runCLI(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// A change that works alone but not with another (here the halved RU is smaller than one
// slot once eviction is by region) is skipped by shapley as by sequential, with the reason
// and the change it fails with, instead of failing the whole explanation.
func TestShapleySkipsAChangeThatFailsInACombination(t *testing.T) {
	for _, method := range []string{"sequential", "shapley"} {
		out, err := runCLI(t, "simulate", "--device-size", "32G", "--placement", "cache-salt", "--explain="+method, "--json")
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		var r reports.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Explain) != 1 {
			t.Fatalf("%s: %v, %d explanations", method, err, len(r.Explain))
		}
		e := r.Explain[0]
		var ru *reports.ExplainStep
		for i, s := range e.Steps {
			if strings.HasPrefix(s.Change, "--ru ") {
				ru = &e.Steps[i]
			}
		}
		if ru == nil || !strings.Contains(ru.Skipped, "smaller than one") || ru.Alone == nil {
			t.Fatalf("%s: the RU step %+v, want skipped as infeasible with region eviction, its alone WAF kept", method, ru)
		}
		if method == "shapley" && !strings.HasPrefix(ru.Skipped, "with --eviction region, ") {
			t.Errorf("shapley: skipped %q does not name the change it fails with", ru.Skipped)
		}
		sum := e.Residual
		for _, s := range e.Steps {
			sum += s.Part
		}
		if d := sum - (e.WAF - 1); d > 1e-9 || d < -1e-9 {
			t.Errorf("%s: parts + residual %.9f, WAF − 1 %.9f", method, sum, e.WAF-1)
		}
	}
}
