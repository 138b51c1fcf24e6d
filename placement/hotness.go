package placement

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

const (
	sketchRows  = 4
	sketchBits  = 14
	sketchWidth = 1 << sketchBits // counters per row
)

// rowSeeds make the sketch's rows independent hash functions of the identity.
var rowSeeds = [sketchRows]uint64{0x9e3779b97f4a7c15, 0xbf58476d1ce4e5b9, 0x94d049bb133111eb, 0xd6e8feb86659fd93}

// hotness estimates each key's access frequency with a count-min sketch keyed by Identity,
// halving every counter every decayEvery observations. Classes are relative to the mean
// count of the keys seen (total increments / keys first seen, both decayed too), so they
// adapt to the stream's rate: with t = max(2, 2·mean), a key below t is class 0 (cold),
// then class 1 for [t, 4t), 2 for [4t, 16t), ... capped at n-1. Handle 0 holds the coldest
// data, handle n-1 the hottest. Deletes do not clear history, so a key rewritten after
// eviction keeps its class.
type hotness struct {
	n          int
	decayEvery uint64
	obs        atomic.Uint64
	total      atomic.Uint64 // increments (decayed)
	distinct   atomic.Uint64 // keys whose estimate was 0 when observed (decayed)
	decayMu    sync.Mutex
	cm         [sketchRows][sketchWidth]atomic.Uint32
}

// NewHotness returns the hotness policy over n handles.
func NewHotness(n int) Policy {
	return &hotness{n: max(n, 1), decayEvery: 8 * sketchWidth}
}

func (p *hotness) Name() string { return "hotness" }

func slot(id uint64, row int) uint32 {
	x := (id ^ rowSeeds[row]) * 0x2545f4914f6cdd1d
	x ^= x >> 29
	return uint32(x >> (64 - sketchBits))
}

// Estimate returns the sketch's (over-)estimate of the key's decayed access count.
func (p *hotness) Estimate(id uint64) uint32 {
	est := ^uint32(0)
	for r := range sketchRows {
		est = min(est, p.cm[r][slot(id, r)].Load())
	}
	return est
}

func (p *hotness) Place(w Write) Handle {
	if p.n == 1 {
		return 0
	}
	est := uint64(p.Estimate(w.Identity))
	t := max(2, 2*p.total.Load()/max(p.distinct.Load(), 1))
	if est < t {
		return 0
	}
	c := 1 + (bits.Len64(est/t)-1)/2
	return Handle(min(c, p.n-1))
}

// Observe counts lookups and loads as accesses; a store counts only when the key has
// history (a rewrite after eviction is a reuse); deletes change nothing.
func (p *hotness) Observe(id uint64, ev Event) {
	switch ev {
	case Lookup, Load:
	case Store:
		if p.Estimate(id) == 0 {
			return
		}
	default:
		return
	}
	// Conservative update: raise only the rows at the minimum, which keeps the estimate
	// tighter for skewed streams.
	est := p.Estimate(id)
	if est == 0 {
		p.distinct.Add(1)
	}
	p.total.Add(1)
	for r := range sketchRows {
		c := &p.cm[r][slot(id, r)]
		if v := c.Load(); v == est && v != ^uint32(0) {
			c.CompareAndSwap(v, v+1)
		}
	}
	if p.obs.Add(1)%p.decayEvery == 0 {
		p.decay()
	}
}

func (p *hotness) decay() {
	p.decayMu.Lock()
	defer p.decayMu.Unlock()
	for _, a := range []*atomic.Uint64{&p.total, &p.distinct} {
		for {
			v := a.Load()
			if a.CompareAndSwap(v, v>>1) {
				break
			}
		}
	}
	for r := range sketchRows {
		for i := range sketchWidth {
			c := &p.cm[r][i]
			for {
				v := c.Load()
				if v == 0 || c.CompareAndSwap(v, v>>1) {
					break
				}
			}
		}
	}
}
