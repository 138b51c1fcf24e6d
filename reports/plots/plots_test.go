package plots

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rbctl/rbctl/reports"
	"github.com/rbctl/rbctl/workloads"
)

func TestAllWritesFigures(t *testing.T) {
	r := reports.New("bench")
	for i, p := range []string{"none", "cache-salt"} {
		run := reports.Run{Policy: p, HostWAF: &reports.WAF{Value: 2}}
		for s := 1; s <= 5; s++ {
			run.Timeline = append(run.Timeline, reports.Point{Seconds: reports.F64(float64(s)), PayloadBytes: int64(s) << 30,
				OpsPerSec: reports.F64(100 * float64(s+i)), WAF: reports.F64(1 + float64(s)/10), CumWAF: reports.F64(1 + float64(s)/20)})
		}
		run.RequestCDF = []reports.CDFPoint{{Us: 100, Fraction: 0.1}, {Us: 1000, Fraction: 0.9}, {Us: 5000, Fraction: 1}}
		r.Runs = append(r.Runs, run)
	}
	dir := t.TempDir()
	files, err := All(r, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 6 {
		t.Fatalf("wrote %v, want 3 figures × png+svg", files)
	}
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil || st.Size() < 1000 {
			t.Fatalf("%s: %v (%d bytes)", f, err, st.Size())
		}
	}
	r.Command, r.Sweep = "simulate", "util"
	for i := range r.Runs {
		r.Runs[i].Param = 0.5 + float64(i)/10
	}
	files, err = All(r, dir)
	if err != nil || len(files) != 2 || filepath.Base(files[0]) != "sweep-util.png" {
		t.Fatalf("sweep: %v %v", files, err)
	}
	if _, err := LatencyCDF(reports.New("bench"), dir); err != ErrNoData {
		t.Fatalf("empty report: %v, want ErrNoData", err)
	}
	// A failed run's partial figures are not drawn; simulate's timeline has no clock.
	r.Command, r.Sweep = "bench", ""
	r.Runs[0].Error = "format: device went away"
	r.Runs[1].Timeline = []reports.Point{{PayloadBytes: 1 << 30, WAF: reports.F64(1.2), CumWAF: reports.F64(1.2)}}
	r.Runs[1].RequestCDF = nil
	if _, err := Throughput(r, dir); err != ErrNoData {
		t.Fatalf("throughput of a failed run and a clockless one: %v, want ErrNoData", err)
	}
	if _, err := LatencyCDF(r, dir); err != ErrNoData {
		t.Fatalf("latency CDF of a failed run: %v, want ErrNoData", err)
	}
}

// A trace report draws the hit ratio over requests beside the WAF, one line per admission
// policy (the placements share it).
func TestTraceFigures(t *testing.T) {
	r := reports.New("simulate")
	r.Trace = &workloads.TraceStats{Requests: 100}
	for _, adm := range []string{"all", "second-hit"} {
		for _, p := range []string{"none", "cache-salt"} {
			run := reports.Run{Policy: p, Admission: adm, HostWAF: &reports.WAF{Value: 1}}
			for s := int64(1); s <= 5; s++ {
				run.Timeline = append(run.Timeline, reports.Point{PayloadBytes: s << 30, Requests: reports.I64(20 * s),
					HitRatio: reports.F64(float64(s) / 10), WAF: reports.F64(1), CumWAF: reports.F64(1)})
			}
			r.Runs = append(r.Runs, run)
		}
	}
	files, err := All(r, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 || filepath.Base(files[2]) != "hit-ratio-over-time.png" {
		t.Fatalf("wrote %v", files)
	}
	r.Trace = nil
	if files, _ = All(r, t.TempDir()); len(files) != 2 {
		t.Fatalf("without a trace: %v", files)
	}
}
