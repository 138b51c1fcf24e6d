package ftl

import "testing"

// MixedRelocatedBytes counts what GC copies out of RUs holding several handles' data: only
// the shared GC destination of initially isolated handles can hold such data, so persistent
// isolation and a single handle count none, and initial isolation with a hot and a cold
// handle counts some, never more than everything relocated.
func TestMixedRelocatedBytes(t *testing.T) {
	run := func(handles int, iso Isolation) Stats {
		m := small(t, func(c *Config) {
			c.Handles, c.Isolation = handles, iso
			c.LogicalBytes, c.RUBytes, c.OP = 256*64*4096, 64*4096, 0.2
		})
		n := uint64(m.LogicalUnits())
		hot := n / 10
		if err := m.Write(0, int64(hot), 0); err != nil {
			t.Fatal(err)
		}
		if err := m.Write(int64(hot), int64(n-hot), min(1, handles-1)); err != nil {
			t.Fatal(err)
		}
		r := rng(7)
		for range 6 * n {
			lba, h := r.below(hot), 0
			if r.next()%10 == 0 {
				lba, h = hot+r.below(n-hot), min(1, handles-1)
			}
			if err := m.Write(int64(lba), 1, h); err != nil {
				t.Fatal(err)
			}
		}
		m.check(t)
		return m.Stats()
	}
	initial := run(2, InitiallyIsolated)
	t.Logf("initially isolated: relocated %d, from mixed RUs %d", initial.RelocatedBytes, initial.MixedRelocatedBytes)
	if initial.MixedRelocatedBytes == 0 || initial.MixedRelocatedBytes > initial.RelocatedBytes {
		t.Errorf("initially isolated: mixed %d of relocated %d, want in (0, relocated]", initial.MixedRelocatedBytes, initial.RelocatedBytes)
	}
	for _, s := range []Stats{run(2, PersistentlyIsolated), run(1, InitiallyIsolated)} {
		if s.RelocatedBytes == 0 || s.MixedRelocatedBytes != 0 {
			t.Errorf("relocated %d, mixed %d: want some relocation and none from mixed RUs", s.RelocatedBytes, s.MixedRelocatedBytes)
		}
	}
	w := initial
	if d := w.Sub(w); d.MixedRelocatedBytes != 0 {
		t.Errorf("Sub left %d mixed bytes", d.MixedRelocatedBytes)
	}
}
