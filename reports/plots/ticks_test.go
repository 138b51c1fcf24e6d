package plots

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/plot"
)

// majors returns the labelled ticks.
func majors(ticks []plot.Tick) []plot.Tick {
	var out []plot.Tick
	for _, t := range ticks {
		if t.Label != "" {
			out = append(out, t)
		}
	}
	return out
}

// checkLabels fails t unless the labelled ticks have distinct labels, each stating its
// value to within a thousandth of the step between them.
func checkLabels(t *testing.T, what string, ticks []plot.Tick) {
	t.Helper()
	m := majors(ticks)
	seen := map[string]bool{}
	for i, tk := range m {
		if seen[tk.Label] {
			t.Errorf("%s: label %q twice in %v", what, tk.Label, labels(m))
		}
		seen[tk.Label] = true
		v, err := parseTick(tk.Label)
		if err != nil {
			t.Errorf("%s: label %q is not a number", what, tk.Label)
			continue
		}
		if i > 0 {
			if step := tk.Value - m[i-1].Value; math.Abs(v-tk.Value) > step/1000 {
				t.Errorf("%s: label %q for %v", what, tk.Label, tk.Value)
			}
		}
	}
}

func labels(ticks []plot.Tick) []string {
	var out []string
	for _, t := range ticks {
		out = append(out, t.Label)
	}
	return out
}

func TestTicksDistinctLabels(t *testing.T) {
	cases := []struct {
		lo, hi float64
		want   string // the labelled ticks, "" to check only that they are distinct
	}{
		{1.00, 1.12, "1.00 1.02 1.04 1.06 1.08 1.10 1.12"}, // issue 31: was 1, 1, 1.1, 1.1
		{1.00, 1.09, "1.00 1.02 1.04 1.06 1.08"},
		{0, 0.01, "0.000 0.002 0.004 0.006 0.008 0.010"},
		{1e3, 1e9, "2e8 4e8 6e8 8e8 1e9"},
		{0, 800, "0 200 400 600 800"},
		{0, 1, "0.0 0.2 0.4 0.6 0.8 1.0"},
		{0.3, 11.5, "2 4 6 8 10"},
		{-5, 5, "-4 -2 0 2 4"},
		{0.5, 0.95, "0.5 0.6 0.7 0.8 0.9"},
		{0, 5120, "0 1000 2000 3000 4000 5000"},
		{1e-6, 5e-6, ""},
		{1, 1.0001, ""},
		{123456, 123457, ""},
		{0, 3e12, ""},
		{-1e-4, 0, ""},
	}
	for _, c := range cases {
		ticks := Ticks{}.Ticks(c.lo, c.hi)
		what := strconv.FormatFloat(c.lo, 'g', -1, 64) + "–" + strconv.FormatFloat(c.hi, 'g', -1, 64)
		m := majors(ticks)
		if len(m) < 2 {
			t.Errorf("%s: %d labelled ticks %v, want at least 2", what, len(m), labels(m))
			continue
		}
		checkLabels(t, what, ticks)
		for _, tk := range ticks {
			if tk.Value < c.lo || tk.Value > c.hi {
				t.Errorf("%s: tick %v outside the range", what, tk.Value)
			}
		}
		if got := strings.Join(labels(m), " "); c.want != "" && got != c.want {
			t.Errorf("%s: labels %q, want %q", what, got, c.want)
		}
		if len(ticks) <= len(m) {
			t.Errorf("%s: no minor ticks between %v", what, labels(m))
		}
	}
	// A degenerate range still gets one labelled tick.
	if ticks := (Ticks{}).Ticks(2, 2); len(ticks) != 1 || ticks[0].Label != "2" {
		t.Errorf("range 2–2: %+v", ticks)
	}
}

func TestFormatTicks(t *testing.T) {
	cases := []struct {
		in   []float64
		want string
	}{
		{[]float64{1, 1.04, 1.08, 1.12}, "1.00 1.04 1.08 1.12"},
		{[]float64{1.0000000000000002, 1.6000000000000003, 2.2}, "1.0 1.6 2.2"}, // float noise is not a decimal
		{[]float64{0, 2e8, 4e8}, "0 2e8 4e8"},
		{[]float64{1.5e9, 2e9}, "1.5e9 2.0e9"},
		{[]float64{0, 5e-5, 1e-4}, "0 5e-5 1e-4"},
		{[]float64{0, 5e-4, 1e-3}, "0.0000 0.0005 0.0010"},
		{[]float64{math.Copysign(0, -1), 0.5}, "0.0 0.5"},
		{[]float64{10, 100, 1000, 10000, 100000}, "10 100 1000 10000 100000"},
		{[]float64{7}, "7"},
		{nil, ""},
	}
	for _, c := range cases {
		if got := strings.Join(FormatTicks(c.in), " "); got != c.want {
			t.Errorf("FormatTicks(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestLogTicks(t *testing.T) {
	ticks := LogTicks{}.Ticks(4, 250000)
	checkLabels(t, "log 4–250000", ticks)
	if got := strings.Join(labels(majors(ticks)), " "); got != "10 100 1000 10000 100000" {
		t.Errorf("log labels %q", got)
	}
}

// parseTick reads a tick label: a number, or a time of LatencyTicks ("10 µs", "1 ms", "2 s")
// as microseconds.
func parseTick(l string) (float64, error) {
	for unit, m := range map[string]float64{" µs": 1, " ms": 1e3, " s": 1e6} {
		if n, ok := strings.CutSuffix(l, unit); ok {
			v, err := strconv.ParseFloat(n, 64)
			return v * m, err
		}
	}
	return strconv.ParseFloat(l, 64)
}
