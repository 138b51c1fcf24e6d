package engine

import (
	"testing"

	"github.com/rbctl/rbctl/placement"
)

// The order SlotAllocator hands out slots in (what rbctl simulate models the engine by):
// with affinity, the handle's own freed slots (last freed first), then the global stack,
// then any other handle's, then never-used slots; without, the last freed whatever wrote it.
func TestSlotAllocatorOrder(t *testing.T) {
	a := NewSlotAllocator(6, true, 0)
	for want := int32(0); want < 4; want++ {
		if s := a.Alloc(placement.Handle(want % 2)); s != want {
			t.Fatalf("fresh slot %d, want %d", s, want)
		}
	}
	a.Free(0, 0)
	a.Free(2, 0)
	a.Free(1, 1)
	a.Free(3, placement.None)
	if a.FreeSlots() != 4 || a.NextSlot() != 4 {
		t.Fatalf("free %d, next %d", a.FreeSlots(), a.NextSlot())
	}
	for i, c := range []struct {
		h    placement.Handle
		want int32
	}{{0, 2}, {0, 0}, {0, 3}, {1, 1}, {1, 4}, {placement.None, 5}, {1, -1}} {
		if s := a.Alloc(c.h); s != c.want {
			t.Fatalf("alloc %d (handle %d): slot %d, want %d", i, c.h, s, c.want)
		}
	}
	// Hits: 2, 0, 1. Fallbacks: the four first writes, then 3, 4 and the refused one.
	if a.hits != 3 || a.fallbacks != 7 {
		t.Errorf("affinity hits %d, fallbacks %d; want 3 and 7", a.hits, a.fallbacks)
	}

	any := NewSlotAllocator(4, false, 0)
	any.Alloc(0)
	any.Alloc(1)
	any.Free(0, 0)
	any.Free(1, 1)
	if s := any.Alloc(0); s != 1 {
		t.Errorf("without affinity: slot %d, want the last freed, 1", s)
	}
}

// After recovery the free slots below next_slot are pushed in ascending order, so the
// highest is handed out first, as LMCache does; live slots are never handed out.
func TestSlotAllocatorRebuild(t *testing.T) {
	a := NewSlotAllocator(8, true, 0)
	live := map[int32]bool{1: true, 4: true}
	a.rebuild(6, func(s int32) (bool, placement.Handle) { return live[s], 0 })
	var got []int32
	for range 6 {
		got = append(got, a.Alloc(0))
	}
	want := []int32{5, 3, 2, 0, 6, 7}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("after rebuild: %v, want %v", got, want)
		}
	}
	if s := a.Alloc(0); s != -1 {
		t.Errorf("full: slot %d", s)
	}
}
