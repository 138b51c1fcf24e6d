package ftl

import (
	"errors"
	"testing"
)

// FuzzModelOps drives a small model with an arbitrary op sequence and checks every
// internal invariant afterwards: maps agree, valid counts and buckets are exact, counters
// add up, persistent RUs hold one handle's data, and nothing but ErrInfeasible escapes.
func FuzzModelOps(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 200, 255, 17})
	f.Add([]byte("persistent isolation with many handles and few RUs"))
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) < 2 {
			return
		}
		hdr := ops[0]
		c := Config{MappingUnit: 512, LogicalBytes: 24 * 8 * 512, RUBytes: 8 * 512, RUsPerGroup: 28 + int(hdr&7),
			Handles: 1 + int(hdr>>3&3), ReclaimGroups: 1, Isolation: Isolation(hdr >> 5 & 1), GC: GCPolicy(hdr >> 6 & 1)}
		if hdr>>7 == 1 {
			c.ReclaimGroups, c.RUsPerGroup = 2, 14+int(hdr&3)
		}
		m, err := New(c)
		if err != nil {
			t.Skip(err)
		}
		n := m.LogicalUnits()
		for i := 1; i+2 < len(ops); i += 3 {
			op, a, b := ops[i], int64(ops[i+1]), int64(ops[i+2])
			lba := (a*7 + b) % n
			units := 1 + int64(op>>4)%6
			h := int(b) % c.Handles
			switch op & 3 {
			case 0, 1:
				err = m.Write(lba, units, h)
			case 2:
				m.Deallocate(lba, units)
			case 3:
				err = m.UpdateRUH(h)
			}
			if err != nil && !errors.Is(err, ErrInfeasible) && !errors.Is(err, ErrOutOfRange) {
				t.Fatalf("op %d: %v", i, err)
			}
		}
		m.check(t)
	})
}
