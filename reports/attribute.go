package reports

import (
	"fmt"
	"math"
	"math/bits"
)

// Attribute splits e.WAF − 1 over e.Steps by e.Method (sequential or shapley), from
// waf(steps): the WAF of the run with the changes of those steps (indices into e.Steps)
// applied; waf(nil) is e.WAF and is not asked. Steps with Skipped set are left out. A step
// whose change alone fails is skipped with skip(its error). Attribute fills each step's
// Part, Alone and (sequential) After, e.Residual (WAF − 1 with every change), e.Combos
// (shapley: every combination) and e.Runs (waf calls), so that the parts and the residual
// add up to e.WAF − 1. Both sim (counterfactual simulate runs) and bench (replays of the
// shadow model's recorded writes) explain through it.
func Attribute(e *Explanation, waf func(steps []int) (float64, error), skip func(step int, err error) string) error {
	var on []int
	for i, s := range e.Steps {
		if s.Skipped == "" {
			on = append(on, i)
		}
	}
	memo := map[uint]float64{0: e.WAF}
	fails := map[uint]error{}
	get := func(mask uint, on []int) (float64, error) {
		if v, ok := memo[mask]; ok {
			return v, nil
		}
		if err, ok := fails[mask]; ok {
			return 0, err
		}
		var steps []int
		for k, i := range on {
			if mask&(1<<k) != 0 {
				steps = append(steps, i)
			}
		}
		v, err := waf(steps)
		e.Runs++
		if err != nil {
			fails[mask] = err
			return 0, err
		}
		memo[mask] = v
		return v, nil
	}
	// Alone; a change that fails alone is skipped and the masks re-indexed without it.
	var kept []int
	for k, i := range on {
		v, err := get(1<<k, on)
		if err != nil {
			if msg := skip(i, err); msg != "" {
				e.Steps[i].Skipped = msg
				continue
			}
			return err
		}
		e.Steps[i].Alone = F64(v)
		kept = append(kept, i)
	}
	memo, fails = map[uint]float64{0: e.WAF}, map[uint]error{}
	for k, i := range kept {
		memo[1<<k] = *e.Steps[i].Alone
	}
	on = kept
	n := len(on)
	full := uint(1)<<n - 1
	switch e.Method {
	case "sequential":
		var mask uint
		prev := e.WAF
		for k, i := range on {
			v, err := get(mask|1<<k, on)
			if err != nil {
				// Feasible alone, not with the changes before it (say a halved RU smaller
				// than a region-evicting cache's slot): left out of the sequence.
				msg := skip(i, err)
				if msg == "" {
					return fmt.Errorf("the changes up to %s together: %w", e.Steps[i].Change, err)
				}
				e.Steps[i].Skipped = "with the changes above, " + msg
				continue
			}
			mask |= 1 << k
			e.Steps[i].Part, e.Steps[i].After = prev-v, F64(v)
			prev = v
		}
		full = mask
	case "shapley":
		fact := func(k int) float64 { return math.Gamma(float64(k + 1)) }
		for k, i := range on {
			var phi float64
			for s := uint(0); s <= full; s++ {
				if s&(1<<k) != 0 {
					continue
				}
				without, err := get(s, on)
				if err == nil {
					var with float64
					with, err = get(s|1<<k, on)
					size := bits.OnesCount(s)
					phi += fact(size) * fact(n-size-1) / fact(n) * (without - with)
				}
				if err != nil {
					return fmt.Errorf("the shapley method needs every combination of the changes, and one fails: %w", err)
				}
			}
			e.Steps[i].Part = phi
		}
		for mask := uint(0); mask <= full; mask++ {
			c := ExplainCombo{WAF: memo[mask]}
			for k, i := range on {
				if mask&(1<<k) != 0 {
					c.Changes = append(c.Changes, e.Steps[i].Change)
				}
			}
			e.Combos = append(e.Combos, c)
		}
	default:
		return fmt.Errorf("attribution method %q: want sequential or shapley", e.Method)
	}
	last, err := get(full, on)
	if err != nil {
		return err
	}
	e.Residual = last - 1
	return nil
}
