package ftl

import "testing"

// check verifies the model's internal consistency; tests call it after workloads.
func (m *Model) check(t testing.TB) {
	t.Helper()
	valid := make([]int32, m.nRUs)
	mapped := int64(0)
	for lu, p := range m.l2p {
		if p == unmapped {
			continue
		}
		mapped++
		if int(p) >= len(m.p2l) || m.p2l[p] != uint32(lu) {
			t.Fatalf("l2p[%d]=%d but p2l disagrees", lu, p)
		}
		ru := p / m.u
		if int32(p%m.u) >= m.ruWP[ru] {
			t.Fatalf("unit %d maps beyond RU %d write pointer", lu, ru)
		}
		if m.ruState[ru] == ruFree {
			t.Fatalf("unit %d maps into free RU %d", lu, ru)
		}
		valid[ru]++
	}
	if mapped != m.st.valid {
		t.Fatalf("valid gauge %d, mapped %d", m.st.valid, mapped)
	}
	states := [3]int{}
	for ru := range m.nRUs {
		if valid[ru] != m.ruValid[ru] {
			t.Fatalf("RU %d valid count %d, recount %d", ru, m.ruValid[ru], valid[ru])
		}
		states[m.ruState[ru]]++
	}
	// Buckets hold exactly the closed RUs, each under its valid count.
	inBuckets := 0
	for g := range int32(m.nrg) {
		for v := int32(0); v <= int32(m.u); v++ {
			for ru := m.heads[m.bucket(g, v)]; ru != noRU; ru = m.ruNext[ru] {
				if m.ruState[ru] != ruClosed || m.ruValid[ru] != v || ru/m.rpg != g {
					t.Fatalf("RU %d in bucket (g%d,v%d) has state %d valid %d", ru, g, v, m.ruState[ru], m.ruValid[ru])
				}
				if v < m.minValid[g] {
					t.Fatalf("group %d minValid %d above non-empty bucket %d", g, m.minValid[g], v)
				}
				inBuckets++
			}
		}
		free := 0
		for ru := m.freeHead[g]; ru != noRU; ru = m.ruNext[ru] {
			if m.ruState[ru] != ruFree {
				t.Fatalf("RU %d on free list in state %d", ru, m.ruState[ru])
			}
			free++
		}
		if free != m.freeCount[g] {
			t.Fatalf("group %d free list %d, count %d", g, free, m.freeCount[g])
		}
	}
	if inBuckets != states[ruClosed] {
		t.Fatalf("%d RUs in buckets, %d closed", inBuckets, states[ruClosed])
	}
	// Persistently isolated RUs hold one handle's data only.
	for lu, p := range m.l2p {
		if p == unmapped {
			continue
		}
		ru := p / m.u
		if o := m.ruOwner[ru]; m.lbaHandle != nil && o != sharedGC && m.cfg.iso[o] == PersistentlyIsolated && int(m.lbaHandle[lu]) != int(o) {
			t.Fatalf("unit %d of handle %d sits in persistent RU %d of handle %d", lu, m.lbaHandle[lu], ru, o)
		}
	}
	s := m.Stats()
	if s.MediaBytes != s.HostBytes+s.RelocatedBytes && s.HostBytes%m.mu == 0 {
		t.Fatalf("media %d != host %d + relocated %d", s.MediaBytes, s.HostBytes, s.RelocatedBytes)
	}
	var hh, hm, hr uint64
	for _, h := range s.Handles {
		hh += h.HostBytes
		hm += h.MediaBytes
		hr += h.RelocatedBytes
	}
	if hh != s.HostBytes || hm != s.MediaBytes || hr != s.RelocatedBytes {
		t.Fatalf("per-handle sums %d/%d/%d differ from totals %d/%d/%d", hh, hm, hr, s.HostBytes, s.MediaBytes, s.RelocatedBytes)
	}
	if s.FreeRUs != states[ruFree] || s.OpenRUs != states[ruOpen] || s.ClosedRUs != states[ruClosed] {
		t.Fatalf("RU gauges free/open/closed %d/%d/%d, recount %v", s.FreeRUs, s.OpenRUs, s.ClosedRUs, states)
	}
}

// mixedWorkload runs random writes (1..8 units), deallocates and RUH updates across handles.
func mixedWorkload(t testing.TB, m *Model, ops int, seed uint64) {
	t.Helper()
	r := rng(seed | 1)
	n := uint64(m.LogicalUnits())
	nh := uint64(m.Config().Handles)
	for range ops {
		x := r.next()
		lba := int64(r.below(n))
		units := min(int64(1+x%8), int64(n)-lba)
		h := int(r.below(nh))
		switch x >> 60 {
		case 0:
			m.Deallocate(lba, units)
		case 2:
			g := int(r.below(uint64(m.nrg)))
			if err := m.WriteGroup(lba, units, g, h); err != nil {
				t.Fatal(err)
			}
		case 1:
			if x&0xff == 0 {
				if err := m.UpdateRUH(h); err != nil {
					t.Fatal(err)
				}
			}
		default:
			if err := m.Write(lba, units, h); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestInvariants(t *testing.T) {
	base := Config{MappingUnit: 4096, LogicalBytes: 96 * 64 * 4096, OP: 0.2, RUBytes: 64 * 4096}
	cases := []struct {
		name string
		mod  func(*Config)
	}{
		{"one-handle-greedy", func(*Config) {}},
		{"4-handles-initial", func(c *Config) { c.Handles = 4 }},
		{"4-handles-persistent", func(c *Config) { c.Handles = 4; c.Isolation = PersistentlyIsolated }},
		{"mixed-isolation", func(c *Config) {
			c.Handles = 3
			c.HandleIsolation = []Isolation{InitiallyIsolated, PersistentlyIsolated, InitiallyIsolated}
		}},
		{"cost-benefit", func(c *Config) { c.Handles = 2; c.GC = CostBenefit; c.Isolation = PersistentlyIsolated }},
		{"two-groups", func(c *Config) { c.ReclaimGroups = 2; c.Handles = 2 }},
		{"reserve-3", func(c *Config) { c.FreeReserve = 3; c.OP = 0.3 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.mod(&cfg)
			m, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			m.check(t)
			if err := m.FillSequential(); err != nil {
				t.Fatal(err)
			}
			m.check(t)
			mixedWorkload(t, m, 60000, 7)
			m.check(t)
			s := m.Stats()
			if s.GCRuns == 0 || s.WAF() <= 1 {
				t.Fatalf("workload should have forced GC: runs %d WAF %.3f", s.GCRuns, s.WAF())
			}
			if s.ErasedBytes != s.GCRuns*uint64(cfg.RUBytes) {
				t.Fatalf("erased %d for %d GC runs", s.ErasedBytes, s.GCRuns)
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	run := func() Stats {
		m, err := New(Config{MappingUnit: 4096, LogicalBytes: 64 * 64 * 4096, OP: 0.15, RUBytes: 64 * 4096, Handles: 3, GC: CostBenefit})
		if err != nil {
			t.Fatal(err)
		}
		mixedWorkload(t, m, 30000, 99)
		return m.Stats()
	}
	a, b := run(), run()
	if a.HostBytes != b.HostBytes || a.MediaBytes != b.MediaBytes || a.GCRuns != b.GCRuns || a.ErasedBytes != b.ErasedBytes {
		t.Fatalf("two identical runs differ: %+v vs %+v", a, b)
	}
}
