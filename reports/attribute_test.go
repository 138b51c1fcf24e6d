package reports

import (
	"errors"
	"math"
	"testing"
)

// Attribute on a made-up WAF function: parts and residual add up to WAF − 1 under both
// methods; a change that fails alone is skipped; in a sequence, a change that fails only
// with the ones before it is skipped there and the rest still adds up; shapley gives
// symmetric changes equal parts, and a change that fails only in some combination is
// skipped there too (the latest change of the smallest failing combination).
func TestAttribute(t *testing.T) {
	errNo := errors.New("no")
	// WAF = 1.5 − 0.1 per change applied, − 0.05 more if changes 0 and 2 are together;
	// change 1 fails alone; change 3 fails with change 0.
	waf := func(steps []int) (float64, error) {
		on := map[int]bool{}
		for _, i := range steps {
			on[i] = true
		}
		if on[1] || (on[3] && on[0]) {
			return 0, errNo
		}
		v := 1.5 - 0.1*float64(len(steps))
		if on[0] && on[2] {
			v -= 0.05
		}
		return v, nil
	}
	skip := func(int, error) string { return "no" }
	for _, method := range []string{"sequential", "shapley"} {
		e := &Explanation{WAF: 1.5, Method: method, Steps: make([]ExplainStep, 4)}
		for i := range e.Steps {
			e.Steps[i].Change = string(rune('a' + i))
		}
		if err := Attribute(e, waf, skip); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		sum := e.Residual
		for _, s := range e.Steps {
			sum += s.Part
		}
		if math.Abs(sum-0.5) > 1e-12 || e.Steps[1].Skipped == "" || e.Steps[3].Skipped == "" || e.Steps[3].Alone == nil {
			t.Errorf("%s: sum %.12f, steps %+v", method, sum, e.Steps)
		}
		if method == "shapley" {
			// d fails only with a: skipped as in the sequence, naming the change it fails
			// with, and the rest attributed as if d were not there (below).
			if got := e.Steps[3].Skipped; got != "with a, no" || e.Steps[3].Part != 0 {
				t.Errorf("shapley: d skipped %q part %v, want \"with a, no\" and no part", got, e.Steps[3].Part)
			}
			if p0, p2 := e.Steps[0].Part, e.Steps[2].Part; math.Abs(p0-0.125) > 1e-12 || math.Abs(p2-0.125) > 1e-12 || len(e.Combos) != 4 {
				t.Errorf("shapley parts %.4f %.4f, %d combos; want 0.125 each over 4", p0, p2, len(e.Combos))
			}
			continue
		}
		if p0, p2 := e.Steps[0].Part, e.Steps[2].Part; math.Abs(p0-0.1) > 1e-12 || math.Abs(p2-0.15) > 1e-12 {
			t.Errorf("sequential parts %.3f %.3f, want 0.1 and 0.15 (the interaction goes to the later step)", p0, p2)
		}
	}
	// Shapley without the failing pair: the interaction is shared equally by 0 and 2.
	e := &Explanation{WAF: 1.5, Method: "shapley", Steps: make([]ExplainStep, 4)}
	e.Steps[3].Skipped = "already"
	if err := Attribute(e, waf, skip); err != nil {
		t.Fatal(err)
	}
	if p0, p2 := e.Steps[0].Part, e.Steps[2].Part; math.Abs(p0-0.125) > 1e-12 || math.Abs(p2-0.125) > 1e-12 {
		t.Errorf("shapley parts %.4f %.4f, want 0.125 each", p0, p2)
	}
	if sum := e.Steps[0].Part + e.Steps[2].Part + e.Residual; math.Abs(sum-0.5) > 1e-12 || len(e.Combos) != 4 {
		t.Errorf("shapley sum %.12f, %d combos", sum, len(e.Combos))
	}
}
