package engine

import (
	"slices"
	"time"

	"github.com/rbctl/rbctl/placement"
)

// Usage, Stats and Entries: the engine's reports.

func (e *Engine) usage() Usage {
	e.mu.Lock()
	defer e.mu.Unlock()
	u := Usage{
		SlotsTotal:    e.layout.MaxSlots,
		SlotsUsed:     e.live,
		SlotsInflight: e.inflight,
		SlotsFree:     e.alloc.nfree + int64(len(e.pending)) + e.dealloc,
		SlotsPending:  int64(len(e.pending)) + e.dealloc,
		NextSlot:      e.alloc.nextSlot,
		BytesBySalt:   make(map[string]int64, len(e.bySalt)),
		SlotsByHandle: make(map[placement.Handle]int64, len(e.byHandle)),
	}
	if u.SlotsTotal > 0 {
		u.Fraction = float64(e.live+e.inflight) / float64(u.SlotsTotal)
	}
	for k, v := range e.bySalt {
		u.BytesBySalt[k] = v
	}
	for k, v := range e.byHandle {
		u.SlotsByHandle[k] = v
	}
	return u
}

func (e *Engine) stats() Stats {
	// The deallocator adds its call count after the outcome counters: reading it first
	// makes the slots and errors seen cover at least the calls seen.
	deallocCalls := e.st.deallocCalls.Load()
	s := Stats{
		Puts: e.st.puts.Load(), PutBytes: e.st.putBytes.Load(), PutSkipped: e.st.putSkipped.Load(), PutFailed: e.st.putFailed.Load(),
		Loads: e.st.loads.Load(), LoadBytes: e.st.loadBytes.Load(), LoadMisses: e.st.loadMisses.Load(),
		ChecksumErrors: e.st.crcErrs.Load(),
		Deletes:        e.st.deletes.Load(), DeletesRefused: e.st.deletesRefused.Load(),
		Lookups: e.st.lookups.Load(), LookupHits: e.st.lookupHits.Load(),
		Checkpoints: e.st.ckpts.Load(), CheckpointsForced: e.st.ckptForced.Load(), CheckpointErrors: e.st.ckptErrs.Load(),
		CheckpointBytes: e.st.ckptBytes.Load(), CheckpointEntries: e.st.ckptEntries.Load(),
		MaxLockHold:        time.Duration(e.st.maxHold.Load()),
		MaxLockHoldCPU:     time.Duration(e.st.maxHoldCPU.Load()),
		LastCheckpointTime: time.Duration(e.st.lastCkptDur.Load()),
		DeallocatedSlots:   e.st.deallocSlots.Load(), DeallocateErrors: e.st.deallocErrs.Load(),
		DeallocateCalls: deallocCalls, DeallocateRanges: e.st.deallocRanges.Load(),
		LastCheckpointError: e.st.lastCkptErr.Load().(string),

		BufferPoolBytes:      e.bufStats.poolBytes.Load(),
		BuffersRegistered:    e.bufStats.registered.Load(),
		BufferRegisterErrors: e.bufStats.regErrs.Load(),
		BufferRegisterError:  e.bufStats.lastErr.Load().(string),
		BufferPoolMisses:     e.pool.misses.Load(),
		RegisteredMemory:     e.bufStats.userRegs.Load(),
		PutsVectored:         e.st.putsVectored.Load(),
	}
	e.mu.Lock()
	s.DirtyOps = int64(e.dirty - e.persisted)
	if s.LastCheckpointError != "" && s.DirtyOps > 0 {
		s.CheckpointFailingFor = e.now().Sub(e.firstDirt)
	}
	s.AffinityHits, s.AffinityFallbacks, s.GroupFallbacks = e.alloc.hits, e.alloc.fallbacks, e.alloc.groupFallbacks
	s.Recovery = e.recovery
	e.mu.Unlock()
	s.CheckpointSeq = e.seqPub.Load()
	s.PutsRefusedCheckpoint = e.st.putCkptFailing.Load()
	s.Room = e.roomStats()
	return s
}

// entriesChunk is how many slots entries reads per hold of the index lock.
const entriesChunk = 1024

// walkLive walks the live slots in order, entriesChunk at a time: it copies pick(s) of a
// chunk's live slots under the index lock and calls fn on them with the lock released.
// Memory stays at one chunk and the lock is never held for the whole index (a walk of
// millions of entries used to copy them all, and hold the lock while it did).
func walkLive[T any](e *Engine, pick func(s int32) T, fn func(T) bool) {
	chunk := make([]T, 0, entriesChunk)
	for start := int64(0); ; start += entriesChunk {
		chunk = chunk[:0]
		e.mu.Lock()
		end := min(start+entriesChunk, e.alloc.nextSlot)
		for s := int32(start); int64(s) < end; s++ {
			if e.slots[s].state == stLive {
				chunk = append(chunk, pick(s))
			}
		}
		done := end >= e.alloc.nextSlot
		e.mu.Unlock()
		for _, x := range chunk {
			if !fn(x) {
				return
			}
		}
		if done {
			return
		}
	}
}

// entries walks the live entries, their keys spelled (walkLive).
func (e *Engine) entries(fn func(Key, EntryMeta) bool) {
	type kv struct {
		k Key
		m EntryMeta
	}
	walkLive(e, func(s int32) kv { return kv{e.keyOf(s), e.metaOf(s)} }, func(x kv) bool { return fn(x.k, x.m) })
}

// identities walks the live entries' identities without spelling any key (a node's start
// announces them to its cluster directory).
func (e *Engine) identities(fn func(uint64) bool) {
	walkLive(e, func(s int32) uint64 { return e.slots[s].id }, fn)
}

// inStoreOrder walks the live entries in store order (newest first when newestFirst): it
// notes every live slot's stamp (puts stamp in store order; recovery stamps entries in the
// checkpoint's order, which is the stamps' order), sorts them, and picks them a chunk at a
// time under the index lock as walkLive does. A slot whose stamp changed meanwhile (deleted,
// or stored to again) is skipped: its entry is new or gone. Stamps are 32 bits: after 2^32
// puts in one process the order wraps (recovery numbers them afresh, so a walk right after
// a restart, as a node's seeding is, is exact).
func inStoreOrder[T any](e *Engine, newestFirst bool, pick func(s int32) T, fn func(T) bool) {
	var order []uint64 // stamp<<32 | slot
	walkLive(e, func(s int32) uint64 { return uint64(e.slots[s].stamp)<<32 | uint64(uint32(s)) },
		func(x uint64) bool { order = append(order, x); return true })
	slices.Sort(order)
	if newestFirst {
		slices.Reverse(order)
	}
	chunk := make([]T, 0, entriesChunk)
	for len(order) > 0 {
		n := min(len(order), entriesChunk)
		chunk = chunk[:0]
		e.mu.Lock()
		for _, x := range order[:n] {
			s := int32(uint32(x))
			if r := &e.slots[s]; r.state == stLive && r.stamp == uint32(x>>32) {
				chunk = append(chunk, pick(s))
			}
		}
		e.mu.Unlock()
		order = order[n:]
		for _, x := range chunk {
			if !fn(x) {
				return
			}
		}
	}
}

// keysOf walks id's probe sequence in the table: every cell up to the first empty one may
// hold a slot of that identity (insertions and backward-shift deletions keep them there).
func (e *Engine) keysOf(id uint64) []Key {
	e.mu.Lock()
	defer e.mu.Unlock()
	t := &e.tab
	h := mix(id)
	fp, fpMask := t.fp(h), ^t.slotMask
	var out []Key
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		c := t.cells[i]
		if c == 0 {
			return out
		}
		if c&fpMask != fp {
			continue
		}
		if s := e.cellSlot(c); e.slots[s].id == id && e.slots[s].state == stLive {
			out = append(out, e.keyOf(s))
		}
	}
}
