// Package plots draws a report's figures as PNG and SVG with gonum/plot: the latency CDF per
// strategy, WAF over time per strategy, throughput over time, and a sweep's WAF curve.
package plots

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/rbctl/rbctl/reports"
)

// ErrNoData: the report has nothing to draw for a figure.
var ErrNoData = errors.New("no data to plot")

const width, height = 7 * vg.Inch, 4.5 * vg.Inch

// save writes p as dir/name.png and dir/name.svg and returns the paths.
func save(p *plot.Plot, dir, name string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var out []string
	for _, ext := range []string{".png", ".svg"} {
		path := filepath.Join(dir, name+ext)
		if err := p.Save(width, height, path); err != nil {
			return out, fmt.Errorf("saving %s: %w", path, err)
		}
		out = append(out, path)
	}
	return out, nil
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

// drawn is the runs a figure shows: a failed run's partial figures are left out (the table
// reports its error instead).
func drawn(r *reports.Report) []reports.Run {
	var out []reports.Run
	for _, run := range r.Runs {
		if !run.Failed() {
			out = append(out, run)
		}
	}
	return out
}

// lines adds one named line per series; series with no points are skipped.
func lines(p *plot.Plot, names []string, series []plotter.XYs) (int, error) {
	var args []any
	for i, s := range series {
		if len(s) > 0 {
			args = append(args, names[i], s)
		}
	}
	if len(args) == 0 {
		return 0, ErrNoData
	}
	return len(args) / 2, plotutil.AddLines(p, args...)
}

// LatencyCDF draws each run's request latency CDF (log-scaled latency).
func LatencyCDF(r *reports.Report, dir string) ([]string, error) {
	p := newPlot("Request latency CDF", "latency (µs, log)", "fraction of requests")
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	var names []string
	var series []plotter.XYs
	for _, run := range drawn(r) {
		var xy plotter.XYs
		for _, c := range run.RequestCDF {
			if c.Us > 0 {
				xy = append(xy, plotter.XY{X: c.Us, Y: c.Fraction})
			}
		}
		names = append(names, run.Policy)
		series = append(series, xy)
	}
	if _, err := lines(p, names, series); err != nil {
		return nil, err
	}
	return save(p, dir, "latency-cdf")
}

// WAFOverTime draws each run's modelled WAF per interval against payload written.
func WAFOverTime(r *reports.Report, dir string) ([]string, error) {
	p := newPlot("Host WAF (modelled) over time", "payload written (GiB)", "cumulative WAF")
	var names []string
	var series []plotter.XYs
	for _, run := range drawn(r) {
		var xy plotter.XYs
		for _, pt := range run.Timeline {
			if pt.CumWAF != nil && *pt.CumWAF > 0 {
				xy = append(xy, plotter.XY{X: float64(pt.PayloadBytes) / (1 << 30), Y: *pt.CumWAF})
			}
		}
		names = append(names, run.Policy)
		series = append(series, xy)
	}
	if _, err := lines(p, names, series); err != nil {
		return nil, err
	}
	p.Y.Min = math.Min(p.Y.Min, 1)
	return save(p, dir, "waf-over-time")
}

// HitRatioOverTime draws a request trace's chunk hit ratio per interval against requests
// run: one line per sweep value and admission policy (placement does not change what the
// cache holds, so the policies' lines coincide and one stands for them).
func HitRatioOverTime(r *reports.Report, dir string) ([]string, error) {
	p := newPlot("Chunk hit ratio over the trace", "requests", "hit ratio (interval)")
	idx := map[string]bool{}
	var names []string
	var series []plotter.XYs
	for _, run := range drawn(r) {
		name := run.Admission
		if r.Sweep != "" {
			v := strconv.FormatFloat(run.Param, 'g', 4, 64)
			if r.Sweep == "size" || r.Sweep == "ru" {
				v = reports.GiB(int64(run.Param)) + " GiB"
			}
			name = fmt.Sprintf("%s=%s %s", r.Sweep, v, name)
		}
		if idx[name] {
			continue
		}
		idx[name] = true
		var xy plotter.XYs
		for _, pt := range run.Timeline {
			if pt.Requests != nil && pt.HitRatio != nil {
				xy = append(xy, plotter.XY{X: float64(*pt.Requests), Y: *pt.HitRatio})
			}
		}
		names = append(names, name)
		series = append(series, xy)
	}
	if _, err := lines(p, names, series); err != nil {
		return nil, err
	}
	p.Y.Min, p.Y.Max = 0, 1
	return save(p, dir, "hit-ratio-over-time")
}

// Throughput draws each run's ops/s over wall-clock time.
func Throughput(r *reports.Report, dir string) ([]string, error) {
	p := newPlot("Throughput over time", "seconds", "ops/s")
	var names []string
	var series []plotter.XYs
	for _, run := range drawn(r) {
		var xy plotter.XYs
		for _, pt := range run.Timeline {
			if pt.Seconds != nil && pt.OpsPerSec != nil && *pt.Seconds > 0 {
				xy = append(xy, plotter.XY{X: *pt.Seconds, Y: *pt.OpsPerSec})
			}
		}
		names = append(names, run.Policy)
		series = append(series, xy)
	}
	if _, err := lines(p, names, series); err != nil {
		return nil, err
	}
	p.Y.Min = 0
	return save(p, dir, "throughput")
}

// Sweep draws WAF against the swept parameter, one line per policy, into dir/name.{png,svg}.
func Sweep(r *reports.Report, dir, name string) ([]string, error) {
	evict := ""
	if ev := r.Workload.Eviction; ev != "" && ev != "lru" {
		evict = ", " + ev + " eviction"
	}
	p := newPlot(fmt.Sprintf("Modelled WAF vs %s (%s GiB, RU %s GiB, OP %g%s)", r.Sweep, reports.GiB(r.Device.SizeBytes),
		reports.GiB(r.Device.RUBytes), r.Device.OP, evict), r.Sweep, "WAF (measured window)")
	idx := map[string]int{}
	var names []string
	var series []plotter.XYs
	for _, run := range r.Runs {
		if run.Failed() || run.HostWAF == nil || run.HostWAF.Value == 0 || run.Infeasible {
			continue
		}
		name := run.Policy
		if run.Admission != "" {
			name += " [" + run.Admission + "]"
		}
		i, ok := idx[name]
		if !ok {
			i = len(names)
			idx[name] = i
			names = append(names, name)
			series = append(series, nil)
		}
		series[i] = append(series[i], plotter.XY{X: run.Param, Y: run.HostWAF.Value})
	}
	var args []any
	for i, s := range series {
		args = append(args, names[i], s)
	}
	if len(args) == 0 {
		return nil, ErrNoData
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return nil, err
	}
	p.Y.Min = math.Min(p.Y.Min, 1)
	return save(p, dir, name)
}

// All draws every figure the report has data for (bench: CDF, WAF, throughput; simulate:
// WAF over time, or the sweep) and returns the files written.
func All(r *reports.Report, dir string) ([]string, error) {
	var out []string
	var figs []func(*reports.Report, string) ([]string, error)
	if r.Sweep != "" {
		figs = append(figs, func(r *reports.Report, d string) ([]string, error) { return Sweep(r, d, "sweep-"+r.Sweep) })
	} else {
		figs = append(figs, WAFOverTime)
	}
	if r.Trace != nil {
		figs = append(figs, HitRatioOverTime)
	}
	if r.Sweep == "" && r.Command == "bench" {
		figs = append(figs, LatencyCDF, Throughput)
	}
	for _, f := range figs {
		files, err := f(r, dir)
		if errors.Is(err, ErrNoData) {
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, files...)
	}
	return out, nil
}
