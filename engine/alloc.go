package engine

import "github.com/rbctl/rbctl/blockdev"

// Slot allocation, O(1) per operation.
//
// Without slot groups (LMCache parity): free slots sit on LIFO stacks linked through
// slotRec.next. Class 0 is the global stack; with SlotAffinity a slot freed after a write
// with handle h goes on class h+1 and is preferred by the next write with handle h
// (LMCache's pid_affinity). Order: affinity stack, global stack, any other affinity stack
// (a fallback that rebinds the slot), then never-used slots from nextSlot.
//
// With slot groups: consecutive slots form groups of groupSlots; a group is owned by one
// handle while it holds live or in-flight slots. A handle allocates from groups it owns,
// then claims an unowned (fully free) group, then a never-used group, and only then falls
// back to a free slot in another handle's group (Stats.GroupFallbacks).

const ownerNone = int32(-1 << 20)

type group struct {
	owner    int32 // handle (NoPlacement = -1 is a handle too), ownerNone when unowned
	freeHead int32 // free slots inside the group, linked through slotRec.next
	fresh    int32 // next never-used slot in the group
	end      int32 // one past the group's last slot
	used     int32 // live + in-flight slots
	onStack  bool  // on its owner's stack
}

type allocator struct {
	affinity bool
	heads    []int32 // per class stack heads (-1 empty); class 0 = global
	nfree    int64

	// group mode
	groupSlots int32
	groups     []group
	stacks     map[int32][]int32 // owner -> groups that may have free slots (validated lazily)
	unowned    []int32
	nextGroup  int32

	hits, fallbacks, groupFallbacks int64
}

func newAllocator(maxSlots int64, affinity bool, groupSlots int64) allocator {
	a := allocator{affinity: affinity, heads: []int32{-1}}
	if groupSlots > 0 {
		a.groupSlots = int32(groupSlots)
		n := (maxSlots + groupSlots - 1) / groupSlots
		a.groups = make([]group, n)
		for g := range a.groups {
			start := int32(int64(g) * groupSlots)
			a.groups[g] = group{owner: ownerNone, freeHead: -1, fresh: start, end: int32(min(int64(start)+groupSlots, maxSlots))}
		}
		a.stacks = map[int32][]int32{}
	}
	return a
}

func (a *allocator) class(h blockdev.Placement) int {
	if !a.affinity || h < 0 {
		return 0
	}
	c := int(h) + 1
	for len(a.heads) <= c {
		a.heads = append(a.heads, -1)
	}
	return c
}

// alloc returns a slot for a write with handle h, or -1.
func (e *Engine) allocSlot(h blockdev.Placement) int32 {
	a := &e.alloc
	if a.groups != nil {
		return e.allocGroup(int32(h))
	}
	if a.affinity && h >= 0 {
		c := a.class(h)
		if s := a.heads[c]; s >= 0 {
			a.heads[c] = e.slots[s].next
			a.nfree--
			a.hits++
			return s
		}
		a.fallbacks++
	}
	for c := range a.heads {
		if s := a.heads[c]; s >= 0 {
			a.heads[c] = e.slots[s].next
			a.nfree--
			return s
		}
	}
	if e.nextSlot < e.layout.MaxSlots {
		s := int32(e.nextSlot)
		e.nextSlot++
		return s
	}
	return -1
}

// freeSlot puts s on a free list (its record must already be cleared of key state).
func (e *Engine) freeSlot(s int32) {
	a := &e.alloc
	r := &e.slots[s]
	r.state = stFree
	if a.groups != nil {
		e.freeGroupSlot(s)
		return
	}
	c := a.class(blockdev.Placement(r.handle))
	r.next = a.heads[c]
	a.heads[c] = s
	a.nfree++
}

func (e *Engine) groupHasFree(g int32) bool {
	gr := &e.alloc.groups[g]
	return gr.freeHead >= 0 || gr.fresh < gr.end
}

func (e *Engine) takeFromGroup(g int32) int32 {
	a := &e.alloc
	gr := &a.groups[g]
	var s int32
	if gr.freeHead >= 0 {
		s = gr.freeHead
		gr.freeHead = e.slots[s].next
		a.nfree--
	} else {
		s = gr.fresh
		gr.fresh++
		if int64(s) >= e.nextSlot {
			e.nextSlot = int64(s) + 1
		}
	}
	gr.used++
	return s
}

func (e *Engine) pushOwned(g int32) {
	a := &e.alloc
	gr := &a.groups[g]
	if !gr.onStack {
		gr.onStack = true
		a.stacks[gr.owner] = append(a.stacks[gr.owner], g)
	}
}

func (e *Engine) allocGroup(o int32) int32 {
	a := &e.alloc
	st := a.stacks[o]
	for len(st) > 0 {
		g := st[len(st)-1]
		gr := &a.groups[g]
		if gr.owner == o && e.groupHasFree(g) {
			a.stacks[o] = st
			return e.takeFromGroup(g)
		}
		st = st[:len(st)-1]
		if gr.owner == o {
			gr.onStack = false
		}
	}
	a.stacks[o] = st
	claim := func(g int32) int32 {
		gr := &a.groups[g]
		gr.owner = o
		gr.onStack = false
		e.pushOwned(g)
		return e.takeFromGroup(g)
	}
	for len(a.unowned) > 0 {
		g := a.unowned[len(a.unowned)-1]
		a.unowned = a.unowned[:len(a.unowned)-1]
		if a.groups[g].owner == ownerNone && e.groupHasFree(g) {
			return claim(g)
		}
	}
	for int(a.nextGroup) < len(a.groups) {
		g := a.nextGroup
		a.nextGroup++
		if a.groups[g].owner == ownerNone && e.groupHasFree(g) {
			return claim(g)
		}
	}
	// Fallback: a free slot in another handle's group.
	for owner, st := range a.stacks {
		if owner == o {
			continue
		}
		for i := len(st) - 1; i >= 0; i-- {
			g := st[i]
			if a.groups[g].owner == owner && e.groupHasFree(g) {
				a.groupFallbacks++
				return e.takeFromGroup(g)
			}
		}
	}
	return -1
}

func (e *Engine) freeGroupSlot(s int32) {
	a := &e.alloc
	g := s / a.groupSlots
	gr := &a.groups[g]
	e.slots[s].next = gr.freeHead
	gr.freeHead = s
	a.nfree++
	gr.used--
	if gr.used <= 0 {
		gr.used = 0
		gr.owner = ownerNone
		gr.onStack = false
		a.unowned = append(a.unowned, g)
		return
	}
	e.pushOwned(g)
}

// rebuildFree rebuilds the free lists after recovery: {s < nextSlot} minus live slots,
// pushed in ascending order (so the LIFO hands out the highest first, as LMCache does).
// In group mode, a group with live slots is owned by the handle of its first live slot.
func (e *Engine) rebuildFree() {
	a := &e.alloc
	if a.groups != nil {
		for g := range a.groups {
			gr := &a.groups[g]
			start := int32(int64(g) * int64(a.groupSlots))
			gr.owner, gr.freeHead, gr.used, gr.onStack = ownerNone, -1, 0, false
			gr.fresh = max(start, min(gr.end, int32(e.nextSlot)))
		}
		a.stacks = map[int32][]int32{}
		a.unowned = a.unowned[:0]
		a.nfree = 0
		for s := int32(0); int64(s) < e.nextSlot; s++ {
			if e.slots[s].state == stLive {
				gr := &a.groups[s/a.groupSlots]
				if gr.owner == ownerNone {
					gr.owner = int32(e.slots[s].handle)
				}
				gr.used++
			}
		}
		for s := int32(0); int64(s) < e.nextSlot; s++ {
			if e.slots[s].state != stLive {
				g := s / a.groupSlots
				gr := &a.groups[g]
				e.slots[s].state = stFree
				e.slots[s].next = gr.freeHead
				gr.freeHead = s
				a.nfree++
			}
		}
		a.nextGroup = int32(len(a.groups))
		for g := range a.groups {
			gr := &a.groups[g]
			start := int64(g) * int64(a.groupSlots)
			if start >= e.nextSlot && a.nextGroup == int32(len(a.groups)) {
				a.nextGroup = int32(g)
			}
			if start >= e.nextSlot {
				continue
			}
			if gr.used > 0 {
				e.pushOwned(int32(g))
			} else {
				a.unowned = append(a.unowned, int32(g))
			}
		}
		// push in reverse so the lowest unowned group is claimed first
		for i, j := 0, len(a.unowned)-1; i < j; i, j = i+1, j-1 {
			a.unowned[i], a.unowned[j] = a.unowned[j], a.unowned[i]
		}
		return
	}
	for i := range a.heads {
		a.heads[i] = -1
	}
	a.nfree = 0
	for s := int32(0); int64(s) < e.nextSlot; s++ {
		if e.slots[s].state != stLive {
			e.slots[s].handle = -1 // LMCache does not restore slot affinity from a checkpoint
			e.freeSlot(s)
		}
	}
}
