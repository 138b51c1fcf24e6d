package placement

import (
	"math/bits"
	"sync/atomic"
)

const (
	lifeBits  = 20 // table entries = 2^lifeBits (8 MiB, allocated on the first store)
	lifeTag   = 24 // identity bits kept to tell keys sharing an entry apart
	lifeShift = 4  // the mean's fixed-point fraction bits (log2 lifetimes × 16)
	longBits  = 21 // long-lived filter bits = 2^longBits (256 KiB)
)

// lifeState is allocated by the first store: the lifetime table and the long-lived filter.
type lifeState struct {
	table []atomic.Uint64 // tag | store clock | class, one word per entry
	long  []atomic.Uint64 // bit set: the key hashing here was long-lived when it last died
}

// lifetime separates data by how long the same key lived the last time it was cached,
// measured in stores (a store clock) from its store to its delete/eviction. It needs no
// salt: it is keyed by Write.Identity and learns from Observe(Store) and Observe(Delete).
//
// A key whose last completed residency was longer than the running mean of log2 lifetimes
// (long-lived) goes to handle 1; everything else — first writes, keys whose table entry was
// taken by another key, keys that died young — goes to handle 0. Only two handles are used:
// a third class for the few known short-lived keys (under 2 % of the bytes in the
// multi-tenant preset) measured worse, because every handle in use pins open reclaim units
// on the device (docs/placement.md). With 1 handle everything goes to 0.
//
// Observe keeps a direct-mapped table of 2^20 entries of one atomic word each (8 MiB,
// allocated by the first Store): tag (24 bits of the identity), store clock (32 bits) and
// class (8 bits). A store takes over its entry, so a key's store time survives until about
// 2^20 other stores have passed. Alongside it a 2^21-bit (256 KiB) filter holds one bit per
// (entry, low tag bit), set exactly while that entry holds a long-lived key. Place reads the
// filter (one atomic load from an array that stays in cache) and only for a set bit checks
// the entry's full tag, so its answer equals the table's. Racing updates of one word lose
// an update, which only costs a placement hint.
type lifetime struct {
	n     int
	clock atomic.Uint32
	mean  atomic.Int64 // running mean of log2(lifetime) in 1/16ths; 0 = none yet
	st    atomic.Pointer[lifeState]
}

// NewLifetime returns the lifetime policy over n handles.
func NewLifetime(n int) Policy {
	return &lifetime{n: max(n, 1)}
}

func (p *lifetime) Name() string { return "lifetime" }

func lifeMix(id uint64) uint64 {
	x := id * 0x9e3779b97f4a7c15
	return x ^ x>>31
}

// lifeSlot gives the table index (low bits of the mix) and tag (top bits).
func lifeSlot(id uint64) (idx uint64, tag uint64) {
	x := lifeMix(id)
	return x & (1<<lifeBits - 1), x >> (64 - lifeTag)
}

// longBit gives the filter word and bit of a table entry and tag: the entry index and the
// tag's low bit.
func longBit(idx, tag uint64) (word uint64, bit uint64) {
	b := idx<<1 | tag&1
	return b >> 6, 1 << (b & 63)
}

func lifePack(tag uint64, clock uint32, class uint8) uint64 {
	return tag<<40 | uint64(clock)<<8 | uint64(class)
}

// Class returns the key's learned class: 0 unknown, 1 short-lived, 2 long-lived.
func (p *lifetime) Class(id uint64) int {
	st := p.st.Load()
	if st == nil {
		return 0
	}
	idx, tag := lifeSlot(id)
	e := st.table[idx].Load()
	if e>>40 != tag {
		return 0
	}
	return int(e & 0xff)
}

func (p *lifetime) Place(w Write) Handle {
	st := p.st.Load()
	if st == nil || p.n == 1 {
		return 0
	}
	idx, tag := lifeSlot(w.Identity)
	word, bit := longBit(idx, tag)
	if st.long[word].Load()&bit == 0 {
		return 0
	}
	if e := st.table[idx].Load(); e>>40 == tag && e&0xff == 2 {
		return 1
	}
	return 0
}

// Observe records a store's time and turns a delete into the key's lifetime class.
// Lookups and loads are ignored.
func (p *lifetime) Observe(id uint64, ev Event) {
	if ev != Store && ev != Delete {
		return
	}
	st := p.st.Load()
	if st == nil {
		if ev != Store {
			return
		}
		ns := &lifeState{table: make([]atomic.Uint64, 1<<lifeBits), long: make([]atomic.Uint64, 1<<longBits/64)}
		if p.st.CompareAndSwap(nil, ns) {
			st = ns
		} else {
			st = p.st.Load()
		}
	}
	idx, tag := lifeSlot(id)
	e := &st.table[idx]
	switch ev {
	case Store:
		now := p.clock.Add(1)
		old := e.Load()
		var class uint8
		if old>>40 == tag {
			class = uint8(old)
		} else if uint8(old) == 2 { // a long-lived key loses its entry: clear its bit
			w, b := longBit(idx, old>>40)
			st.long[w].And(^b)
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
		word, bit := longBit(idx, tag)
		if lg <= m {
			class = 1
			st.long[word].And(^bit)
		} else {
			st.long[word].Or(bit)
		}
		e.Store(lifePack(tag, 0, class))
	}
}
