package plots

import (
	"math"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
)

// wantTicks is about how many labelled ticks a linear axis gets.
const wantTicks = 6

// Ticks marks a linear axis: labelled ticks at multiples of one step of 1, 2 or 5 × 10^k
// (the step that puts closest to wantTicks of them on the axis), unlabelled minor ticks
// between them, and labels from FormatTicks, so no two ticks share a label. A Figure fixes
// the step it chose when it fitted the axis's range (so the range ends on a labelled tick);
// the zero value chooses per range.
type Ticks struct {
	step step
	// hideMin leaves the tick at the range's minimum unlabelled: the other axis labels the
	// same value at the same corner (shareOrigin).
	hideMin bool
}

var _ plot.Ticker = Ticks{}

// Ticks returns the ticks of the range [min, max].
func (t Ticks) Ticks(min, max float64) []plot.Tick {
	if !(max > min) || math.IsInf(max-min, 0) {
		return label([]plot.Tick{{Value: min}})
	}
	s := t.step
	if s.m == 0 || (max-min)/s.value() > 10*wantTicks {
		s = niceStep(min, max)
	}
	var ticks []plot.Tick
	for i := math.Ceil(min / s.minor()); ; i++ {
		v := s.minorValue(i)
		if v > max {
			break
		}
		t := plot.Tick{Value: v}
		if math.Mod(i, s.ratio()) == 0 {
			t.Label = "major" // replaced by label
		}
		ticks = append(ticks, t)
	}
	ticks = label(ticks)
	if t.hideMin && len(ticks) > 0 && ticks[0].Value == min {
		ticks[0].Label = ""
	}
	return ticks
}

// shareOrigin labels a corner value once: when both axes start on a labelled tick with the
// same label (0 and 0), the y axis keeps it and the x axis's first tick goes unlabelled, so
// no label sits on the other axis's line where it could be read as that axis's.
func shareOrigin(x, y *plot.Axis) {
	xt, xok := x.Tick.Marker.(Ticks)
	if _, yok := y.Tick.Marker.(Ticks); !xok || !yok {
		return
	}
	first := func(a *plot.Axis) (plot.Tick, bool) {
		ts := a.Tick.Marker.Ticks(a.Min, a.Max)
		if len(ts) < 2 {
			return plot.Tick{}, false
		}
		return ts[0], ts[0].Value == a.Min && ts[0].Label != ""
	}
	xf, ok1 := first(x)
	yf, ok2 := first(y)
	if ok1 && ok2 && xf.Label == yf.Label {
		xt.hideMin = true
		x.Tick.Marker = xt
	}
}

// step is m × 10^k.
type step struct {
	m float64 // 1, 2 or 5
	k int
}

func (s step) value() float64 { return s.m * math.Pow10(s.k) }

// ratio is how many minor intervals a major one holds.
func (s step) ratio() float64 {
	if s.m == 2 {
		return 2
	}
	return 5
}

func (s step) minor() float64 { return s.value() / s.ratio() }

// minorValue is the i-th multiple of the minor step, i × m × 10^k / ratio with one rounding
// (an integer over an exact integer), so 1.1 prints as 1.1 and not as 1.1000000000000001.
func (s step) minorValue(i float64) float64 {
	n := i * s.m
	if s.k < 0 {
		return n / (s.ratio() * math.Pow10(-s.k))
	}
	return n * math.Pow10(s.k) / s.ratio()
}

// niceStep picks the major step for [min, max].
func niceStep(min, max float64) step {
	k0 := int(math.Floor(math.Log10((max - min) / wantTicks)))
	best, bestScore := step{1, k0}, math.Inf(1)
	for k := k0 - 1; k <= k0+1; k++ {
		for _, m := range []float64{1, 2, 5} {
			s := step{m, k}
			n := math.Floor(max/s.value()) - math.Ceil(min/s.value()) + 1
			// Ties go to the larger step (fewer labels); fewer than 2 labels say no scale.
			score := math.Abs(n - wantTicks)
			if n < 2 {
				score += 100
			}
			if score <= bestScore {
				best, bestScore = s, score
			}
		}
	}
	return best
}

// LogTicks marks a log-scaled axis: gonum's powers of ten, labelled by FormatTicks.
type LogTicks struct{}

var _ plot.Ticker = LogTicks{}

// Ticks returns the ticks of the range [min, max].
func (LogTicks) Ticks(min, max float64) []plot.Tick {
	var in []plot.Tick // gonum's may run past the range; their labels would set the format
	for _, t := range (plot.LogTicks{Prec: -1}).Ticks(min, max) {
		if t.Value >= min && t.Value <= max {
			in = append(in, t)
		}
	}
	return label(in)
}

// label relabels the labelled ticks with FormatTicks.
func label(ticks []plot.Tick) []plot.Tick {
	var vals []float64
	for _, t := range ticks {
		if t.Label != "" || len(ticks) == 1 {
			vals = append(vals, t.Value)
		}
	}
	labels := FormatTicks(vals)
	j := 0
	for i := range ticks {
		if ticks[i].Label != "" || len(ticks) == 1 {
			ticks[i].Label = labels[j]
			j++
		}
	}
	return ticks
}

// FormatTicks labels tick values with the fewest decimals that give every value its own
// label and state each within a thousandth of the smallest gap between them: 1.00, 1.02, …,
// 1.12, not 1, 1, 1.1, 1.1. Values of a million and more, or under a thousandth, are
// written as mantissa e exponent (2e8, 5e-4). Every label on an axis has the same number of
// decimals.
func FormatTicks(vals []float64) []string {
	out := make([]string, len(vals))
	if len(vals) == 0 {
		return out
	}
	sorted := append([]float64(nil), vals...)
	sort.Float64s(sorted)
	gap, maxAbs := math.Inf(1), 0.0
	for i, v := range sorted {
		if i > 0 && v > sorted[i-1] {
			gap = math.Min(gap, v-sorted[i-1])
		}
		maxAbs = math.Max(maxAbs, math.Abs(v))
	}
	tol := gap / 1000
	if math.IsInf(gap, 1) { // one distinct value
		tol = maxAbs * 1e-9
	}
	sci := maxAbs >= 1e6 || (maxAbs > 0 && maxAbs < 1e-3)
	for prec := 0; prec <= 17; prec++ {
		seen := map[string]float64{}
		ok := true
		for i, v := range vals {
			s := formatTick(v, prec, sci)
			p, err := strconv.ParseFloat(s, 64)
			if prev, dup := seen[s]; err != nil || math.Abs(p-v) > tol || (dup && prev != v) {
				ok = false
				break
			}
			seen[s] = v
			out[i] = s
		}
		if ok {
			return out
		}
	}
	for i, v := range vals { // unreachable for finite values: 17 digits state any float64
		out[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return out
}

// formatTick writes v with prec decimals, fixed or as mantissa e exponent.
func formatTick(v float64, prec int, sci bool) string {
	if v == 0 {
		v = 0 // -0 prints as 0
	}
	if !sci {
		s := strconv.FormatFloat(v, 'f', prec, 64)
		if strings.Trim(s, "-0.") == "" {
			s = strings.TrimPrefix(s, "-")
		}
		return s
	}
	if v == 0 {
		return "0"
	}
	s := strconv.FormatFloat(v, 'e', prec, 64) // 2.5e+08
	mant, exp, _ := strings.Cut(s, "e")
	n, _ := strconv.Atoi(exp)
	return mant + "e" + strconv.Itoa(n)
}

// LatencyTicks are LogTicks of a latency in microseconds, labelled as times: 10 µs, 1 ms,
// 100 ms, 2 s.
type LatencyTicks struct{}

var _ plot.Ticker = LatencyTicks{}

// Ticks returns the ticks of the range [min, max] (microseconds).
func (LatencyTicks) Ticks(min, max float64) []plot.Tick {
	ticks := LogTicks{}.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = Micros(ticks[i].Value)
		}
	}
	return ticks
}

// Micros writes a time given in microseconds in the unit that keeps it short: 250 µs,
// 1.5 ms, 20 ms, 2 s.
func Micros(us float64) string {
	v, unit := us, "µs"
	switch {
	case us >= 1e6:
		v, unit = us/1e6, "s"
	case us >= 1e3:
		v, unit = us/1e3, "ms"
	}
	return strconv.FormatFloat(v, 'g', 3, 64) + " " + unit
}
