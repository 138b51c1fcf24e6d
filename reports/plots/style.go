package plots

import (
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The one style of rbctl's figures. Every figure (the reports' and the tools': scalingplot)
// is a Figure built with New, so a new figure looks like the others by construction.
const (
	// Width and Height are those of the plot; the legend's strip widens the image (Save).
	Width, Height = 7 * vg.Inch, 4.5 * vg.Inch
	// lineWidth of a series; faintWidth and faintAlpha of the raw series under a smoothed one.
	lineWidth  = 1.5
	faintWidth = 0.75
	faintAlpha = 0x50
	// faintPoints: past this many points a faint line fades (down to faintAlphaMin), so the
	// raw intervals of a long run do not bury the smoothed lines.
	faintPoints, faintAlphaMin = 150, 0x18
	// maxHeadroom is how far past the data (a fraction of the range) an axis may run to end
	// on a labelled tick.
	maxHeadroom = 0.05
	// gridGrey is the grid lines' grey level.
	gridGrey = 205
)

// Start says where an axis begins. Every axis states one: FromZero (rates, counts, time,
// bytes, fractions), From(v) for a quantity with a floor (WAF: 1), FromData for a swept
// parameter or a log scale.
type Start struct {
	kind  startKind
	floor float64
}

type startKind int

const (
	startZero startKind = iota
	startData
	startFloor
)

var (
	// FromZero: the axis runs from 0 (or from the data, if it goes below 0).
	FromZero = Start{kind: startZero}
	// FromData: the axis runs from the lowest value drawn.
	FromData = Start{kind: startData}
)

// From: the axis runs from v, or from the lowest value drawn if that is lower.
func From(v float64) Start { return Start{kind: startFloor, floor: v} }

// Axis is one axis of a figure: its label (say the unit, and any smoothing), where it
// starts, and whether it is log-scaled (a log axis starts at its data).
type Axis struct {
	Label string
	Start Start
	Log   bool
	// Micros: the values are microseconds, labelled as times ("100 µs", "10 ms", "1 s").
	Micros bool
}

// palette is Okabe and Ito's colour-blind-safe set, yellow last (it is faint on white).
var palette = []color.Color{
	color.RGBA{0x00, 0x72, 0xB2, 0xFF}, // blue
	color.RGBA{0xD5, 0x5E, 0x00, 0xFF}, // vermillion
	color.RGBA{0x00, 0x9E, 0x73, 0xFF}, // bluish green
	color.RGBA{0xCC, 0x79, 0xA7, 0xFF}, // reddish purple
	color.RGBA{0xE6, 0x9F, 0x00, 0xFF}, // orange
	color.RGBA{0x56, 0xB4, 0xE9, 0xFF}, // sky blue
	color.RGBA{0x00, 0x00, 0x00, 0xFF}, // black
	color.RGBA{0xF0, 0xE4, 0x42, 0xFF}, // yellow
}

// Color is series i's colour: the same index keeps the same colour in every figure of a
// report (a policy is one colour throughout).
func Color(i int) color.Color {
	n := len(palette)
	return palette[(i%n+n)%n]
}

// LineStyle is series i's line: its colour and a dash pattern of its own, so the figure
// reads in grey too.
func LineStyle(i int) draw.LineStyle {
	return draw.LineStyle{Color: Color(i), Width: vg.Points(lineWidth), Dashes: plotutil.Dashes(i)}
}

// FaintStyle is series i's raw data (n points) under its smoothed line: thin, solid,
// translucent, and fainter the more points crowd the plot's width (past faintPoints).
func FaintStyle(i, n int) draw.LineStyle {
	r, g, b, _ := Color(i).RGBA()
	return draw.LineStyle{Color: color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: faintness(n)}, Width: vg.Points(faintWidth)}
}

// faintness is the alpha of a faint line of n points.
func faintness(n int) uint8 {
	if n <= faintPoints {
		return faintAlpha
	}
	return uint8(max(faintAlphaMin, faintAlpha*faintPoints/n))
}

// GlyphStyle is series i's point mark.
func GlyphStyle(i int) draw.GlyphStyle {
	return draw.GlyphStyle{Color: Color(i), Radius: vg.Points(3), Shape: plotutil.Shape(i)}
}

// The figures' font: Liberation Sans, which gonum/plot embeds (the PNG is drawn with it),
// named in an SVG with fallbacks a viewer has: Arial and Helvetica share its metrics, so the
// text fits where it was laid out; sans-serif last.
const fontName = "Liberation Sans"

const svgFontFamily = "'Liberation Sans',Arial,Helvetica,sans-serif"

func init() {
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
	plotter.DefaultFont = plot.DefaultFont
}

// newPlot is a gonum plot in the style: title, axis labels, scales and tick marks, a grid.
func newPlot(title string, x, y Axis) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.Padding = vg.Points(6)
	for _, a := range []struct {
		ax   *plot.Axis
		spec Axis
	}{{&p.X, x}, {&p.Y, y}} {
		a.ax.Label.Text = a.spec.Label
		a.ax.Tick.Marker = Ticks{}
		if a.spec.Log {
			a.ax.Scale = plot.LogScale{}
			a.ax.Tick.Marker = LogTicks{}
			if a.spec.Micros {
				a.ax.Tick.Marker = LatencyTicks{}
			}
		}
	}
	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = color.Gray{Y: gridGrey}, color.Gray{Y: gridGrey}
	p.Add(grid)
	return p
}

// fitRange sets an axis's range to where the figure says it starts, and, on a linear axis,
// ends it at the first major tick at or above the data when that is within maxHeadroom of
// the range (so the top of the scale is labelled without a band of empty plot).
func fitRange(a *plot.Axis, spec Axis) {
	if spec.Log {
		return
	}
	switch spec.Start.kind {
	case startZero:
		a.Min, a.Max = math.Min(a.Min, 0), math.Max(a.Max, 0)
	case startFloor:
		a.Min = math.Min(a.Min, spec.Start.floor)
	}
	if _, ours := a.Tick.Marker.(Ticks); !ours || !(a.Max > a.Min) || math.IsInf(a.Max-a.Min, 0) {
		return // a figure's own ticks (ConstantTicks) come with the range it set
	}
	s := niceStep(a.Min, a.Max)
	if top := math.Ceil(a.Max/s.value()-1e-9) * s.value(); top >= a.Max && top-a.Max <= maxHeadroom*(a.Max-a.Min) {
		a.Max = top
	}
	a.Tick.Marker = Ticks{step: s}
}
