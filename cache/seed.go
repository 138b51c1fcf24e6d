package cache

import (
	"sort"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/placement"
)

// SeedPolicy restores p's salt → handle assignment from the handles recorded with the
// entries of an opened cache (placement.Seed): each salt is seeded with the handle most of
// its entries are on (ties: the lower handle), the salts with most entries first. Entries
// written without a handle (placement.None, or a v1 JSON checkpoint, which records none) are
// ignored. It returns how many salts were seeded; policies that are not Seeders seed none.
func SeedPolicy(p placement.Policy, e *engine.Engine) int {
	if _, ok := p.(placement.Seeder); !ok {
		return 0
	}
	counts := map[string]map[placement.Handle]int{}
	e.Entries(func(k engine.Key, m engine.EntryMeta) bool {
		if m.Handle == placement.None {
			return true
		}
		s := k.CacheSalt()
		if counts[s] == nil {
			counts[s] = map[placement.Handle]int{}
		}
		counts[s][m.Handle]++
		return true
	})
	type pick struct {
		salt   string
		h      placement.Handle
		n, all int
	}
	var picks []pick
	for s, byH := range counts {
		best := pick{salt: s, h: -1}
		for h, n := range byH {
			best.all += n
			if n > best.n || (n == best.n && h < best.h) {
				best.h, best.n = h, n
			}
		}
		picks = append(picks, best)
	}
	sort.Slice(picks, func(i, j int) bool {
		if picks[i].all != picks[j].all {
			return picks[i].all > picks[j].all
		}
		return picks[i].salt < picks[j].salt
	})
	seeded := 0
	for _, pk := range picks {
		if placement.Seed(p, pk.salt, pk.h) {
			seeded++
		}
	}
	return seeded
}
