package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/reports"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	r := reports.New("simulate")
	one := reports.Run{Policy: "none", HostWAF: &reports.WAF{Value: 1.5}}
	for i := 1; i <= 3; i++ {
		one.Timeline = append(one.Timeline, reports.Point{PayloadBytes: int64(i) << 30, CumWAF: reports.F64(1 + float64(i)/10)})
	}
	r.Runs = []reports.Run{one}
	saved := filepath.Join(dir, "simulate.json")
	if err := reports.SaveJSON(saved, r); err != nil {
		t.Fatal(err)
	}
	files, err := run(saved, filepath.Join(dir, "figs"))
	if err != nil || len(files) != 2 || filepath.Base(files[0]) != "waf-over-time.png" {
		t.Fatalf("%v %v", files, err)
	}
	for name, body := range map[string]string{
		"other.json":       `{"schema": "rbctl.scaling"}`,
		"broken.json":      `{"schema": `,
		"interrupted.json": `{"schema": "rbctl.report", "interrupted": true}`,
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if files, err := run(p, dir); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v %v, want an error naming the file", name, files, err)
		}
	}
}
