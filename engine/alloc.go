package engine

import "github.com/rbctl/rbctl/placement"

// Slot allocation, O(1) per operation (SlotAllocator; the engine's, and rbctl simulate's
// model of it).
//
// Without slot groups (LMCache parity): free slots sit on LIFO stacks linked through
// SlotAllocator.next. Class 0 is the global stack; with affinity a slot freed after a write
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
	owner    int32 // handle (placement.None = -1 is a handle too), ownerNone when unowned
	freeHead int32 // free slots inside the group, linked through SlotAllocator.next
	fresh    int32 // next never-used slot in the group
	end      int32 // one past the group's last slot
	used     int32 // live + in-flight slots
	onStack  bool  // on its owner's stack
}

// SlotAllocator hands out the slots of a cache as the engine does: which free slot a write
// with a placement handle gets, and when a never-used one. It holds no data and no index:
// the caller says which slot it frees and with which handle it was written.
type SlotAllocator struct {
	affinity bool
	heads    []int32 // per class stack heads (-1 empty); class 0 = global
	nfree    int64
	next     []int32 // per slot: the next free slot on its stack or group list (-1 end)
	nextSlot int64   // slots from here on were never used
	maxSlots int64

	// group mode
	groupSlots int32
	groups     []group
	stacks     map[int32][]int32 // owner -> groups that may have free slots (validated lazily)
	unowned    []int32
	nextGroup  int32

	hits, fallbacks, groupFallbacks int64
}

// NewSlotAllocator allocates maxSlots slots, none used yet: with affinity a freed slot is
// kept for the next write with the handle that wrote it (Config.SlotAffinity); groupSlots
// > 0 groups the slots per handle (Config.SlotGroupBytes / SlotBytes).
func NewSlotAllocator(maxSlots int64, affinity bool, groupSlots int64) *SlotAllocator {
	a := &SlotAllocator{}
	a.init(maxSlots, affinity, groupSlots)
	return a
}

func (a *SlotAllocator) init(maxSlots int64, affinity bool, groupSlots int64) {
	*a = SlotAllocator{affinity: affinity, heads: []int32{-1}, next: make([]int32, maxSlots), maxSlots: maxSlots}
	for i := range a.next {
		a.next[i] = -1
	}
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
}

// NextSlot is the first slot never handed out (the checkpoint's next_slot).
func (a *SlotAllocator) NextSlot() int64 { return a.nextSlot }

// FreeSlots is how many slots below NextSlot are free.
func (a *SlotAllocator) FreeSlots() int64 { return a.nfree }

func (a *SlotAllocator) class(h placement.Handle) int {
	if !a.affinity || h < 0 {
		return 0
	}
	c := int(h) + 1
	for len(a.heads) <= c {
		a.heads = append(a.heads, -1)
	}
	return c
}

// Alloc returns a slot for a write with handle h, or -1 when every slot is in use.
func (a *SlotAllocator) Alloc(h placement.Handle) int32 {
	if a.groups != nil {
		return a.allocGroup(int32(h))
	}
	if a.affinity && h >= 0 {
		c := a.class(h)
		if s := a.heads[c]; s >= 0 {
			a.heads[c] = a.next[s]
			a.nfree--
			a.hits++
			return s
		}
		a.fallbacks++
	}
	for c := range a.heads {
		if s := a.heads[c]; s >= 0 {
			a.heads[c] = a.next[s]
			a.nfree--
			return s
		}
	}
	if a.nextSlot < a.maxSlots {
		s := int32(a.nextSlot)
		a.nextSlot++
		return s
	}
	return -1
}

// Free puts slot s, last written with handle h, back on a free list.
func (a *SlotAllocator) Free(s int32, h placement.Handle) {
	if a.groups != nil {
		a.freeGroupSlot(s)
		return
	}
	c := a.class(h)
	a.next[s] = a.heads[c]
	a.heads[c] = s
	a.nfree++
}

func (a *SlotAllocator) groupHasFree(g int32) bool {
	gr := &a.groups[g]
	return gr.freeHead >= 0 || gr.fresh < gr.end
}

func (a *SlotAllocator) takeFromGroup(g int32) int32 {
	gr := &a.groups[g]
	var s int32
	if gr.freeHead >= 0 {
		s = gr.freeHead
		gr.freeHead = a.next[s]
		a.nfree--
	} else {
		s = gr.fresh
		gr.fresh++
		if int64(s) >= a.nextSlot {
			a.nextSlot = int64(s) + 1
		}
	}
	gr.used++
	return s
}

func (a *SlotAllocator) pushOwned(g int32) {
	gr := &a.groups[g]
	if !gr.onStack {
		gr.onStack = true
		a.stacks[gr.owner] = append(a.stacks[gr.owner], g)
	}
}

func (a *SlotAllocator) allocGroup(o int32) int32 {
	st := a.stacks[o]
	for len(st) > 0 {
		g := st[len(st)-1]
		gr := &a.groups[g]
		if gr.owner == o && a.groupHasFree(g) {
			a.stacks[o] = st
			return a.takeFromGroup(g)
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
		a.pushOwned(g)
		return a.takeFromGroup(g)
	}
	for len(a.unowned) > 0 {
		g := a.unowned[len(a.unowned)-1]
		a.unowned = a.unowned[:len(a.unowned)-1]
		if a.groups[g].owner == ownerNone && a.groupHasFree(g) {
			return claim(g)
		}
	}
	for int(a.nextGroup) < len(a.groups) {
		g := a.nextGroup
		a.nextGroup++
		if a.groups[g].owner == ownerNone && a.groupHasFree(g) {
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
			if a.groups[g].owner == owner && a.groupHasFree(g) {
				a.groupFallbacks++
				return a.takeFromGroup(g)
			}
		}
	}
	return -1
}

func (a *SlotAllocator) freeGroupSlot(s int32) {
	g := s / a.groupSlots
	gr := &a.groups[g]
	a.next[s] = gr.freeHead
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
	a.pushOwned(g)
}

// rebuild rebuilds the free lists after recovery: {s < nextSlot} minus the live slots,
// pushed in ascending order (so the LIFO hands out the highest first, as LMCache does);
// live(s) says whether s is live and its handle. Free slots lose their handle (LMCache
// does not restore slot affinity from a checkpoint). In group mode, a group with live
// slots is owned by the handle of its first live slot.
func (a *SlotAllocator) rebuild(nextSlot int64, live func(s int32) (bool, placement.Handle)) {
	a.nextSlot = nextSlot
	if a.groups != nil {
		for g := range a.groups {
			gr := &a.groups[g]
			start := int32(int64(g) * int64(a.groupSlots))
			gr.owner, gr.freeHead, gr.used, gr.onStack = ownerNone, -1, 0, false
			gr.fresh = max(start, min(gr.end, int32(nextSlot)))
		}
		a.stacks = map[int32][]int32{}
		a.unowned = a.unowned[:0]
		a.nfree = 0
		for s := int32(0); int64(s) < nextSlot; s++ {
			if ok, h := live(s); ok {
				gr := &a.groups[s/a.groupSlots]
				if gr.owner == ownerNone {
					gr.owner = int32(h)
				}
				gr.used++
			}
		}
		for s := int32(0); int64(s) < nextSlot; s++ {
			if ok, _ := live(s); !ok {
				gr := &a.groups[s/a.groupSlots]
				a.next[s] = gr.freeHead
				gr.freeHead = s
				a.nfree++
			}
		}
		a.nextGroup = int32(len(a.groups))
		for g := range a.groups {
			gr := &a.groups[g]
			start := int64(g) * int64(a.groupSlots)
			if start >= nextSlot && a.nextGroup == int32(len(a.groups)) {
				a.nextGroup = int32(g)
			}
			if start >= nextSlot {
				continue
			}
			if gr.used > 0 {
				a.pushOwned(int32(g))
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
	for s := int32(0); int64(s) < nextSlot; s++ {
		if ok, _ := live(s); !ok {
			a.Free(s, placement.None)
		}
	}
}

// allocSlot returns a slot for a write with handle h, or -1 (under e.mu).
func (e *Engine) allocSlot(h placement.Handle) int32 { return e.alloc.Alloc(h) }

// freeSlot puts s on a free list (its record must already be cleared of key state).
func (e *Engine) freeSlot(s int32) {
	r := &e.slots[s]
	r.state = stFree
	e.alloc.Free(s, placement.Handle(r.handle))
}

// rebuildFree rebuilds the free lists after recovery (SlotAllocator.rebuild); the free
// slots' records are marked free, without a handle outside group mode.
func (e *Engine) rebuildFree() {
	grouped := e.alloc.groups != nil
	for s := int32(0); int64(s) < e.alloc.nextSlot; s++ {
		if r := &e.slots[s]; r.state != stLive {
			r.state = stFree
			if !grouped {
				r.handle = -1 // LMCache does not restore slot affinity from a checkpoint
			}
		}
	}
	e.alloc.rebuild(e.alloc.nextSlot, func(s int32) (bool, placement.Handle) {
		r := &e.slots[s]
		return r.state == stLive, placement.Handle(r.handle)
	})
}
