// Package plots draws rbctl's figures as PNG and SVG with gonum/plot, all in one style
// (style.go, figure.go): tick labels that never repeat (ticks.go), axes that start at 0 or
// where a figure says, legends beside the data. The report figures are here: the latency
// CDF, WAF over time and throughput over time per policy, and a sweep's WAF curve.
package plots

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"gonum.org/v1/plot/plotter"

	"github.com/rbctl/rbctl/reports"
)

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

// perRun is one series per drawn run, named by its policy, with the points xy picks.
func perRun(runs []reports.Run, xy func(reports.Run) plotter.XYs) []Series {
	out := make([]Series, len(runs))
	for i, run := range runs {
		out[i] = Series{Name: run.Policy, XYs: xy(run)}
	}
	return out
}

// LatencyCDF draws each run's request latency CDF: latency on a log axis from the fastest
// request, the fraction from 0.
func LatencyCDF(r *reports.Report, dir string) ([]string, error) {
	return save(latencyCDF, r, dir, "latency-cdf")
}

func latencyCDF(r *reports.Report) (*Figure, error) {
	return LineFigure("Request latency CDF", Axis{Label: "request latency (log scale)", Log: true, Micros: true, Start: FromData},
		Axis{Label: "fraction of requests", Start: FromZero},
		perRun(drawn(r), func(run reports.Run) plotter.XYs {
			var xy plotter.XYs
			for _, c := range run.RequestCDF {
				if c.Us > 0 {
					xy = append(xy, plotter.XY{X: c.Us, Y: c.Fraction})
				}
			}
			return xy
		}))
}

// WAFOverTime draws each run's modelled WAF over the tables' window (from the end of the
// warm-up, so a line ends at its table's figure) against payload written, the warm-up marked
// by a dashed line where it ends: payload from 0, WAF from 1 (its floor). A report without
// a measured window (an older one) draws the cumulative WAF from the start, and says so.
func WAFOverTime(r *reports.Report, dir string) ([]string, error) {
	return save(wafOverTime, r, dir, "waf-over-time")
}

func wafOverTime(r *reports.Report) (*Figure, error) {
	measured := false
	for _, run := range drawn(r) {
		for _, pt := range run.Timeline {
			measured = measured || pt.MeasuredWAF != nil
		}
	}
	title, ylabel := "Host WAF (modelled) against payload written", "WAF since the end of the warm-up (modelled)"
	if !measured {
		ylabel = "cumulative WAF from the start, warm-up included (modelled)"
	}
	series := perRun(drawn(r), func(run reports.Run) plotter.XYs {
		var xy plotter.XYs
		for _, pt := range run.Timeline {
			v := pt.CumWAF
			if measured {
				v = pt.MeasuredWAF
			}
			if v != nil && *v > 0 {
				xy = append(xy, plotter.XY{X: float64(pt.PayloadBytes) / (1 << 30), Y: *v})
			}
		}
		return xy
	})
	f, err := LineFigure(title, Axis{Label: "payload written since the start (GiB)", Start: FromZero}, Axis{Label: ylabel, Start: From(1)}, series)
	if err != nil || !measured {
		return f, err
	}
	// The warm-up, faint: its cumulative WAF up to where the tables' window begins (each
	// run's own point in a bench, whose warm-up ends when the cache has filled).
	warm := false
	for i, run := range drawn(r) {
		var xy plotter.XYs
		for _, pt := range run.Timeline {
			if pt.MeasuredWAF == nil && pt.CumWAF != nil && *pt.CumWAF > 0 {
				xy = append(xy, plotter.XY{X: float64(pt.PayloadBytes) / (1 << 30), Y: *pt.CumWAF})
			}
		}
		if len(xy) > 0 {
			if err := f.Faint(i, xy); err != nil {
				return nil, err
			}
			warm = true
		}
	}
	if warm {
		f.AddLegend("faint: warm-up, cumulative (not in the tables)", FaintThumb())
	}
	if r.Window.WarmupBytes == nil || *r.Window.WarmupBytes <= 0 {
		return f, nil
	}
	return f, f.MarkX(float64(*r.Window.WarmupBytes)/(1<<30), series, "warm-up ends: the tables' window starts")
}

// Throughput draws each run's ops/s over wall-clock time, both from 0: every sampled
// interval as a faint line, and over it the mean of a rolling window (named in the y
// label; SmoothingWindow) that lets the policies be compared.
func Throughput(r *reports.Report, dir string) ([]string, error) {
	return save(throughput, r, dir, "throughput")
}

func throughput(r *reports.Report) (*Figure, error) {
	series := perRun(drawn(r), func(run reports.Run) plotter.XYs {
		var xy plotter.XYs
		for _, pt := range run.Timeline {
			if pt.Seconds != nil && pt.OpsPerSec != nil && *pt.Seconds > 0 {
				xy = append(xy, plotter.XY{X: *pt.Seconds, Y: *pt.OpsPerSec})
			}
		}
		return xy
	})
	raw := make([]plotter.XYs, len(series))
	for i, s := range series {
		raw[i] = s.XYs
	}
	window, interval := SmoothingWindow(raw)
	f := New("Throughput over time", Axis{Label: "seconds since the run started (warm-up included)", Start: FromZero},
		Axis{Label: "ops/s, mean of a rolling " + seconds(window) + " window", Start: FromZero})
	n := 0
	for i, s := range series {
		if len(s.XYs) == 0 {
			continue
		}
		if err := f.Faint(i, s.XYs); err != nil {
			return nil, err
		}
		if err := f.Line(i, s.Name, RollingMean(s.XYs, window)); err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, ErrNoData
	}
	f.AddLegend("faint: each "+seconds(interval)+" interval", FaintThumb())
	return f, nil
}

// SmoothingWindow picks the rolling window for series sampled over time: 1, 2 or 5 × 10^k,
// at least 10 sampling intervals (the median gap between points) and a tenth of the longest
// series' span (within 10 %), but not over a third of that span before rounding up. It
// returns the window and the interval.
func SmoothingWindow(series []plotter.XYs) (window, interval float64) {
	interval = medianGap(series)
	span := 0.0
	for _, s := range series {
		if len(s) > 1 {
			span = math.Max(span, s[len(s)-1].X-s[0].X)
		}
	}
	want := math.Min(math.Max(10*interval, span/10), span/3)
	if want <= 0 {
		return 0, interval
	}
	k := math.Floor(math.Log10(want))
	for _, m := range []float64{1, 2, 5, 10} {
		if w := m * math.Pow(10, k); w >= want*0.9 { // 1.003 s (ten intervals of 0.1003 s) is 1 s
			return w, interval
		}
	}
	return 10 * math.Pow(10, k), interval
}

// seconds writes a duration in seconds for a label: "1 s", "0.1 s".
func seconds(v float64) string { return strconv.FormatFloat(v, 'g', 2, 64) + " s" }

// Sweep draws WAF against the swept parameter, one line per policy with a mark per point,
// into dir/name.{png,svg}: the parameter from its first value, WAF from 1.
func Sweep(r *reports.Report, dir, name string) ([]string, error) {
	return save(sweep, r, dir, name)
}

func sweep(r *reports.Report) (*Figure, error) {
	evict := ""
	if ev := r.Workload.Eviction; ev != "" && ev != "lru" {
		evict = ", " + ev + " eviction"
	}
	title := fmt.Sprintf("Modelled WAF vs %s (%s, RU %s, OP %g%s)", r.Sweep, reports.Size(r.Device.SizeBytes),
		reports.Size(r.Device.RUBytes), r.Device.OP, evict)
	idx := map[string]int{}
	var series []Series
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
			i = len(series)
			idx[name] = i
			series = append(series, Series{Name: name, Marks: true})
		}
		series[i].XYs = append(series[i].XYs, plotter.XY{X: run.Param, Y: run.HostWAF.Value})
	}
	return LineFigure(title, Axis{Label: r.Sweep, Start: FromData}, Axis{Label: "WAF (measured window)", Start: From(1)}, series)
}

// HitRatioOverTime draws a request trace's chunk hit ratio per interval against requests
// run, both from 0: one line per sweep value and admission policy (placement does not change
// what the cache holds, so the policies' lines coincide and one stands for them).
func HitRatioOverTime(r *reports.Report, dir string) ([]string, error) {
	return save(hitRatioOverTime, r, dir, "hit-ratio-over-time")
}

func hitRatioOverTime(r *reports.Report) (*Figure, error) {
	seen := map[string]bool{}
	var series []Series
	for _, run := range drawn(r) {
		name := run.Admission
		if r.Sweep != "" {
			v := strconv.FormatFloat(run.Param, 'g', 4, 64)
			if r.Sweep == "size" || r.Sweep == "ru" {
				v = reports.Size(int64(run.Param))
			}
			name = fmt.Sprintf("%s=%s %s", r.Sweep, v, name)
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		var xy plotter.XYs
		for _, pt := range run.Timeline {
			if pt.Requests != nil && pt.HitRatio != nil {
				xy = append(xy, plotter.XY{X: float64(*pt.Requests), Y: *pt.HitRatio})
			}
		}
		series = append(series, Series{Name: name, XYs: xy})
	}
	return LineFigure("Chunk hit ratio over the trace", Axis{Label: "requests", Start: FromZero},
		Axis{Label: "chunk hit ratio (per interval)", Start: FromZero}, series)
}

// save builds a report figure and saves it as dir/name.{png,svg}.
func save(build func(*reports.Report) (*Figure, error), r *reports.Report, dir, name string) ([]string, error) {
	f, err := build(r)
	if err != nil {
		return nil, err
	}
	return f.Save(dir, name)
}

// All draws every figure the report has data for (bench: CDF, WAF, throughput; simulate:
// WAF over time, or the sweep; a request trace: also the hit ratio over time) and returns the
// files written.
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
	if len(r.Explain) > 0 {
		figs = append(figs, WAFByCause)
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
