package main

import (
	"errors"
	"fmt"
	"image/color"
	"os"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

const panelW, panelH = 6 * vg.Inch, 4.5 * vg.Inch

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

// panel draws one run: MiB/s against devices, a line per kind and operation, and a ring on
// the first point of a kind where the cores were saturated.
func panel(r Run, sat []Saturated) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title(r)
	p.X.Label.Text = "devices in the sharded cache"
	p.Y.Label.Text = "throughput (MiB/s of payload)"
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	var ticks []plot.Tick
	seen := map[int]bool{}
	maxY := 0.0
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
				maxY = max(maxY, y)
				if !seen[pt.Devices] {
					seen[pt.Devices] = true
					ticks = append(ticks, plot.Tick{Value: float64(pt.Devices), Label: strconv.Itoa(pt.Devices)})
				}
			}
			l, pts, err := plotter.NewLinePoints(xy)
			if err != nil {
				return nil, err
			}
			l.Color = plotutil.Color(i)
			l.Width = vg.Points(1.5)
			l.Dashes = plotutil.Dashes(op)
			pts.Color = plotutil.Color(i)
			pts.Shape = plotutil.Shape(op)
			p.Add(l, pts)
			name := k + " put"
			if get {
				name = k + " get"
			}
			p.Legend.Add(name, l, pts)
		}
	}
	if len(ticks) == 0 {
		return nil, fmt.Errorf("%s run: no points", r.Where)
	}
	// A ring on each saturated point; one label per device count (kinds that saturate at the
	// same count share it, above the highest of their points).
	byDevs := map[int][]Saturated{}
	var counts []int
	for _, s := range sat {
		if s.Where == r.Where {
			if len(byDevs[s.Devices]) == 0 {
				counts = append(counts, s.Devices)
			}
			byDevs[s.Devices] = append(byDevs[s.Devices], s)
		}
	}
	for _, n := range counts {
		text, top := "cores saturated:", 0.0
		for _, s := range byDevs[n] {
			for _, pt := range pointsOf(r, s.Kind) {
				if pt.Devices != n {
					continue
				}
				y := max(pt.PutMiBs, pt.GetMiBs)
				top = max(top, y)
				ring, err := plotter.NewScatter(plotter.XYs{{X: float64(n), Y: y}})
				if err != nil {
					return nil, err
				}
				ring.Shape = draw.RingGlyph{}
				ring.Radius = vg.Points(9)
				ring.Color = color.Black
				p.Add(ring)
			}
			text += fmt.Sprintf("\n%s (%.2f of %d busy)", s.Kind, s.BusyCores, s.Cores)
		}
		lab, err := plotter.NewLabels(plotter.XYLabels{XYs: []plotter.XY{{X: float64(n), Y: top}}, Labels: []string{text}})
		if err != nil {
			return nil, err
		}
		lab.Offset = vg.Point{X: vg.Points(11), Y: vg.Points(4)}
		p.Add(lab)
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = 0.5, 0.5
	for _, t := range ticks {
		p.X.Max = max(p.X.Max, t.Value+0.5)
	}
	p.Y.Min, p.Y.Max = 0, maxY*1.6 // the top third holds the legend
	return p, nil
}

// cpuPanel draws the same run's measured CPU: busy cores (every core, /proc/stat), rbctl's
// own, and the busy cores of the second before each bench (other work), against devices,
// with the core count and the saturation threshold as lines.
func cpuPanel(r Run) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: CPU over the measured window (saturated: busy >= %.0f%% of %d cores)", r.Where, saturatedFrac*100, r.Cores)
	p.X.Label.Text = "devices in the sharded cache"
	p.Y.Label.Text = "cores busy"
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
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
			l.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
			l.Width = vg.Points(1.5)
			l.Dashes = plotutil.Dashes(op)
			pts.Shape = plotutil.Shape(op)
			p.Add(l, pts)
			p.Legend.Add(k+": "+what, l, pts)
		}
	}
	sort.Slice(ticks, func(i, j int) bool { return ticks[i].Value < ticks[j].Value })
	lo, hi := 0.5, ticks[len(ticks)-1].Value+0.5
	for _, ref := range []struct {
		y    float64
		name string
	}{{float64(r.Cores), fmt.Sprintf("%d cores", r.Cores)}, {saturatedFrac * float64(r.Cores), "saturation threshold"}} {
		l, err := plotter.NewLine(plotter.XYs{{X: lo, Y: ref.y}, {X: hi, Y: ref.y}})
		if err != nil {
			return nil, err
		}
		l.Color = color.Gray{Y: 90}
		l.Dashes = []vg.Length{vg.Points(2), vg.Points(3)}
		p.Add(l)
		lab, err := plotter.NewLabels(plotter.XYLabels{XYs: []plotter.XY{{X: hi, Y: ref.y}}, Labels: []string{ref.name}})
		if err != nil {
			return nil, err
		}
		lab.Offset = vg.Point{X: vg.Points(-70), Y: vg.Points(2)}
		p.Add(lab)
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = lo, hi
	p.Y.Min, p.Y.Max = 0, float64(r.Cores)*1.9 // the top holds the legend
	return p, nil
}

// Render writes the runs side by side (host, then VM) as a PNG: throughput above, the
// measured CPU below.
func Render(runs []Run, path string) error {
	if len(runs) == 0 {
		return errors.New("no runs with points to plot")
	}
	sat := Saturation(runs)
	// Row 0: throughput; row 1: the CPU that explains where it flattens.
	grid := [][]*plot.Plot{make([]*plot.Plot, len(runs)), make([]*plot.Plot, len(runs))}
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
	img := vgimg.New(panelW*vg.Length(len(runs)), panelH*2)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: len(runs), PadX: vg.Millimeter * 6, PadY: vg.Millimeter * 6, PadTop: vg.Millimeter * 2,
		PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	cs := plot.Align(grid, tiles, dc)
	for j, row := range grid {
		for i, p := range row {
			p.Draw(cs[j][i])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}
