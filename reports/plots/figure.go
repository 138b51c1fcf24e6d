package plots

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// ErrNoData: the report has nothing to draw for a figure.
var ErrNoData = errors.New("no data to plot")

// legendGap separates the plot from its legend strip.
const legendGap = 8

// Figure is one figure in rbctl's style: a gonum plot (Plot, for what the helpers do not
// cover) and a legend drawn in a strip right of the plot, never over the data.
type Figure struct {
	Plot    *plot.Plot
	x, y    Axis
	entries []entry
	fitted  bool
}

type entry struct {
	name   string
	thumbs []plot.Thumbnailer
}

// New returns an empty figure with its title and axes.
func New(title string, x, y Axis) *Figure {
	return &Figure{Plot: newPlot(title, x, y), x: x, y: y}
}

// Series is one named line of a figure.
type Series struct {
	Name string
	XYs  plotter.XYs
	// Marks draws a mark on every point (few points, as in a sweep).
	Marks bool
}

// LineFigure builds a figure of one line per series, series i in style i; a series with no
// points is left out (it keeps its style index, so colours match across figures). It
// returns ErrNoData when no series has a point.
func LineFigure(title string, x, y Axis, series []Series) (*Figure, error) {
	f := New(title, x, y)
	n := 0
	for i, s := range series {
		if len(s.XYs) == 0 {
			continue
		}
		var err error
		if s.Marks {
			err = f.LinePoints(i, s.Name, s.XYs)
		} else {
			err = f.Line(i, s.Name, s.XYs)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Name, err)
		}
		n++
	}
	if n == 0 {
		return nil, ErrNoData
	}
	return f, nil
}

// MarkX draws a dashed grey vertical line at x across the data's height, with a legend entry
// that says what it marks (the end of a warm-up).
func (f *Figure) MarkX(x float64, series []Series, name string) error {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, p := range s.XYs {
			lo, hi = math.Min(lo, p.Y), math.Max(hi, p.Y)
		}
	}
	if math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return ErrNoData
	}
	if f.y.Start.kind == startFloor {
		lo = math.Min(lo, f.y.Start.floor)
	}
	l, err := plotter.NewLine(plotter.XYs{{X: x, Y: lo}, {X: x, Y: hi}})
	if err != nil {
		return err
	}
	l.LineStyle = draw.LineStyle{Color: color.Gray{Y: 110}, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
	f.Plot.Add(l)
	f.AddLegend(name, l)
	return nil
}

// Line adds a line in style i with a legend entry.
func (f *Figure) Line(i int, name string, xy plotter.XYs) error {
	l, err := plotter.NewLine(xy)
	if err != nil {
		return err
	}
	l.LineStyle = LineStyle(i)
	f.Plot.Add(l)
	f.AddLegend(name, l)
	return nil
}

// LinePoints adds a line in style i with a mark on every point, and a legend entry.
func (f *Figure) LinePoints(i int, name string, xy plotter.XYs) error {
	l, pts, err := plotter.NewLinePoints(xy)
	if err != nil {
		return err
	}
	l.LineStyle, pts.GlyphStyle = LineStyle(i), GlyphStyle(i)
	f.Plot.Add(l, pts)
	f.AddLegend(name, l, pts)
	return nil
}

// Faint adds series i's raw data as a faint line (FaintStyle) with no legend entry: draw it
// first, then its smoothed line over it, and say what it is with AddLegend and FaintThumb.
func (f *Figure) Faint(i int, xy plotter.XYs) error {
	l, err := plotter.NewLine(xy)
	if err != nil {
		return err
	}
	l.LineStyle = FaintStyle(i, len(xy))
	f.Plot.Add(l)
	return nil
}

// FaintThumb is a legend thumbnail for the faint lines of every series (grey).
func FaintThumb() plot.Thumbnailer {
	ls := FaintStyle(0, 0)
	ls.Color = color.NRGBA{A: faintAlpha}
	return &plotter.Line{LineStyle: ls}
}

// AddLegend adds a legend entry drawn with the thumbnails given (the plotters it names).
func (f *Figure) AddLegend(name string, thumbs ...plot.Thumbnailer) {
	f.entries = append(f.entries, entry{name, thumbs})
}

// Legend lists the legend's entries in order.
func (f *Figure) Legend() []string {
	var out []string
	for _, e := range f.entries {
		out = append(out, e.name)
	}
	return out
}

func (f *Figure) legend() plot.Legend {
	l := plot.NewLegend()
	l.Top, l.Left = true, true
	l.Padding = vg.Points(2)
	for _, e := range f.entries {
		l.Add(e.name, e.thumbs...)
	}
	return l
}

// LegendWidth is the width of the strip right of the plot that holds the legend (0
// without entries).
func (f *Figure) LegendWidth() vg.Length {
	if len(f.entries) == 0 {
		return 0
	}
	l := f.legend()
	r := l.Rectangle(draw.Canvas{})
	// Room for the box around it, and slack for an SVG viewer whose fallback font is wider
	// than Liberation Sans (DejaVu Sans is about 12 % wider).
	return r.Size().X*legendSlack + 2*vg.Points(legendGap+legendPad)
}

// legendPad is the margin of the legend's box; legendSlack the strip's room for wider fonts.
const (
	legendPad   = 3
	legendSlack = 1.15
)

// fit sets both axes' ranges and ticks (once, after the data are added; Draw, Layout,
// AxisTicks and DrawGrid call it).
func (f *Figure) fit() {
	if !f.fitted {
		fitRange(&f.Plot.X, f.x)
		fitRange(&f.Plot.Y, f.y)
		shareOrigin(&f.Plot.X, &f.Plot.Y)
		f.fitted = true
	}
}

// Layout splits c into the plot's area and the legend's strip (strip wide, right of the
// plot, level with the data area). Figures side by side in a grid pass one strip width,
// their widest, so their axes line up.
func (f *Figure) Layout(c draw.Canvas, strip vg.Length) (plotArea, legendArea draw.Canvas) {
	f.fit()
	plotArea = draw.Crop(c, 0, -strip, 0, 0)
	data := f.Plot.DataCanvas(plotArea)
	legendArea = c
	legendArea.Min.X = plotArea.Max.X + vg.Points(legendGap)
	legendArea.Min.Y, legendArea.Max.Y = data.Min.Y, data.Max.Y
	return plotArea, legendArea
}

// Draw draws the figure onto c with its legend in a strip strip wide (LegendWidth, or the
// widest of a grid's figures).
func (f *Figure) Draw(c draw.Canvas, strip vg.Length) {
	pa, la := f.Layout(c, strip)
	f.Plot.Draw(pa)
	l := f.legend()
	if len(f.entries) > 0 {
		// An opaque box under the legend: its text stays readable on a viewer's dark
		// background, and the strip reads as one block.
		size := l.Rectangle(la).Size() // its size; gonum places a Left legend's rectangle on the right
		box := vg.Rectangle{Min: vg.Point{X: la.Min.X, Y: la.Max.Y - size.Y}, Max: vg.Point{X: la.Min.X + size.X, Y: la.Max.Y}}
		pad := vg.Points(legendPad)
		box.Min.X, box.Min.Y, box.Max.X, box.Max.Y = box.Min.X-pad, box.Min.Y-pad, box.Max.X+pad, box.Max.Y+pad
		la.SetColor(color.White)
		la.Fill(box.Path())
		la.SetLineStyle(draw.LineStyle{Color: color.Gray{Y: gridGrey}, Width: vg.Points(0.5)})
		la.Stroke(box.Path())
	}
	l.Draw(la)
}

// fillBackground paints all of c white: the legend's strip too, not only the plot (an SVG
// viewer with a dark page would otherwise show the strip dark, and black text on it).
func fillBackground(c draw.Canvas) {
	c.SetColor(color.White)
	c.Fill(c.Rectangle.Path())
}

// AxisTicks returns the ticks the figure's x and y axes are drawn with.
func (f *Figure) AxisTicks() (x, y []plot.Tick) {
	f.fit()
	p := f.Plot
	return p.X.Tick.Marker.Ticks(p.X.Min, p.X.Max), p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max)
}

// Save writes the figure as dir/name.png and dir/name.svg (Width × Height, widened by the
// legend's strip) and returns the paths.
func (f *Figure) Save(dir, name string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	strip := f.LegendWidth()
	var out []string
	for _, format := range []string{"png", "svg"} {
		path := filepath.Join(dir, name+"."+format)
		if err := f.write(path, format, Width+strip, strip); err != nil {
			return out, fmt.Errorf("saving %s: %w", path, err)
		}
		out = append(out, path)
	}
	return out, nil
}

func (f *Figure) write(path, format string, w, strip vg.Length) error {
	c, err := draw.NewFormattedCanvas(w, Height, format)
	if err != nil {
		return err
	}
	dc := draw.New(c)
	fillBackground(dc)
	f.Draw(dc, strip)
	return writeCanvas(path, c)
}

// writeCanvas writes a drawn canvas to path.
func writeCanvas(path string, c vg.CanvasWriterTo) error {
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return err
	}
	out := buf.Bytes()
	if filepath.Ext(path) == ".svg" {
		out = bytes.ReplaceAll(out, []byte("font-family:"+fontName), []byte("font-family:"+svgFontFamily))
	}
	return os.WriteFile(path, out, 0o644)
}

// RollingMean smooths xy (sorted by X) with a centred window: each point becomes the mean
// of the Ys whose X lies within window/2 of its own (fewer at the ends).
func RollingMean(xy plotter.XYs, window float64) plotter.XYs {
	out := make(plotter.XYs, len(xy))
	lo, hi, sum := 0, 0, 0.0
	for i, p := range xy {
		for hi < len(xy) && xy[hi].X <= p.X+window/2 {
			sum += xy[hi].Y
			hi++
		}
		for xy[lo].X < p.X-window/2 {
			sum -= xy[lo].Y
			lo++
		}
		out[i] = plotter.XY{X: p.X, Y: sum / float64(hi-lo)}
	}
	return out
}

// medianGap is the median distance between consecutive Xs over every series (0 without
// two points in one series).
func medianGap(series []plotter.XYs) float64 {
	var gaps []float64
	for _, s := range series {
		for i := 1; i < len(s); i++ {
			gaps = append(gaps, s[i].X-s[i-1].X)
		}
	}
	if len(gaps) == 0 {
		return 0
	}
	sort.Float64s(gaps)
	return gaps[len(gaps)/2]
}
