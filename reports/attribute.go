package reports

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
)

// Attribute splits e.WAF − 1 over e.Steps by e.Method (sequential or shapley), from
// waf(steps): the WAF of the run with the changes of those steps (indices into e.Steps)
// applied; waf(nil) is e.WAF and is not asked. Steps with Skipped set are left out. A step
// whose change alone fails is skipped with skip(its error). A step whose change works alone
// but fails with others is skipped too, the same way under both methods: sequential, when
// it fails with the steps before it; shapley, when a combination fails, the latest step of
// the smallest failing combination (the one the sequence would have skipped), and the
// Shapley values are those of the steps left. Attribute fills each step's Part, Alone and
// (sequential) After, e.Residual (WAF − 1 with every change), e.Combos (shapley: every
// combination) and e.Runs (waf calls), so that the parts and the residual add up to
// e.WAF − 1. Both sim (counterfactual simulate runs) and bench (replays of the shadow
// model's recorded writes) explain through it.
func Attribute(e *Explanation, waf func(steps []int) (float64, error), skip func(step int, err error) string) error {
	if len(e.Steps) >= bits.UintSize {
		return fmt.Errorf("%d changes: at most %d can be attributed", len(e.Steps), bits.UintSize-1)
	}
	var on []int
	for i, s := range e.Steps {
		if s.Skipped == "" {
			on = append(on, i)
		}
	}
	// Combinations are masks over the indices of e.Steps; each runs once.
	memo := map[uint]float64{0: e.WAF}
	fails := map[uint]error{}
	get := func(mask uint) (float64, error) {
		if v, ok := memo[mask]; ok {
			return v, nil
		}
		if err, ok := fails[mask]; ok {
			return 0, err
		}
		var steps []int
		for i := range e.Steps {
			if mask&(1<<i) != 0 {
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
	// Alone; a change that fails alone is skipped.
	var kept []int
	for _, i := range on {
		v, err := get(1 << i)
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
	on = kept
	var full uint
	switch e.Method {
	case "sequential":
		prev := e.WAF
		for _, i := range on {
			v, err := get(full | 1<<i)
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
			full |= 1 << i
			e.Steps[i].Part, e.Steps[i].After = prev-v, F64(v)
			prev = v
		}
	case "shapley":
		// Every combination of the steps left must run. The smallest failing one (fewest
		// changes, then earliest) loses its latest step, as the sequence would skip it,
		// and the combinations of the steps left are tried again (those that ran are kept).
		for {
			mask, err := firstFailing(on, get)
			if err == nil {
				full = mask
				break
			}
			i := bits.Len(mask) - 1
			msg := skip(i, err)
			if msg == "" {
				return fmt.Errorf("the shapley method needs every combination of the changes, and one fails: %w", err)
			}
			var with []string
			for _, j := range on {
				if j != i && mask&(1<<j) != 0 {
					with = append(with, e.Steps[j].Change)
				}
			}
			e.Steps[i].Skipped = "with " + strings.Join(with, " ") + ", " + msg
			on = slices.DeleteFunc(on, func(j int) bool { return j == i })
		}
		n := len(on)
		fact := func(k int) float64 { return math.Gamma(float64(k + 1)) }
		for _, i := range on {
			var phi float64
			for _, s := range subsets(on) {
				if s&(1<<i) != 0 {
					continue
				}
				size := bits.OnesCount(s)
				phi += fact(size) * fact(n-size-1) / fact(n) * (memo[s] - memo[s|1<<i])
			}
			e.Steps[i].Part = phi
		}
		for _, mask := range subsets(on) {
			c := ExplainCombo{WAF: memo[mask]}
			for _, i := range on {
				if mask&(1<<i) != 0 {
					c.Changes = append(c.Changes, e.Steps[i].Change)
				}
			}
			e.Combos = append(e.Combos, c)
		}
	default:
		return fmt.Errorf("attribution method %q: want sequential or shapley", e.Method)
	}
	last, err := get(full)
	if err != nil {
		return err
	}
	e.Residual = last - 1
	return nil
}

// subsets lists every combination of the steps on, as masks over step indices, in the
// order of their local binary count (the order e.Combos lists them in).
func subsets(on []int) []uint {
	out := make([]uint, 0, 1<<len(on))
	for local := uint(0); local < 1<<len(on); local++ {
		var mask uint
		for k, i := range on {
			if local&(1<<k) != 0 {
				mask |= 1 << i
			}
		}
		out = append(out, mask)
	}
	return out
}

// firstFailing runs every combination of the steps on, fewest changes first, and returns
// the first that fails with its error, or the full combination and nil when all run.
func firstFailing(on []int, get func(uint) (float64, error)) (uint, error) {
	all := subsets(on)
	sorted := slices.Clone(all)
	slices.SortStableFunc(sorted, func(a, b uint) int { return bits.OnesCount(a) - bits.OnesCount(b) })
	for _, mask := range sorted {
		if _, err := get(mask); err != nil {
			return mask, err
		}
	}
	return all[len(all)-1], nil
}
