package plots

import (
	"math"
	"strconv"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/rbctl/rbctl/reports"
)

// WAFByCause draws each explained run's WAF − 1 by cause (simulate --explain) as bars, one
// colour per run, one group per change plus what remains, as dir/waf-by-cause.{png,svg}.
func WAFByCause(r *reports.Report, dir string) ([]string, error) {
	f, err := wafByCause(r)
	if err != nil {
		return nil, err
	}
	return f.Save(dir, "waf-by-cause")
}

func wafByCause(r *reports.Report) (*Figure, error) {
	if len(r.Explain) == 0 {
		return nil, ErrNoData
	}
	// One group per lever any run applied, in lever order, then the residual.
	var labels []string
	idx := map[string]int{}
	for _, e := range r.Explain {
		for _, s := range e.Steps {
			if s.Skipped == "" {
				if _, ok := idx[s.Cause]; !ok {
					idx[s.Cause] = len(labels)
					labels = append(labels, s.Change)
				}
			}
		}
	}
	labels = append(labels, "remaining")
	f := New("WAF − 1 by cause ("+r.Explain[0].Method+", modelled)",
		Axis{Label: "the change that removes the cause"}, Axis{Label: "part of WAF − 1 (modelled)", Start: FromZero})
	n := len(r.Explain)
	w := vg.Points(math.Min(24, 72/float64(n)))
	for i, e := range r.Explain {
		vals := make(plotter.Values, len(labels))
		for _, s := range e.Steps {
			if k, ok := idx[s.Cause]; ok && s.Skipped == "" {
				vals[k] = s.Part
			}
		}
		vals[len(labels)-1] = e.Residual
		bc, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return nil, err
		}
		bc.Color = Color(i)
		bc.LineStyle.Width = 0
		bc.Offset = w * vg.Length(float64(i)-float64(n-1)/2)
		f.Plot.Add(bc)
		name := e.Policy
		if e.Admission != "" {
			name += " [" + e.Admission + "]"
		}
		f.AddLegend(name+": WAF "+strconv.FormatFloat(e.WAF, 'f', 3, 64), bc)
	}
	f.Plot.NominalX(labels...)
	f.Plot.X.Tick.Label.Rotation = math.Pi / 8
	f.Plot.X.Tick.Label.XAlign, f.Plot.X.Tick.Label.YAlign = draw.XRight, draw.YCenter
	return f, nil
}
