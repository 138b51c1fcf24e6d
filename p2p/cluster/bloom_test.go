package cluster

import (
	"math"
	"slices"
	"testing"
)

func TestSizeFilter(t *testing.T) {
	for _, tc := range []struct {
		n        int
		p        float64
		bits     uint32
		hashes   uint8
		wantFail bool
	}{
		{n: 1000, p: 0.01, bits: 9600, hashes: 7}, // 9586 rounded up to words
		{n: 1 << 20, p: 0.01, bits: 10050688, hashes: 7},
		{n: 1000, p: 0.001, bits: 14400, hashes: 10},
		{n: 1, p: 0.5, bits: 64, hashes: 16}, // k capped
		{n: 0, p: 0.01, wantFail: true},
		{n: 10, p: 0, wantFail: true},
		{n: 10, p: 1, wantFail: true},
		{n: 1 << 30, p: 1e-9, wantFail: true}, // above 2^31 bits
	} {
		g, err := sizeFilter(tc.n, tc.p)
		if tc.wantFail {
			if err == nil {
				t.Errorf("sizeFilter(%d, %g) = %+v; want an error", tc.n, tc.p, g)
			}
			continue
		}
		if err != nil || g.bits != tc.bits || g.hashes != tc.hashes {
			t.Errorf("sizeFilter(%d, %g) = %+v, %v; want %d bits, %d hashes", tc.n, tc.p, g, err, tc.bits, tc.hashes)
		}
	}
}

// The filter meets its target rate at its design load (identities are sequential, as a
// poor hash would make them: mix64 must spread them).
func TestFilterFalsePositiveRateAtDesignLoad(t *testing.T) {
	const n, p = 20000, 0.01
	g, _ := sizeFilter(n, p)
	c := newCountingFilter(g)
	for id := uint64(0); id < n; id++ {
		c.add(id, func(uint32) {})
	}
	f := c.snapshot()
	for id := uint64(0); id < n; id++ {
		if !f.mayContain(id) {
			t.Fatalf("identity %d added but not matched", id)
		}
	}
	fp := 0
	const probes = 200000
	for id := uint64(n); id < n+probes; id++ {
		if f.mayContain(id) {
			fp++
		}
	}
	rate := float64(fp) / probes
	if rate > 1.3*p || rate < 0.5*p {
		t.Fatalf("false-positive rate %.4f at design load; target %.2f", rate, p)
	}
	if fill := float64(f.ones()) / float64(f.bits); math.Abs(fill-0.5) > 0.05 {
		t.Fatalf("fill %.3f at design load; an optimal k gives 0.5", fill)
	}
}

func TestCountingFilterRemoveClearsOnlyUnsharedBits(t *testing.T) {
	g := geometry{bits: 64, hashes: 3}
	c := newCountingFilter(g)
	var set, cleared []uint32
	c.add(1, func(p uint32) { set = append(set, p) })
	c.add(2, func(uint32) {})
	c.remove(1, func(p uint32) { cleared = append(cleared, p) })
	f := c.snapshot()
	if !f.mayContain(2) {
		t.Fatal("removing 1 lost 2")
	}
	shared := map[uint32]bool{}
	g.positions(2, func(p uint32) { shared[p] = true })
	for _, p := range cleared {
		if shared[p] {
			t.Fatalf("bit %d of 2 reported cleared", p)
		}
	}
	c.remove(2, func(uint32) {})
	if c.snapshot().ones() != 0 {
		t.Fatal("filter not empty after removing every key")
	}
	if len(set) == 0 {
		t.Fatal("adding to an empty filter reported no bit set")
	}
	// A saturated counter stays: it may have counted more keys than it can hold.
	var pos uint32
	g.positions(7, func(p uint32) { pos = p })
	c.add(7, func(uint32) {})
	c.counts[pos] = 255
	c.remove(7, func(p uint32) {
		if p == pos {
			t.Fatal("a saturated counter was cleared")
		}
	})
	if c.counts[pos] != 255 {
		t.Fatalf("saturated counter went to %d", c.counts[pos])
	}
}

// addAll is add for each id in turn: the same counters (saturated ones included) and the
// same bits reported, in the same order.
func TestAddAllIsAddInTurn(t *testing.T) {
	for _, g := range []geometry{{bits: 64, hashes: 7}, {bits: 95872, hashes: 7}, {bits: 1 << 20, hashes: 16}} {
		one, all := newCountingFilter(g), newCountingFilter(g)
		ids := make([]uint64, 3000)
		for i := range ids {
			ids[i] = uint64(i) * 0x9e3779b97f4a7c15
		}
		var want, got []uint32
		for _, id := range ids {
			one.add(id, func(p uint32) { want = append(want, p) })
		}
		all.addAll(ids, func(p uint32) { got = append(got, p) })
		if !slices.Equal(one.counts, all.counts) || !slices.Equal(want, got) {
			t.Fatalf("%+v: addAll differs from add in turn (%d and %d bits reported)", g, len(want), len(got))
		}
	}
}
