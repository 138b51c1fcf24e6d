package cluster

import (
	"fmt"
	"math"
	"math/bits"
)

// Filter geometry limits. A filter's bit count is a multiple of 64 (it is stored in words)
// and below 2^31 (a delta carries a position in 31 bits).
const (
	maxHashes     = 16
	maxFilterBits = 1 << 31
)

// geometry is the shape of a Bloom filter: m bits probed by k hashes.
type geometry struct {
	bits   uint32 // m, a multiple of 64
	hashes uint8  // k
}

// sizeFilter returns the geometry for n keys at false-positive rate p:
// m = -n ln p / (ln 2)^2, k = m/n ln 2, both rounded and bounded.
func sizeFilter(n int, p float64) (geometry, error) {
	if n < 1 {
		return geometry{}, fmt.Errorf("expected key count %d is below 1", n)
	}
	if !(p > 0 && p < 1) {
		return geometry{}, fmt.Errorf("false-positive rate %g is not between 0 and 1", p)
	}
	m := math.Ceil(-float64(n) * math.Log(p) / (math.Ln2 * math.Ln2))
	m = math.Ceil(m/64) * 64
	if m >= maxFilterBits {
		return geometry{}, fmt.Errorf("filter for %d keys at rate %g needs %.0f bits, above the limit %d", n, p, m, maxFilterBits)
	}
	k := math.Round(m / float64(n) * math.Ln2)
	k = math.Max(1, math.Min(maxHashes, k))
	return geometry{bits: uint32(m), hashes: uint8(k)}, nil
}

// bytes is the size of the filter's bit array.
func (g geometry) bytes() int { return int(g.bits / 8) }

// mix64 is the splitmix64 finalizer: identities are already hashes, but not ones we can
// vouch for, so each is scrambled before it picks bits.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// positions calls f with the k bit positions of id (double hashing, Kirsch–Mitzenmacher).
// Part of the wire contract between nodes: do not change without a new message version.
func (g geometry) positions(id uint64, f func(pos uint32)) {
	var b [maxHashes]uint32
	for _, p := range g.appendPositions(b[:0], id) {
		f(p)
	}
}

// appendPositions appends id's k bit positions to dst (positions' order).
func (g geometry) appendPositions(dst []uint32, id uint64) []uint32 {
	h1 := mix64(id)
	h2 := mix64(id^0x9e3779b97f4a7c15) | 1
	m := uint64(g.bits)
	for i := uint64(0); i < uint64(g.hashes); i++ {
		dst = append(dst, uint32((h1+i*h2)%m))
	}
	return dst
}

// bitFilter is the plain Bloom filter a node publishes and its peers match against.
type bitFilter struct {
	geometry
	words []uint64
}

func newBitFilter(g geometry) *bitFilter {
	return &bitFilter{geometry: g, words: make([]uint64, g.bits/64)}
}

func (f *bitFilter) get(pos uint32) bool { return f.words[pos/64]&(1<<(pos%64)) != 0 }

func (f *bitFilter) set(pos uint32, v bool) {
	if v {
		f.words[pos/64] |= 1 << (pos % 64)
	} else {
		f.words[pos/64] &^= 1 << (pos % 64)
	}
}

// mayContain reports whether id may be in the filter (false means certainly not).
func (f *bitFilter) mayContain(id uint64) bool {
	hit := true
	f.positions(id, func(pos uint32) {
		if !f.get(pos) {
			hit = false
		}
	})
	return hit
}

// ones counts the set bits (for the fill ratio in Stats).
func (f *bitFilter) ones() int {
	n := 0
	for _, w := range f.words {
		n += bits.OnesCount64(w)
	}
	return n
}

// countingFilter is the local filter: a saturating 8-bit counter per bit, so an eviction
// can clear the bits no other key uses. A counter that reached 255 stays there (it may
// then keep a bit set that could have been cleared: a false positive, never a false
// negative).
type countingFilter struct {
	geometry
	counts  []uint8
	touched uint8 // keeps addAll's loads from being optimized away
}

func newCountingFilter(g geometry) *countingFilter {
	return &countingFilter{geometry: g, counts: make([]uint8, g.bits)}
}

// addGroup is how many identities addAll hashes before it counts them in.
const addGroup = 64

// addAll counts every id in, as add does each in turn (changed, when not nil, is called
// for each bit that went from 0 to 1): a group of identities at a time, whose counters are
// loaded before any is changed, so that their cache misses (the counters are tens of MB,
// the positions random) are in flight together rather than one by one.
func (c *countingFilter) addAll(ids []uint64, changed func(pos uint32)) {
	pos := make([]uint32, 0, addGroup*maxHashes)
	for len(ids) > 0 {
		group := ids[:min(addGroup, len(ids))]
		ids = ids[len(group):]
		pos = pos[:0]
		for _, id := range group {
			pos = c.appendPositions(pos, id)
		}
		var x uint8
		for _, p := range pos {
			x += c.counts[p]
		}
		c.touched += x
		for _, p := range pos {
			switch c.counts[p] {
			case 255:
			case 0:
				c.counts[p] = 1
				if changed != nil {
					changed(p)
				}
			default:
				c.counts[p]++
			}
		}
	}
}

// add counts id in; changed is called for each bit that went from 0 to 1.
func (c *countingFilter) add(id uint64, changed func(pos uint32)) {
	c.positions(id, func(pos uint32) {
		switch c.counts[pos] {
		case 255:
		case 0:
			c.counts[pos] = 1
			changed(pos)
		default:
			c.counts[pos]++
		}
	})
}

// remove counts id out; changed is called for each bit that went from 1 to 0.
func (c *countingFilter) remove(id uint64, changed func(pos uint32)) {
	c.positions(id, func(pos uint32) {
		switch c.counts[pos] {
		case 0, 255:
		case 1:
			c.counts[pos] = 0
			changed(pos)
		default:
			c.counts[pos]--
		}
	})
}

func (c *countingFilter) get(pos uint32) bool { return c.counts[pos] != 0 }

// snapshot returns the plain filter of the counters.
func (c *countingFilter) snapshot() *bitFilter {
	f := newBitFilter(c.geometry)
	for pos, n := range c.counts {
		if n != 0 {
			f.words[pos/64] |= 1 << (pos % 64)
		}
	}
	return f
}
