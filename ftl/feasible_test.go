package ftl

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"testing"
)

// feasTrial writes random single units (a third of them to a small hot set, through random
// handles) into a fresh model of c and reports whether GC ever gave up.
func feasTrial(t *testing.T, c Config, seed uint64, writes int) bool {
	t.Helper()
	m, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	units := m.LogicalUnits()
	hot := rng.Int64N(4) + 1
	for range writes {
		lba := rng.Int64N(units)
		if rng.IntN(3) == 0 {
			lba = rng.Int64N(hot)
		}
		if err := m.Write(lba, 1, rng.IntN(c.Handles)); err != nil {
			if errors.Is(err, ErrInfeasible) {
				return false
			}
			t.Fatal(err)
		}
	}
	m.check(t)
	return true
}

// The rule against the model: with spare RUs = NeedRUs no random workload ever makes GC give
// up; with one RU less most of them do (at 2 handles, every geometry tried).
func TestFeasibilityRule(t *testing.T) {
	seeds := uint64(40)
	if testing.Short() {
		seeds = 8
	}
	const n = 12 // logical RUs
	for _, iso := range []Isolation{InitiallyIsolated, PersistentlyIsolated} {
		for _, h := range []int{1, 2, 3, 4} {
			for _, u := range []int64{2, 4, 8} {
				for _, r := range []int{1, 2} {
					c := Config{MappingUnit: 1, LogicalBytes: n * u, RUBytes: u, Handles: h, Isolation: iso, FreeReserve: r, RUsPerGroup: n}
					f, err := c.Feasibility()
					if err != nil {
						t.Fatal(err)
					}
					want := r + h + h - 1
					if iso == InitiallyIsolated {
						want = r + h
					}
					if f.NeedRUs() != want || f.SpareRUs() != 0 || f.OK() {
						t.Fatalf("%v h=%d r=%d: need %d (want %d), spare %g, ok %v", iso, h, r, f.NeedRUs(), want, f.SpareRUs(), f.OK())
					}
					c.RUsPerGroup = n + want
					if f, _ := c.Feasibility(); !f.OK() {
						t.Fatalf("%v h=%d: spare %g = need %d not OK", iso, h, f.SpareRUs(), f.NeedRUs())
					}
					failed := 0
					for s := range seeds {
						if !feasTrial(t, c, s, 4000) {
							t.Fatalf("%v h=%d u=%d r=%d: infeasible with spare = need %d (seed %d)", iso, h, u, r, want, s)
						}
						c.RUsPerGroup = n + want - 1
						if !feasTrial(t, c, s, 4000) {
							failed++
						}
						c.RUsPerGroup = n + want
					}
					if h <= 2 && failed == 0 {
						t.Errorf("%v h=%d u=%d r=%d: one RU below the rule never failed in %d trials", iso, h, u, r, seeds)
					}
				}
			}
		}
	}
}

// One RU below the rule a host can always make GC give up: fill the device through handle 0
// while the other handles' open RUs hold only data that is overwritten later, then write once
// more. The same construction one RU richer keeps running.
func TestFeasibilityBoundIsTight(t *testing.T) {
	const n, u = 16, 8
	for h := 1; h <= 8; h++ {
		c := Config{MappingUnit: 1, LogicalBytes: n * u, RUBytes: u, Handles: h, RUsPerGroup: n}
		f, _ := c.Feasibility()
		for _, spare := range []int{f.NeedRUs() - 1, f.NeedRUs()} {
			c.RUsPerGroup = n + spare
			m, err := New(c)
			if err != nil {
				t.Fatal(err)
			}
			for k := 1; k < h; k++ { // each other handle opens an RU with one unit...
				if err := m.Write(int64(k), 1, k); err != nil {
					t.Fatal(err)
				}
			}
			if err := m.Write(0, n*u, 0); err != nil { // ...that this fill overwrites
				t.Fatal(err)
			}
			err = m.Write(3, 1, 0)
			if spare < f.NeedRUs() {
				if !errors.Is(err, ErrInfeasible) {
					t.Fatalf("h=%d spare %d (need %d): want ErrInfeasible, got %v", h, spare, f.NeedRUs(), err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("h=%d spare = need %d: %v", h, spare, err)
			}
			if !feasTrial(t, c, uint64(h), 20000) {
				t.Fatalf("h=%d: spare = need, random writes hit ErrInfeasible", h)
			}
		}
	}
}

func TestFeasibilityFigures(t *testing.T) {
	// The demo's old emulated device: 512 MiB, 8 MiB RUs, op 0.07, 8 handles.
	c := Config{MappingUnit: 4096, LogicalBytes: 512 << 20, OP: 0.07, RUBytes: 8 << 20, Handles: 8}
	f, err := c.Feasibility()
	if err != nil {
		t.Fatal(err)
	}
	if f.RUsPerGroup != 68 || f.LogicalRUs != 64 || f.SpareRUs() != 4 || f.HostRUs != 8 || f.GCRUs != 1 || f.NeedRUs() != 9 || f.OK() {
		t.Fatalf("initially isolated: %+v need %d", f, f.NeedRUs())
	}
	c.Isolation = PersistentlyIsolated
	if f, _ = c.Feasibility(); f.GCRUs != 8 || f.NeedRUs() != 16 {
		t.Fatalf("persistently isolated: %+v need %d", f, f.NeedRUs())
	}
	c.HandleIsolation = []Isolation{PersistentlyIsolated, InitiallyIsolated, PersistentlyIsolated, InitiallyIsolated,
		InitiallyIsolated, InitiallyIsolated, InitiallyIsolated, InitiallyIsolated}
	if f, _ = c.Feasibility(); f.GCRUs != 3 || f.Persistent != 2 {
		t.Fatalf("mixed: %+v", f)
	}
	// Two reclaim groups split the logical space: 32 logical RUs and 34 physical each.
	c = Config{MappingUnit: 4096, LogicalBytes: 512 << 20, OP: 0.07, RUBytes: 8 << 20, Handles: 1, ReclaimGroups: 2}
	if f, _ = c.Feasibility(); f.Groups != 2 || f.RUsPerGroup != 34 || f.LogicalRUs != 32 || f.NeedRUs() != 2 || !f.OK() {
		t.Fatalf("two groups: %+v need %d", f, f.NeedRUs())
	}
	// A capacity New refuses still gets its figures; a malformed one an error.
	c.OP = 0
	if f, err = c.Feasibility(); err != nil || f.OK() {
		t.Fatalf("op 0: %+v %v", f, err)
	}
	if _, err := (Config{MappingUnit: 0}).Feasibility(); !errors.Is(err, ErrConfig) {
		t.Fatalf("malformed config: %v", err)
	}
}

// MemoryBytes against what New really allocates.
func TestMemoryBytes(t *testing.T) {
	for _, c := range []Config{
		{MappingUnit: 4096, LogicalBytes: 1 << 30, OP: 0.07, RUBytes: 16 << 20, Handles: 8},
		{MappingUnit: 4096, LogicalBytes: 1 << 30, OP: 0.28, RUBytes: 1 << 20, Handles: 1},
		{MappingUnit: 1 << 16, LogicalBytes: 8 << 30, OP: 0.07, RUBytes: 64 << 20, Handles: 4, ReclaimGroups: 2},
	} {
		est, err := c.MemoryBytes()
		if err != nil {
			t.Fatal(err)
		}
		before := heapAlloc()
		m, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		used := heapAlloc() - before
		if d := float64(used-est) / float64(est); d < -0.02 || d > 0.02 {
			t.Errorf("%+v: estimate %d bytes, New allocated %d (%.1f %%)", c, est, used, 100*d)
		}
		runtime.KeepAlive(m)
	}
}

func heapAlloc() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.TotalAlloc)
}
