package ftl

import (
	"math"
	"testing"
)

func TestLambertW0(t *testing.T) {
	known := []struct{ x, w float64 }{
		{0, 0},
		{1, 0.5671432904097838},  // omega constant
		{math.E, 1},              // 1·e^1
		{2 * math.E * math.E, 2}, // 2·e^2
		{-1 / math.E, -1},
		{-0.2, -0.2591711018190737},
		{-0.3678, -0.9793607149578306},
		{1e6, 11.383358086140053},
	}
	for _, k := range known {
		if got := LambertW0(k.x); math.Abs(got-k.w) > 1e-9*(1+math.Abs(k.w)) {
			t.Errorf("W0(%v) = %.16g, want %.16g", k.x, got, k.w)
		}
	}
	// w·e^w = x across the domain, and w >= -1 (principal branch).
	for x := -1/math.E + 1e-12; x < 50; x += 0.0137 {
		w := LambertW0(x)
		if w < -1 || math.Abs(w*math.Exp(w)-x) > 1e-12*(1+math.Abs(x)) {
			t.Fatalf("W0(%v) = %v: w·e^w = %v", x, w, w*math.Exp(w))
		}
	}
	if !math.IsNaN(LambertW0(-0.5)) {
		t.Error("W0 below -1/e should be NaN")
	}
}

func TestGreedyWAFFormula(t *testing.T) {
	for _, c := range []struct{ rho, want float64 }{{0.07, 7.82}, {0.28, 2.48}, {0.50, 1.72}} {
		if got := GreedyWAF(c.rho); math.Abs(got-c.want) > 0.005 {
			t.Errorf("GreedyWAF(%v) = %.4f, want %.2f", c.rho, got, c.want)
		}
	}
	if !math.IsInf(GreedyWAF(0), 1) {
		t.Error("GreedyWAF(0) should be +Inf")
	}
}
