package ftl

import "math"

// LambertW0 returns the principal branch W0(x) of the Lambert W function (w·e^w = x, w ≥ −1)
// for x ≥ −1/e, by Halley iteration; NaN for x < −1/e.
func LambertW0(x float64) float64 {
	const invE = 1 / math.E
	switch {
	case math.IsNaN(x) || x < -invE:
		return math.NaN()
	case x == -invE:
		return -1
	case x == 0:
		return 0
	case math.IsInf(x, 1):
		return x
	}
	var w float64
	switch {
	case x < -0.25:
		// Series about the branch point: w ≈ −1 + p − p²/3 + 11p³/72, p = √(2(e·x+1)).
		p := math.Sqrt(2 * (math.E*x + 1))
		w = -1 + p - p*p/3 + 11*p*p*p/72
	case x < 3:
		w = math.Log1p(x) * 0.8
	default:
		l := math.Log(x)
		w = l - math.Log(l)
	}
	for range 64 {
		ew := math.Exp(w)
		f := w*ew - x
		if f == 0 {
			break
		}
		wp1 := w + 1
		if wp1 == 0 {
			break
		}
		// Halley: w -= f / (e^w (w+1) − (w+2) f / (2(w+1))).
		dw := f / (ew*wp1 - (w+2)*f/(2*wp1))
		w -= dw
		if math.Abs(dw) <= 1e-15*(1+math.Abs(w)) {
			break
		}
	}
	return w
}

// GreedyWAF is the analytic steady-state write amplification of greedy GC under uniform
// random writes for spare factor rho (physical/logical − 1):
// WA = α / (α + W0(−α·e^(−α))), α = 1 + ρ. It is 7.82 at ρ = 0.07, 2.48 at 0.28, 1.72 at 0.5.
func GreedyWAF(rho float64) float64 {
	if rho <= 0 {
		return math.Inf(1)
	}
	a := 1 + rho
	return a / (a + LambertW0(-a*math.Exp(-a)))
}
