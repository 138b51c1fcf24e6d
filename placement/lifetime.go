package placement

import (
	"math/bits"
	"sync/atomic"
)

const (
	lifeBits  = 20 // table entries = 2^lifeBits (8 MiB, allocated on the first store)
	lifeTag   = 24 // identity bits kept to tell keys sharing an entry apart
	lifeShift = 4  // the mean's fixed-point fraction bits (log2 lifetimes × 16)
)

// lifetime separates data by how long the same key lived the last time it was cached,
// measured in stores (a store clock) from its store to its delete/eviction. It needs no
// salt: it is keyed by Write.Identity and learns from Observe(Store) and Observe(Delete).
//
// A key with no completed residency in the table (first write, or its entry was taken by
// another key) goes to handle 0. A key that lived before goes to handle 1 when its last
// lifetime was at most the running mean of log2 lifetimes (short-lived) and to handle 2
// otherwise (long-lived); with 2 handles both go to 1, with 1 handle everything to 0.
// Higher handles are unused, so no handle holds a trickle of writes (every handle in use
// pins open reclaim units on the device).
//
// The table is direct-mapped, 2^20 entries of one atomic word each (8 MiB, allocated by the
// first Store): tag (24 bits of the identity), store clock (32 bits) and class (8 bits). A
// store takes over its entry, so a key's history survives until 2^20 other stores have
// passed on average. Lookups are one atomic load; racing updates of one entry lose an
// update, which only costs a placement hint.
type lifetime struct {
	n     int
	clock atomic.Uint32
	mean  atomic.Int64 // running mean of log2(lifetime) in 1/16ths; 0 = none yet
	table atomic.Pointer[[]atomic.Uint64]
}

// NewLifetime returns the lifetime policy over n handles.
func NewLifetime(n int) Policy {
	return &lifetime{n: max(n, 1)}
}

func (p *lifetime) Name() string { return "lifetime" }

func lifeSlot(id uint64) (idx uint64, tag uint64) {
	x := id * 0x9e3779b97f4a7c15
	x ^= x >> 31
	return x & (1<<lifeBits - 1), x >> (64 - lifeTag)
}

func lifePack(tag uint64, clock uint32, class uint8) uint64 {
	return tag<<40 | uint64(clock)<<8 | uint64(class)
}

// Class returns the key's learned class: 0 unknown, 1 short-lived, 2 long-lived.
func (p *lifetime) Class(id uint64) int {
	t := p.table.Load()
	if t == nil {
		return 0
	}
	idx, tag := lifeSlot(id)
	e := (*t)[idx].Load()
	if e>>40 != tag {
		return 0
	}
	return int(e & 0xff)
}

func (p *lifetime) Place(w Write) int {
	c := p.Class(w.Identity)
	return min(c, p.n-1, 2)
}

// Observe records a store's time and turns a delete into the key's lifetime class.
// Lookups and loads are ignored.
func (p *lifetime) Observe(id uint64, ev Event) {
	if ev != Store && ev != Delete {
		return
	}
	t := p.table.Load()
	if t == nil {
		if ev != Store {
			return
		}
		nt := make([]atomic.Uint64, 1<<lifeBits)
		if !p.table.CompareAndSwap(nil, &nt) {
			t = p.table.Load()
		} else {
			t = &nt
		}
	}
	idx, tag := lifeSlot(id)
	e := &(*t)[idx]
	switch ev {
	case Store:
		now := p.clock.Add(1)
		old := e.Load()
		var class uint8
		if old>>40 == tag {
			class = uint8(old)
		}
		e.Store(lifePack(tag, max(now, 1), class))
	case Delete:
		old := e.Load()
		at := uint32(old >> 8)
		if old>>40 != tag || at == 0 {
			return
		}
		life := uint64(p.clock.Load() - at + 1) // wraps correctly in uint32 arithmetic
		lg := int64(bits.Len64(life)) << lifeShift
		m := p.mean.Load()
		if m == 0 {
			m = lg
		} else {
			m += (lg - m) / 64
		}
		p.mean.Store(max(m, 1))
		class := uint8(2)
		if lg <= m {
			class = 1
		}
		e.Store(lifePack(tag, 0, class))
	}
}
