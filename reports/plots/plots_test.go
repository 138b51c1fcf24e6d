package plots

import (
	"bytes"
	"fmt"
	"image"
	_ "image/png"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

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

// demoReport is shaped like `make demo`'s bench report: cumulative WAF rising from 1.00 to
// 1.12 (none) and to 1.003 (cache-salt), throughput swinging 0–800 ops/s per 0.1 s interval.
func demoReport() *reports.Report {
	r := reports.New("bench")
	for i, p := range []string{"none", "cache-salt"} {
		run := reports.Run{Policy: p, HostWAF: &reports.WAF{Value: 1.1}}
		for s := 1; s <= 50; s++ {
			waf := 1 + 0.12*float64(s)/50
			if i == 1 {
				waf = 1 + 0.003*float64(s)/50
			}
			ops := 400 + 400*math.Sin(float64(s*(i+3)))
			run.Timeline = append(run.Timeline, reports.Point{Seconds: reports.F64(0.1 * float64(s)), PayloadBytes: int64(s) << 28,
				OpsPerSec: reports.F64(ops), CumWAF: reports.F64(waf)})
		}
		run.RequestCDF = []reports.CDFPoint{{Us: 4, Fraction: 0.01}, {Us: 1000, Fraction: 0.05}, {Us: 8000, Fraction: 0.7}, {Us: 250000, Fraction: 1}}
		r.Runs = append(r.Runs, run)
	}
	return r
}

// measuredReport is demoReport with a warm-up of 2 GiB and the WAF of the window after it.
func measuredReport() *reports.Report {
	r := demoReport()
	r.Window.WarmupBytes = reports.I64(2 << 30)
	for i := range r.Runs {
		for j, pt := range r.Runs[i].Timeline {
			if pt.PayloadBytes > 2<<30 {
				r.Runs[i].Timeline[j].MeasuredWAF = reports.F64(1 + (*pt.CumWAF-1)*0.6)
			}
		}
	}
	return r
}

func joined(ticks []plot.Tick) string { return strings.Join(labels(majors(ticks)), " ") }

// Every figure kind: distinct tick labels on both axes, axes from where the figure says,
// the legend beside the data, and a PNG and an SVG of the expected size.
func TestFigureKinds(t *testing.T) {
	r := demoReport()
	sw := reports.New("simulate")
	sw.Sweep = "util"
	for i, p := range []string{"none", "cache-salt"} {
		for u := 50; u <= 95; u += 5 {
			sw.Runs = append(sw.Runs, reports.Run{Policy: p, Param: float64(u) / 100, HostWAF: &reports.WAF{Value: 1 + float64(u-50)/100/float64(i+1)}})
		}
	}
	cases := []struct {
		name   string
		build  func(*reports.Report) (*Figure, error)
		r      *reports.Report
		x, y   string // the labelled ticks
		legend string
	}{
		{"waf-over-time", wafOverTime, r, "0 2 4 6 8 10 12", "1.00 1.02 1.04 1.06 1.08 1.10 1.12", "none, cache-salt"},
		// With a measured window: its WAF (ending at the table's), the warm-up's end marked.
		{"waf-measured", wafOverTime, measuredReport(), "0 2 4 6 8 10 12", "1.00 1.02 1.04 1.06",
			"none, cache-salt, faint: warm-up, cumulative (not in the tables), warm-up ends: the tables' window starts"},
		// The origin's 0 is labelled once, on y.
		{"throughput", throughput, r, "1 2 3 4 5", "0 200 400 600 800", "none, cache-salt, faint: each 0.1 s interval"},
		{"latency-cdf", latencyCDF, r, "10 µs 100 µs 1 ms 10 ms 100 ms", "0.0 0.2 0.4 0.6 0.8 1.0", "none, cache-salt"},
		{"sweep-util", sweep, sw, "0.5 0.6 0.7 0.8 0.9", "1.0 1.1 1.2 1.3 1.4", "none, cache-salt"},
	}
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := c.build(c.r)
			if err != nil {
				t.Fatal(err)
			}
			x, y := f.AxisTicks()
			checkLabels(t, "x", x)
			checkLabels(t, "y", y)
			if got := joined(x); got != c.x {
				t.Errorf("x labels %q, want %q", got, c.x)
			}
			if got := joined(y); got != c.y {
				t.Errorf("y labels %q, want %q", got, c.y)
			}
			if got := strings.Join(f.Legend(), ", "); got != c.legend {
				t.Errorf("legend %q, want %q", got, c.legend)
			}
			// The legend's strip starts right of the data area.
			strip := f.LegendWidth()
			img := vgimg.New(Width+strip, Height)
			pa, la := f.Layout(draw.New(img), strip)
			if data := f.Plot.DataCanvas(pa); la.Min.X < data.Max.X || la.Max.X-la.Min.X < strip-vg.Points(2*legendGap) {
				t.Errorf("legend strip %v overlaps the data %v", la.Rectangle, data.Rectangle)
			}
			files, err := f.Save(dir, c.name)
			if err != nil || len(files) != 2 {
				t.Fatalf("%v %v", files, err)
			}
			png, err := os.Open(files[0])
			if err != nil {
				t.Fatal(err)
			}
			defer png.Close()
			cfg, _, err := image.DecodeConfig(png)
			if err != nil {
				t.Fatal(err)
			}
			if want := (Width + strip).Dots(vgimg.DefaultDPI); math.Abs(float64(cfg.Width)-want) > 1 || cfg.Width <= cfg.Height {
				t.Errorf("PNG %d×%d, want %.0f wide", cfg.Width, cfg.Height, want)
			}
			svg, err := os.ReadFile(files[1])
			if err != nil || !bytes.Contains(svg, []byte("<svg")) {
				t.Errorf("%s: not an SVG (%v)", files[1], err)
			}
		})
	}
	// The throughput axis names its window.
	f, err := throughput(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Plot.Y.Label.Text; got != "ops/s, mean of a rolling 1 s window" {
		t.Errorf("throughput y label %q", got)
	}
}

func TestRollingMean(t *testing.T) {
	xy := plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 10}, {X: 2, Y: 0}, {X: 3, Y: 10}, {X: 4, Y: 0}}
	got := RollingMean(xy, 2) // each point and its neighbours
	want := []float64{5, 10.0 / 3, 20.0 / 3, 10.0 / 3, 5}
	for i := range got {
		if got[i].X != xy[i].X || math.Abs(got[i].Y-want[i]) > 1e-12 {
			t.Fatalf("RollingMean = %v, want Ys %v", got, want)
		}
	}
	if same := RollingMean(xy, 0); same[1].Y != 10 || same[2].Y != 0 {
		t.Fatalf("a zero window changed the series: %v", same)
	}
	for _, c := range []struct {
		every, span, window float64
	}{{0.1, 5, 1}, {0.1003, 6.7, 1}, {1, 300, 50}, {1, 20, 10}, {0.25, 2, 1}} {
		var s plotter.XYs
		for x := 0.0; x <= c.span+1e-9; x += c.every {
			s = append(s, plotter.XY{X: x})
		}
		w, iv := SmoothingWindow([]plotter.XYs{s, nil})
		if math.Abs(w-c.window) > 1e-9 || math.Abs(iv-c.every) > 1e-9 {
			t.Errorf("every %v s over %v s: window %v interval %v, want %v %v", c.every, c.span, w, iv, c.window, c.every)
		}
	}
}

func TestSaveGrid(t *testing.T) {
	r := demoReport()
	a, err := wafOverTime(r)
	if err != nil {
		t.Fatal(err)
	}
	b, err := throughput(r)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "grid.png")
	if err := SaveGrid(path, [][]*Figure{{a, b}}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, _, err := image.DecodeConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	// Two figures side by side, each with the wider (throughput's) legend strip.
	if want := (2*(Width+b.LegendWidth()) + 2*gridPad).Dots(vgimg.DefaultDPI); math.Abs(float64(cfg.Width)-want) > 1 {
		t.Errorf("grid %d wide, want %.0f", cfg.Width, want)
	}
	if err := SaveGrid(path, [][]*Figure{{a, b}, {a}}); err == nil {
		t.Error("a ragged grid: want an error")
	}
	if err := SaveGrid(filepath.Join(dir, "grid.bmp"), [][]*Figure{{a}}); err == nil {
		t.Error("an unknown format: want an error")
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

// An SVG is white to its edges (the legend strip too), names its font with fallbacks of the
// same metrics, and puts the legend on an opaque box.
func TestSVGBackgroundFontLegend(t *testing.T) {
	f, err := wafOverTime(measuredReport())
	if err != nil {
		t.Fatal(err)
	}
	paths, err := f.Save(t.TempDir(), "w")
	if err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(paths[1])
	if err != nil {
		t.Fatal(err)
	}
	s := string(svg)
	m := regexp.MustCompile(`viewBox="0 0 ([0-9.]+) ([0-9.]+)"`).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no viewBox in %.300s", s)
	}
	if fill := fmt.Sprintf(`<path d="M0,0L%s,0L%s,%s`, m[1], m[1], m[2]); !strings.Contains(s, fill) {
		t.Errorf("no white fill over the whole %sx%s image (want %q)", m[1], m[2], fill)
	}
	if !strings.Contains(s, "font-family:'Liberation Sans',Arial,Helvetica,sans-serif") || strings.Contains(s, "Liberation Serif") {
		t.Errorf("font family without fallbacks: %v", regexp.MustCompile(`font-family:[^;]*`).FindAllString(s, 2))
	}
	if n := strings.Count(s, "fill:#FFFFFF"); n < 3 { // the image, the plot, the legend's box
		t.Errorf("%d white fills; want the image's, the plot's and the legend box's", n)
	}
}
