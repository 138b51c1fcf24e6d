package placement

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/rbctl/rbctl/units"
)

// Per-tenant capacity budgets: each cache salt gets its own share of the cache's slots, as
// LMCache's FDP stress runner gives each worker its own region. A tenant over its budget
// evicts its own entries rather than another tenant's. The spec is "SALT=BUDGET,..." where
// BUDGET is a slot count (1000), a size (64G: that many bytes of slots, rounded down) or a
// share of the cache (25%); SALT "*" gives every salt not listed a budget of its own, and
// an empty SALT ("=10%") is the empty salt (untagged writes). "*=equal" (or "equal" alone)
// splits what the listed budgets leave evenly among the salts not listed: "equal" by
// itself gives every tenant the same share. Salts are case-sensitive and cannot contain
// ','; the last '=' of an item ends the salt; spaces around an item are ignored.

// ErrBudget is wrapped by every ParseBudgets, Check and Resolve error.
var ErrBudget = errors.New("placement: bad tenant budget")

// OtherSalts is the salt of the budget every salt not listed gets.
const OtherSalts = "*"

// MaxBudgets bounds the items of a budget spec.
const MaxBudgets = 4096

// Equal is the budget word for an even split ("*=equal").
const Equal = "equal"

// Budget is one tenant's budget as written: exactly one of Slots, Bytes, Percent or Equal
// is set.
type Budget struct {
	Salt    string
	Slots   int64   // a slot count
	Bytes   int64   // bytes of slots (rounded down to whole slots)
	Percent float64 // share of the cache's slots, 0 < Percent <= 100
	Equal   bool    // "*" only: an even share of what the listed budgets leave
}

func (b Budget) String() string {
	switch {
	case b.Equal:
		return b.Salt + "=" + Equal
	case b.Percent > 0:
		return b.Salt + "=" + strconv.FormatFloat(b.Percent, 'g', -1, 64) + "%"
	case b.Bytes > 0:
		return b.Salt + "=" + strconv.FormatInt(b.Bytes, 10) + "B"
	}
	return b.Salt + "=" + strconv.FormatInt(b.Slots, 10)
}

// Budgets is a parsed budget spec, in the order written.
type Budgets []Budget

// String is the canonical spec, which ParseBudgets accepts again.
func (bs Budgets) String() string {
	s := make([]string, len(bs))
	for i, b := range bs {
		s[i] = b.String()
	}
	return strings.Join(s, ",")
}

// ParseBudgets reads "SALT=BUDGET,...". An empty spec means no budgets.
func ParseBudgets(spec string) (Budgets, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	items := strings.Split(spec, ",")
	if len(items) > MaxBudgets {
		return nil, fmt.Errorf("%w: %d tenants, at most %d", ErrBudget, len(items), MaxBudgets)
	}
	seen := map[string]bool{}
	var out Budgets
	for _, it := range items {
		it = strings.TrimSpace(it)
		if it == Equal {
			it = OtherSalts + "=" + Equal
		}
		i := strings.LastIndexByte(it, '=')
		if i < 0 {
			return nil, fmt.Errorf("%w: %q: want SALT=BUDGET, as in rag=40%%,chat=1000,agent=64G", ErrBudget, it)
		}
		b := Budget{Salt: it[:i]}
		if seen[b.Salt] {
			return nil, fmt.Errorf("%w: salt %q has two budgets", ErrBudget, b.Salt)
		}
		seen[b.Salt] = true
		v := strings.TrimSpace(it[i+1:])
		switch {
		case strings.HasPrefix(v, "-"):
			return nil, fmt.Errorf("%w: %q: a budget cannot be negative", ErrBudget, it)
		case v == Equal:
			if b.Salt != OtherSalts {
				return nil, fmt.Errorf("%w: %q: %q applies to \"*\" (the salts not listed), as in rag=40%%,*=equal", ErrBudget, it, Equal)
			}
			b.Equal = true
		case strings.HasSuffix(v, "%"):
			p, err := strconv.ParseFloat(strings.TrimSpace(v[:len(v)-1]), 64)
			if err != nil || math.IsNaN(p) || p <= 0 || p > 100 {
				return nil, fmt.Errorf("%w: %q: a share must be above 0%% and at most 100%%", ErrBudget, it)
			}
			b.Percent = p
		case v != "" && strings.Trim(v, "0123456789") == "":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("%w: %q: a slot count must be an integer >= 1", ErrBudget, it)
			}
			b.Slots = n
		default:
			n, err := units.ParseSize(v)
			if err != nil {
				return nil, fmt.Errorf("%w: %q: want a slot count (1000), a size (64G) or a share (25%%): %w", ErrBudget, it, err)
			}
			if n < 1 {
				return nil, fmt.Errorf("%w: %q: a size must be at least one byte", ErrBudget, it)
			}
			b.Bytes = n
		}
		out = append(out, b)
	}
	return out, nil
}

// Allocation is a budget spec resolved against one cache and the salts of a workload.
type Allocation struct {
	Capacity int64   // slots the budgets divide
	Limits   []int64 // per salt, in the workload's order: its budget in slots; 0: none of its own
	Shared   int64   // slots the salts without a budget share; 0 when every salt has one
}

// Limit returns salt i's budget in slots, and false when it has none of its own (it then
// shares Shared with the other salts without one).
func (a Allocation) Limit(i int) (int64, bool) {
	if i < 0 || i >= len(a.Limits) || a.Limits[i] == 0 {
		return a.Shared, false
	}
	return a.Limits[i], true
}

// Check refuses a spec that no cache could give a workload with these salts: a budget for a
// salt the workload does not have, shares adding up to more than the whole cache, or shares
// taking all of it while some salt has no budget.
func (bs Budgets) Check(salts []string) error {
	have := make(map[string]bool, len(salts))
	for _, s := range salts {
		have[s] = true
	}
	listed := map[string]bool{}
	var share float64
	var star *Budget
	for i := range bs {
		b := &bs[i]
		if b.Salt == OtherSalts {
			star = b
			continue
		}
		if !have[b.Salt] {
			return fmt.Errorf("%w: salt %q has a budget, but the workload has no such tenant (its salts: %s)", ErrBudget, b.Salt, saltList(salts))
		}
		listed[b.Salt] = true
		share += b.Percent
	}
	if star != nil && star.Percent > 0 {
		for _, s := range salts {
			if !listed[s] {
				share += star.Percent
			}
		}
	}
	if share > 100+1e-9 {
		return fmt.Errorf("%w: the shares add up to %g%% of the cache", ErrBudget, share)
	}
	if share >= 100 && star == nil && len(listed) < len(have) {
		var rest []string
		for _, s := range salts {
			if !listed[s] {
				rest = append(rest, s)
			}
		}
		return fmt.Errorf("%w: the shares take the whole cache, none is left for the salts without one (%s)", ErrBudget, saltList(rest))
	}
	return nil
}

// Resolve gives each salt its budget in a cache of capacity slots of slotBytes each.
// Listed salts get theirs; the others get the "*" budget, or with "*=equal" an even share of
// what the listed budgets leave; a salt with neither shares the slots left over with the
// other such salts (Allocation.Shared). Every budget comes to at least one slot, the
// budgets together fit the capacity, and salts without a budget are left at least one
// slot; anything else is refused.
func (bs Budgets) Resolve(salts []string, capacity, slotBytes int64) (Allocation, error) {
	a := Allocation{Capacity: capacity, Limits: make([]int64, len(salts))}
	if capacity < 1 || slotBytes < 1 {
		return a, fmt.Errorf("%w: a cache of %d slots of %d bytes", ErrBudget, capacity, slotBytes)
	}
	if err := bs.Check(salts); err != nil {
		return a, err
	}
	slots := func(b Budget) (int64, error) {
		n := b.Slots
		switch {
		case b.Percent > 0:
			n = int64(math.Floor(b.Percent / 100 * float64(capacity)))
		case b.Bytes > 0:
			n = b.Bytes / slotBytes
		}
		if n < 1 {
			return 0, fmt.Errorf("%w: %s is less than one slot of %d bytes in a cache of %d slots", ErrBudget, b, slotBytes, capacity)
		}
		if n > capacity {
			return 0, fmt.Errorf("%w: %s is %d slots, the cache holds %d", ErrBudget, b, n, capacity)
		}
		return n, nil
	}
	bySalt := map[string]int64{}
	var star *Budget
	for i := range bs {
		if bs[i].Salt == OtherSalts {
			star = &bs[i]
			continue
		}
		n, err := slots(bs[i])
		if err != nil {
			return a, err
		}
		bySalt[bs[i].Salt] = n
	}
	var starN, sum int64
	if star != nil && !star.Equal {
		n, err := slots(*star)
		if err != nil {
			return a, err
		}
		starN = n
	}
	var rest []int // salts not listed
	for i, s := range salts {
		if n, ok := bySalt[s]; ok {
			a.Limits[i] = n
		} else {
			a.Limits[i] = starN
			rest = append(rest, i)
		}
		sum += a.Limits[i]
	}
	if sum > capacity {
		return a, fmt.Errorf("%w: the budgets add up to %d slots, the cache holds %d", ErrBudget, sum, capacity)
	}
	if star != nil && star.Equal && len(rest) > 0 {
		each := (capacity - sum) / int64(len(rest))
		if each < 1 {
			return a, fmt.Errorf("%w: *=equal: the listed budgets leave %d of %d slots for %d salts", ErrBudget, capacity-sum, capacity, len(rest))
		}
		for _, i := range rest {
			a.Limits[i] = each
		}
		return a, nil
	}
	var unbudgeted []string
	for i, n := range a.Limits {
		if n == 0 {
			unbudgeted = append(unbudgeted, salts[i])
		}
	}
	if len(unbudgeted) > 0 {
		if a.Shared = capacity - sum; a.Shared < 1 {
			return a, fmt.Errorf("%w: the budgets take all %d slots, none is left for the salts without one (%s)", ErrBudget, capacity, saltList(unbudgeted))
		}
	}
	return a, nil
}

// saltList quotes up to eight salts for a message.
func saltList(salts []string) string {
	var b strings.Builder
	for i, s := range salts {
		if i == 8 {
			fmt.Fprintf(&b, " and %d more", len(salts)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(s))
	}
	if len(salts) == 0 {
		return "none"
	}
	return b.String()
}
