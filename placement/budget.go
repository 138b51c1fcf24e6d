package placement

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/rbctl/rbctl/units"
)

// Per-tenant capacity budgets: each cache salt gets its own share of the cache's slots, as
// LMCache's FDP stress runner gives each worker its own region. A tenant over its budget
// evicts its own entries rather than another tenant's. The spec is "SALT=BUDGET,..." where
// BUDGET is a slot count (1000), a size (64G: that many bytes of slots, rounded down) or a
// share of the cache (25%); SALT "*" gives every salt not listed a budget of its own, and
// an empty SALT ("=10%") is the empty salt (untagged writes). Salts are case-sensitive
// and cannot contain ','; the last '=' of an item ends the salt; spaces around an item are
// ignored.

// ErrBudget is wrapped by every ParseBudgets and Budgets.Slots error.
var ErrBudget = errors.New("placement: bad tenant budget")

// OtherSalts is the salt of the budget every salt not listed gets.
const OtherSalts = "*"

// MaxBudgets bounds the items of a budget spec.
const MaxBudgets = 4096

// Budget is one tenant's budget as written: exactly one of Slots, Bytes or Percent is set.
type Budget struct {
	Salt    string
	Slots   int64   // a slot count
	Bytes   int64   // bytes of slots (rounded down to whole slots)
	Percent float64 // share of the cache's slots, 0 < Percent <= 100
}

func (b Budget) String() string {
	switch {
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

// SlotBudgets is a spec resolved against one cache: each listed salt's budget in slots.
type SlotBudgets struct {
	Total  int64            // slots in the cache
	BySalt map[string]int64 // listed salts
	Other  int64            // budget of each salt not listed; 0: no budget of its own
}

// Slots resolves the budgets for a cache of totalSlots slots of slotBytes each. Every
// budget must come to at least one slot, and the listed salts' budgets together must fit
// the cache (the "*" budget is per salt, so only it alone must fit).
func (bs Budgets) Slots(totalSlots, slotBytes int64) (SlotBudgets, error) {
	if totalSlots < 1 || slotBytes < 1 {
		return SlotBudgets{}, fmt.Errorf("%w: a cache of %d slots of %d bytes", ErrBudget, totalSlots, slotBytes)
	}
	sb := SlotBudgets{Total: totalSlots, BySalt: map[string]int64{}}
	var sum int64
	for _, b := range bs {
		n := b.Slots
		switch {
		case b.Percent > 0:
			n = int64(math.Floor(b.Percent / 100 * float64(totalSlots)))
		case b.Bytes > 0:
			n = b.Bytes / slotBytes
		}
		if n < 1 {
			return sb, fmt.Errorf("%w: %s is less than one slot of %d bytes in a cache of %d slots", ErrBudget, b, slotBytes, totalSlots)
		}
		if n > totalSlots {
			return sb, fmt.Errorf("%w: %s is %d slots, the cache holds %d", ErrBudget, b, n, totalSlots)
		}
		if b.Salt == OtherSalts {
			sb.Other = n
			continue
		}
		sb.BySalt[b.Salt] = n
		sum += n
	}
	if sum > totalSlots {
		return sb, fmt.Errorf("%w: the listed budgets add up to %d slots, the cache holds %d", ErrBudget, sum, totalSlots)
	}
	return sb, nil
}

// Limit returns a salt's budget in slots, and false when it has none of its own (it is then
// bounded by the cache only).
func (sb SlotBudgets) Limit(salt string) (int64, bool) {
	if n, ok := sb.BySalt[salt]; ok {
		return n, true
	}
	if sb.Other > 0 {
		return sb.Other, true
	}
	return 0, false
}

// Ledger counts the slots each salt holds against its budget. Safe for concurrent use.
type Ledger struct {
	budgets SlotBudgets
	mu      sync.Mutex
	used    map[string]int64
}

// NewLedger starts an empty ledger for the budgets.
func NewLedger(sb SlotBudgets) *Ledger { return &Ledger{budgets: sb, used: map[string]int64{}} }

// Over reports whether storing one more slot for salt would exceed its budget: the cue to
// evict one of salt's own entries first.
func (l *Ledger) Over(salt string) bool {
	limit, ok := l.budgets.Limit(salt)
	if !ok {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.used[salt] >= limit
}

// Charge records a slot stored for salt; Credit one freed.
func (l *Ledger) Charge(salt string) { l.mu.Lock(); l.used[salt]++; l.mu.Unlock() }

// Credit records a slot of salt freed (deleted or evicted); it never goes below zero.
func (l *Ledger) Credit(salt string) {
	l.mu.Lock()
	if l.used[salt] > 1 {
		l.used[salt]--
	} else {
		delete(l.used, salt)
	}
	l.mu.Unlock()
}

// Used returns the slots salt holds.
func (l *Ledger) Used(salt string) int64 { l.mu.Lock(); defer l.mu.Unlock(); return l.used[salt] }

// Salts lists the salts holding slots, sorted.
func (l *Ledger) Salts() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.used))
	for s := range l.used {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}
