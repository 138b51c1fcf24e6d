package main

import (
	"errors"
	"fmt"
	"image/color"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/rbctl/rbctl/reports/plots"
)

// deviceTicks labels the device counts drawn, and the range half a device beyond them.
func deviceTicks(p *plot.Plot, ticks []plot.Tick) {
	sort.Slice(ticks, func(i, j int) bool { return ticks[i].Value < ticks[j].Value })
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = ticks[0].Value-0.5, ticks[len(ticks)-1].Value+0.5
}

// title says where a run was measured; under TCG the caption must say the CPU is emulated.
func title(r Run) string {
	switch {
	case r.Where == "vm" && r.Accel == "tcg":
		return fmt.Sprintf("VM under TCG (the guest's CPU is emulated), %d vCPUs, kernel %s\nnull_blk and loop devices; measured %s", r.Cores, r.Kernel, r.MeasuredAt)
	case r.Where == "vm":
		return fmt.Sprintf("VM under %s, %d vCPUs, kernel %s\nnull_blk and loop devices; measured %s", r.Accel, r.Cores, r.Kernel, r.MeasuredAt)
	default:
		return fmt.Sprintf("host: %d cores shared with other users (load %.2f before), kernel %s\nloop devices over tmpfs; measured %s", r.Cores, r.Load1, r.Kernel, r.MeasuredAt)
	}
}

// devicesAxis is both panels' x axis: the device counts measured (ConstantTicks).
var devicesAxis = plots.Axis{Label: "devices in the sharded cache", Start: plots.FromData}

// panel draws one run: MiB/s against devices, a line per kind and operation (colour: kind,
// dashes and marks: operation), and a ring on the first point of a kind where the cores were
// saturated, explained in the legend.
func panel(r Run, sat []Saturated) (*plots.Figure, error) {
	f := plots.New(title(r), devicesAxis, plots.Axis{Label: "throughput (MiB/s of payload)", Start: plots.FromZero})
	var ticks []plot.Tick
	seen := map[int]bool{}
	for i, k := range kinds(r) {
		ps := pointsOf(r, k)
		for op, get := range []bool{false, true} {
			var xy plotter.XYs
			for _, pt := range ps {
				y := pt.PutMiBs
				if get {
					y = pt.GetMiBs
				}
				xy = append(xy, plotter.XY{X: float64(pt.Devices), Y: y})
				if !seen[pt.Devices] {
					seen[pt.Devices] = true
					ticks = append(ticks, plot.Tick{Value: float64(pt.Devices), Label: strconv.Itoa(pt.Devices)})
				}
			}
			l, pts, err := plotter.NewLinePoints(xy)
			if err != nil {
				return nil, err
			}
			l.LineStyle, pts.GlyphStyle = plots.LineStyle(i), plots.GlyphStyle(op)
			l.Dashes, pts.Color = plotutil.Dashes(op), plots.Color(i)
			f.Plot.Add(l, pts)
			name := k + " put"
			if get {
				name = k + " get"
			}
			f.AddLegend(name, l, pts)
		}
	}
	if len(ticks) == 0 {
		return nil, fmt.Errorf("%s run: no points", r.Where)
	}
	deviceTicks(f.Plot, ticks)
	// A ring on each saturated point, and the legend says which and how busy.
	var notes []string
	for _, s := range sat {
		if s.Where != r.Where {
			continue
		}
		for _, pt := range pointsOf(r, s.Kind) {
			if pt.Devices == s.Devices {
				ring, err := plotter.NewScatter(plotter.XYs{{X: float64(s.Devices), Y: max(pt.PutMiBs, pt.GetMiBs)}})
				if err != nil {
					return nil, err
				}
				ring.GlyphStyle = saturatedRing
				f.Plot.Add(ring)
			}
		}
		devs := "devices"
		if s.Devices == 1 {
			devs = "device"
		}
		notes = append(notes, fmt.Sprintf("  %s at %d %s (%.2f of %d busy)", s.Kind, s.Devices, devs, s.BusyCores, s.Cores))
	}
	if len(notes) > 0 {
		f.AddLegend("cores saturated:", &plotter.Scatter{GlyphStyle: saturatedRing})
		for _, n := range notes {
			f.AddLegend(n)
		}
	}
	return f, nil
}

// saturatedRing marks a point where the cores were saturated.
var saturatedRing = draw.GlyphStyle{Shape: draw.RingGlyph{}, Radius: vg.Points(8), Color: color.Black}

// cpuPanel draws the same run's measured CPU: busy cores (every core, /proc/stat), rbctl's
// own, and the busy cores of the second before each bench (other work), against devices,
// with the core count and the saturation threshold as grey lines.
func cpuPanel(r Run) (*plots.Figure, error) {
	f := plots.New(fmt.Sprintf("%s: CPU over the measured window (saturated: busy >= %.0f%% of %d cores)", r.Where, saturatedFrac*100, r.Cores),
		devicesAxis, plots.Axis{Label: "cores busy", Start: plots.FromZero})
	var ticks []plot.Tick
	seen := map[int]bool{}
	for i, k := range kinds(r) {
		for op, what := range []string{"all cores busy", "rbctl's threads", "busy in the second before"} {
			var xy plotter.XYs
			for _, pt := range pointsOf(r, k) {
				y := []float64{pt.BusyCores, pt.ProcCores, pt.BusyBefore}[op]
				xy = append(xy, plotter.XY{X: float64(pt.Devices), Y: y})
				if !seen[pt.Devices] {
					seen[pt.Devices] = true
					ticks = append(ticks, plot.Tick{Value: float64(pt.Devices), Label: strconv.Itoa(pt.Devices)})
				}
			}
			l, pts, err := plotter.NewLinePoints(xy)
			if err != nil {
				return nil, err
			}
			l.LineStyle, pts.GlyphStyle = plots.LineStyle(i), plots.GlyphStyle(op)
			l.Dashes, pts.Color = plotutil.Dashes(op), plots.Color(i)
			f.Plot.Add(l, pts)
			f.AddLegend(k+": "+what, l, pts)
		}
	}
	if len(ticks) == 0 {
		return nil, fmt.Errorf("%s run: no points", r.Where)
	}
	deviceTicks(f.Plot, ticks)
	lo, hi := f.Plot.X.Min, f.Plot.X.Max
	for _, ref := range []struct {
		y      float64
		name   string
		dashes []vg.Length
	}{{float64(r.Cores), fmt.Sprintf("%d cores", r.Cores), []vg.Length{vg.Points(6), vg.Points(3)}},
		{saturatedFrac * float64(r.Cores), fmt.Sprintf("saturation threshold (%.0f%%)", saturatedFrac*100), []vg.Length{vg.Points(1), vg.Points(2)}}} {
		l, err := plotter.NewLine(plotter.XYs{{X: lo, Y: ref.y}, {X: hi, Y: ref.y}})
		if err != nil {
			return nil, err
		}
		l.Color, l.Width, l.Dashes = color.Gray{Y: 90}, vg.Points(1), ref.dashes
		f.Plot.Add(l)
		f.AddLegend(ref.name, l)
	}
	return f, nil
}

// Render writes the runs side by side (host, then VM) as one image (PNG, or SVG by the
// extension): throughput above, the measured CPU below.
func Render(runs []Run, path string) error {
	if len(runs) == 0 {
		return errors.New("no runs with points to plot")
	}
	sat := Saturation(runs)
	// Row 0: throughput; row 1: the CPU that explains where it flattens.
	grid := [][]*plots.Figure{make([]*plots.Figure, len(runs)), make([]*plots.Figure, len(runs))}
	for i, r := range runs {
		p, err := panel(r, sat)
		if err != nil {
			return err
		}
		c, err := cpuPanel(r)
		if err != nil {
			return err
		}
		grid[0][i], grid[1][i] = p, c
	}
	return plots.SaveGrid(path, grid)
}
