package ftl

import (
	"errors"
	"testing"
)

func small(t *testing.T, mod func(*Config)) *Model {
	t.Helper()
	c := Config{MappingUnit: 4096, LogicalBytes: 128 * 32 * 4096, OP: 0.25, RUBytes: 32 * 4096}
	if mod != nil {
		mod(&c)
	}
	m, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestRangeAndHandleErrors(t *testing.T) {
	m := small(t, func(c *Config) { c.Handles = 2 })
	n := m.LogicalUnits()
	if err := m.Write(n-1, 2, 0); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("write past the end: %v", err)
	}
	if err := m.Write(-1, 1, 0); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("negative lba: %v", err)
	}
	if err := m.Write(0, 1, 2); !errors.Is(err, ErrBadHandle) {
		t.Errorf("handle 2 of 2: %v", err)
	}
	if err := m.WriteGroup(0, 1, 1, 0); !errors.Is(err, ErrBadGroup) {
		t.Errorf("group 1 of 1: %v", err)
	}
	if err := m.UpdateRUH(5); !errors.Is(err, ErrBadHandle) {
		t.Errorf("update handle 5: %v", err)
	}
	if s := m.Stats(); s.HostBytes != 0 {
		t.Errorf("rejected writes counted: %d host bytes", s.HostBytes)
	}
}

func TestWriteDeallocateCounters(t *testing.T) {
	m := small(t, nil)
	if err := m.Write(10, 5, 0); err != nil {
		t.Fatal(err)
	}
	if err := m.Write(12, 1, 0); err != nil { // overwrite
		t.Fatal(err)
	}
	s := m.Stats()
	if s.HostBytes != 6*4096 || s.MediaBytes != 6*4096 || s.ValidBytes != 5*4096 {
		t.Fatalf("host %d media %d valid %d", s.HostBytes, s.MediaBytes, s.ValidBytes)
	}
	m.Deallocate(11, 3)
	m.Deallocate(-5, 2) // ignored
	if s := m.Stats(); s.ValidBytes != 2*4096 {
		t.Fatalf("valid after deallocate %d", s.ValidBytes)
	}
	// Byte helpers: a partial unit is written whole; deallocation only drops whole units.
	if err := m.WriteBytes(4096*20+100, 5000, 0); err != nil { // touches units 20 and 21
		t.Fatal(err)
	}
	s = m.Stats()
	if s.HostBytes != 6*4096+5000 || s.MediaBytes != 8*4096 {
		t.Fatalf("WriteBytes: host %d media %d", s.HostBytes, s.MediaBytes)
	}
	m.DeallocateBytes(4096*20+1, 4096*2-2) // covers units 20 and 21 only partly
	if s := m.Stats(); s.ValidBytes != 4*4096 {
		t.Fatalf("DeallocateBytes of partial units dropped data: valid %d", s.ValidBytes)
	}
	m.DeallocateBytes(4096*20, 4096*2)
	if s := m.Stats(); s.ValidBytes != 2*4096 {
		t.Fatalf("DeallocateBytes of whole units: valid %d", s.ValidBytes)
	}
	m.check(t)
}

func TestUpdateRUHAndStatus(t *testing.T) {
	m := small(t, func(c *Config) { c.Handles = 2 })
	st, ok := m.RUHStatus(0, 1)
	if !ok || st.RUAMWBytes != 32*4096 || st.OpenRU != -1 {
		t.Fatalf("fresh status %+v %v", st, ok)
	}
	if err := m.Write(0, 10, 1); err != nil {
		t.Fatal(err)
	}
	if st, _ = m.RUHStatus(0, 1); st.RUAMWBytes != 22*4096 || st.OpenRU < 0 {
		t.Fatalf("after 10 units: %+v", st)
	}
	if err := m.UpdateRUH(1); err != nil {
		t.Fatal(err)
	}
	if err := m.UpdateRUH(0); err != nil { // nothing open: no event
		t.Fatal(err)
	}
	evs := m.DrainEvents()
	if len(evs) != 1 || evs[0].Type != EventRUNotFullyWritten || evs[0].Handle != 1 || evs[0].UnwrittenBytes != 22*4096 {
		t.Fatalf("events %+v", evs)
	}
	if len(m.DrainEvents()) != 0 {
		t.Fatal("events not drained")
	}
	if st, _ = m.RUHStatus(0, 1); st.RUAMWBytes != 32*4096 || st.OpenRU != -1 {
		t.Fatalf("after update: %+v", st)
	}
	if err := m.Write(10, 1, 1); err != nil {
		t.Fatal(err)
	}
	if st2, _ := m.RUHStatus(0, 1); st2.OpenRU == evs[0].Group || st2.RUAMWBytes != 31*4096 {
		t.Fatalf("write after update should open a fresh RU: %+v", st2)
	}
	if _, ok := m.RUHStatus(0, 2); ok {
		t.Fatal("status of handle 2 of 2")
	}
	m.check(t)
	// Events beyond the bound are dropped oldest first and counted.
	for range maxEvents + 10 {
		if err := m.Write(0, 1, 0); err != nil {
			t.Fatal(err)
		}
		if err := m.UpdateRUH(0); err != nil {
			t.Fatal(err)
		}
	}
	if evs := m.DrainEvents(); len(evs) != maxEvents || m.Stats().DroppedEvents != 10 {
		t.Fatalf("%d events, %d dropped", len(evs), m.Stats().DroppedEvents)
	}
	m.check(t)
}

// Persistently isolated handles with different lifetimes must beat one mixed handle.
func TestPersistentIsolationBeatsMixing(t *testing.T) {
	run := func(handles int, iso Isolation, gc GCPolicy) float64 {
		m := small(t, func(c *Config) {
			c.Handles = handles
			c.Isolation = iso
			c.GC = gc
			c.LogicalBytes = 1024 * 64 * 4096
			c.RUBytes = 64 * 4096
			c.OP = 0.12
		})
		n := uint64(m.LogicalUnits())
		hot := n / 10 // 10% of the space takes 90% of the writes: short-lived data
		// Precondition: every unit written once through the handle its class uses.
		if err := m.Write(0, int64(hot), 0); err != nil {
			t.Fatal(err)
		}
		if err := m.Write(int64(hot), int64(n-hot), min(1, handles-1)); err != nil {
			t.Fatal(err)
		}
		r := rng(12345)
		write := func() {
			var lba uint64
			h := 0
			if r.next()%10 != 0 {
				lba = r.below(hot)
			} else {
				lba = hot + r.below(n-hot)
				h = 1
			}
			if handles == 1 {
				h = 0
			}
			if err := m.Write(int64(lba), 1, h); err != nil {
				t.Fatal(err)
			}
		}
		for range 3 * n {
			write()
		}
		w := m.Window()
		for range 3 * n {
			write()
		}
		m.check(t)
		return w.Stats().WAF()
	}
	mixed := run(1, InitiallyIsolated, Greedy)
	persistent := run(2, PersistentlyIsolated, Greedy)
	initial := run(2, InitiallyIsolated, Greedy)
	t.Logf("hot/cold 90/10, greedy: mixed WAF %.3f, 2 initially isolated %.3f, 2 persistently isolated %.3f", mixed, initial, persistent)
	cbMixed, cbPersistent := run(1, InitiallyIsolated, CostBenefit), run(2, PersistentlyIsolated, CostBenefit)
	t.Logf("hot/cold 90/10, cost-benefit: mixed WAF %.3f, 2 persistently isolated %.3f", cbMixed, cbPersistent)
	if cbPersistent >= cbMixed {
		t.Errorf("cost-benefit: persistent isolation WAF %.3f not below mixed %.3f", cbPersistent, cbMixed)
	}
	if persistent >= mixed*0.9 {
		t.Errorf("persistent isolation WAF %.3f not clearly below mixed %.3f", persistent, mixed)
	}
	if persistent > initial*1.02 {
		t.Errorf("persistent isolation WAF %.3f worse than initial isolation %.3f", persistent, initial)
	}
}

// A sequential precondition leaves old data that GC must carry: a workload confined to
// half the LBA range sees more than 2× the WAF of the same workload on a fresh device.
func TestPreconditionMatters(t *testing.T) {
	run := func(p Precondition) float64 {
		m := small(t, func(c *Config) { c.LogicalBytes = 512 * 64 * 4096; c.RUBytes = 64 * 4096; c.OP = 0.07 })
		if err := m.Precondition(p); err != nil {
			t.Fatal(err)
		}
		n := uint64(m.LogicalUnits()) / 2
		r := rng(777)
		for range 2 * n {
			if err := m.Write(int64(r.below(n)), 1, 0); err != nil {
				t.Fatal(err)
			}
		}
		w := m.Window()
		for range 4 * n {
			if err := m.Write(int64(r.below(n)), 1, 0); err != nil {
				t.Fatal(err)
			}
		}
		return w.Stats().WAF()
	}
	fresh, seq := run(Fresh), run(Sequential)
	t.Logf("half-range random writes, rho 0.07: fresh WAF %.3f, sequential-fill WAF %.3f", fresh, seq)
	if seq < 2*fresh {
		t.Errorf("sequential precondition WAF %.3f not > 2× fresh %.3f", seq, fresh)
	}
}

// Too many persistently isolated handles for the spare space: writes report
// ErrInfeasible instead of hanging.
func TestInfeasibleReported(t *testing.T) {
	m := small(t, func(c *Config) {
		c.LogicalBytes = 60 * 32 * 4096
		c.RUsPerGroup = 64
		c.Handles = 8
		c.Isolation = PersistentlyIsolated
	})
	r := rng(5)
	n := uint64(m.LogicalUnits())
	var err error
	for i := 0; i < 40*int(n) && err == nil; i++ {
		err = m.Write(int64(r.below(n)), 1, int(r.below(8)))
	}
	if !errors.Is(err, ErrInfeasible) {
		t.Fatalf("want ErrInfeasible, got %v", err)
	}
	m.check(t)
}

// Initially isolated handles share GC destination RUs (data of both handles end up in one
// RU); persistently isolated ones never do.
func TestIsolationSemantics(t *testing.T) {
	for _, iso := range []Isolation{InitiallyIsolated, PersistentlyIsolated} {
		m := small(t, func(c *Config) { c.Handles = 2; c.Isolation = iso })
		r := rng(31)
		n := uint64(m.LogicalUnits())
		for i := range 6 * n {
			if err := m.Write(int64(r.below(n)), 1, int(i&1)); err != nil {
				t.Fatal(err)
			}
		}
		m.check(t)
		mixedRUs := 0
		for ru := range m.nRUs {
			seen := [2]bool{}
			base := uint32(ru) * m.u
			for off := uint32(0); off < uint32(m.ruWP[ru]); off++ {
				if lu := m.p2l[base+off]; m.l2p[lu] == base+off {
					seen[m.lbaHandle[lu]] = true
				}
			}
			if seen[0] && seen[1] {
				mixedRUs++
				if m.ruOwner[ru] != sharedGC {
					t.Fatalf("%v: RU %d owned by handle %d holds both handles' data", iso, ru, m.ruOwner[ru])
				}
			}
		}
		t.Logf("%v: %d RUs hold data of both handles", iso, mixedRUs)
		if (iso == InitiallyIsolated) != (mixedRUs > 0) {
			t.Errorf("%v: %d mixed RUs", iso, mixedRUs)
		}
	}
}
