package engine

import "testing"

// The exported slot arithmetic is what the engine itself uses: entries sit at SlotOffset of
// their slot, a put writes SlotWriteBytes, checkpoints alternate containers by seq.
func TestLayoutSlotArithmetic(t *testing.T) {
	cfg := compatConfig() // 64 KiB slots, 1 MiB metadata
	l, err := ComputeLayout(cfg, 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	if l.SlotOffset(0) != 1<<20 || l.SlotOffset(3) != 1<<20+3*64<<10 {
		t.Fatalf("slot offsets %d %d", l.SlotOffset(0), l.SlotOffset(3))
	}
	for _, tc := range []struct {
		off  int64
		slot int64
		ok   bool
	}{{0, 0, false}, {1<<20 - 1, 0, false}, {1 << 20, 0, true}, {1<<20 + 64<<10 - 1, 0, true}, {1<<20 + 64<<10, 1, true}, {8 << 20, 0, false}} {
		s, ok := l.SlotOf(tc.off)
		if ok != tc.ok || (ok && s != tc.slot) {
			t.Errorf("SlotOf(%d) = %d, %v; want %d, %v", tc.off, s, ok, tc.slot, tc.ok)
		}
	}
	if l.PayloadBytes() != 60<<10 || l.SlotWriteBytes(int(l.PayloadBytes())) != l.SlotBytes || l.SlotWriteBytes(1) != 8192 || l.SlotWriteBytes(4097) != 12288 {
		t.Fatalf("payload %d, write bytes %d %d %d", l.PayloadBytes(), l.SlotWriteBytes(int(l.PayloadBytes())), l.SlotWriteBytes(1), l.SlotWriteBytes(4097))
	}
	if l.ContainerOffsetFor(1) != 0 || l.ContainerOffsetFor(2) != l.ContainerBytes || l.ContainerOffsetFor(3) != 0 {
		t.Fatalf("containers for seq 1..3: %d %d %d", l.ContainerOffsetFor(1), l.ContainerOffsetFor(2), l.ContainerOffsetFor(3))
	}
	if SlotBytesFor(1) != 8192 || SlotBytesFor(256<<10) != 260<<10 {
		t.Fatalf("SlotBytesFor: %d %d", SlotBytesFor(1), SlotBytesFor(256<<10))
	}
	e, err := Format(memDev(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := e.PutMany([]Key{K(1), K(2), K(3)}, [][]byte{{1}, {2}, {3}}); err != nil {
		t.Fatal(err)
	}
	e.Entries(func(k Key, m EntryMeta) bool {
		if m.Offset != e.Layout().SlotOffset(int64(m.Slot)) {
			t.Errorf("%s at %d, SlotOffset(%d) = %d", k, m.Offset, m.Slot, e.Layout().SlotOffset(int64(m.Slot)))
		}
		return true
	})
	if e.Stats().CheckpointSeq != 1 {
		t.Fatalf("seq %d after format", e.Stats().CheckpointSeq)
	}
}
