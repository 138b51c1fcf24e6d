package engine

import (
	"encoding/binary"
	"strconv"
	"time"
)

// Room in the checkpoint. Every key the index holds must fit the next checkpoint, or that
// checkpoint fails and a crash loses every key acknowledged since the last one, of every
// tenant. Keys may be 65,535 bytes and metadata is the caller's, so the engine accounts for
// the checkpoint bytes of every bound slot (live or in flight) and refuses a put whose entry
// would not fit, before anything is written (ErrIndexFull).
//
// So that no tenant's long keys use up another's room, each free slot keeps a reserve of
// roomPerSlot bytes (7/8 of the region's bytes per slot): an entry of at most that size is
// always admitted while a slot is free. A bound entry is charged max(cost, roomPerSlot);
// what an entry needs beyond its reserve, and every interned model prefix and cache_salt of
// the compact format, comes from the spare eighth (and whatever the free slots' reserves
// leave). The invariant, kept under e.mu:
//
//	ixUsed + freeSlots × roomPerSlot ≤ ixBudget
//
// where ixUsed = Σ max(cost, roomPerSlot) over bound slots (+ the string tables' bytes,
// strBytes, which the interners count and release when no key uses a string any more) and
// ixBudget = the container's payload room less an upper bound on the checkpoint's header.
// Costs are upper bounds of the encoded bytes, so a checkpoint is never larger than
// ixBudget + header ≤ PayloadCap.

// roomInit sets the budget from the layout and the config's format (called once at open).
func (e *Engine) roomInit() {
	var hdr int
	if e.cfg.CheckpointFormat == CheckpointLMCacheV1 {
		b, _ := e.encodeV1(&snapshot{nextSlot: e.layout.MaxSlots})
		hdr = len(b)
	} else {
		hdr = len(e.encodeCompact(&snapshot{}))
	}
	e.ixBudget = e.layout.PayloadCap - int64(hdr) - 64
	if e.ixBudget < 0 {
		e.ixBudget = 0
	}
	if e.layout.MaxSlots > 0 {
		e.ixPerSlot = e.ixBudget / 8 * 7 / e.layout.MaxSlots
	}
	e.ixOffDigits = len(strconv.FormatInt(e.slotOff(int32(max(e.layout.MaxSlots-1, 0))), 10))
}

// entryCost is an upper bound on the bytes k's entry takes in a checkpoint, with its
// metadata and a payload of size bytes, not counting the compact format's string tables.
func (e *Engine) entryCost(k Key, size int, meta *ObjMeta) int64 {
	return e.roomCostOf(k, size, meta).entry
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// strCost is what s takes in a compact checkpoint's string table.
func strCost(s string) int64 { return int64(uvarintLen(uint64(len(s))) + len(s)) }

// roomCost is what a put of k asks of the room: its entry's cost (entryCost) and, in the
// compact format, the prefix and salt it would intern (checked under e.mu by newStrCost).
type roomCost struct {
	entry          int64
	prefix, salt   string
	object, salted bool
}

func (e *Engine) roomCostOf(k Key, size int, meta *ObjMeta) roomCost {
	if e.cfg.CheckpointFormat == CheckpointLMCacheV1 {
		return e.roomCostSplit(k, size, meta, objSplit{})
	}
	f, isKey := splitKey(k.enc) // once: the put's hot path
	return e.roomCostSplit(k, size, meta, splitObjectOf(k.enc, f, isKey))
}

// roomCostSplit is roomCostOf of k split as sp (splitObjectOf; unused in the v1 format).
func (e *Engine) roomCostSplit(k Key, size int, meta *ObjMeta, sp objSplit) roomCost {
	var c roomCost
	if e.cfg.CheckpointFormat == CheckpointLMCacheV1 {
		c.entry = int64(len(appendJSONString(nil, k.enc)) + len(`:{"offset":`) + e.ixOffDigits +
			len(`,"size":`) + len(strconv.Itoa(size)) + 1 + len(appendMetaFields(nil, meta)) + 1 + 1)
		return c
	}
	hexs := sp.hexs
	c.prefix, c.salt, c.salted, c.object = sp.prefix, sp.salt, sp.hasSalt, sp.ok
	n := entFixedLen
	if c.object {
		n += 1 + binary.MaxVarintLen32 + 1 + len(hexs)/2 + binary.MaxVarintLen32
	} else {
		n += 1 + uvarintLen(uint64(len(k.enc))) + len(k.enc)
	}
	if meta != nil {
		m := len(appendMetaJSON(nil, meta))
		n += uvarintLen(uint64(m)) + m
	}
	c.entry = int64(n)
	return c
}

// newStrCost is what binding a key of cost c would add to the string tables: its prefix and
// salt when not interned yet. Called under e.mu.
func (e *Engine) newStrCost(c roomCost) int64 {
	if !c.object {
		return 0
	}
	var n int64
	if _, in := e.prefixes.ids[c.prefix]; !in {
		n += strCost(c.prefix)
	}
	if _, in := e.salts.ids[c.salt]; c.salted && !in {
		n += strCost(c.salt)
	}
	return n
}

// strBytes is what the string tables take in a compact checkpoint (0 for v1, which spells
// every key out in its entry).
func (e *Engine) strBytes() int64 {
	if e.cfg.CheckpointFormat == CheckpointLMCacheV1 {
		return 0
	}
	return e.prefixes.bytes + e.salts.bytes
}

func (e *Engine) charge(cost int64) int64 { return max(cost, e.ixPerSlot) }

// roomFor reports whether an entry of cost c can be bound now without breaking the
// invariant; when not, it returns what it would need and what is left. Called under e.mu.
func (e *Engine) roomFor(c roomCost) (ok bool, need, left int64) {
	free := e.layout.MaxSlots - e.live - e.inflight
	if free <= 0 {
		return true, 0, 0 // no slot either: allocation refuses it as full
	}
	need = e.charge(c.entry) + e.newStrCost(c)
	left = e.ixBudget - e.ixUsed - e.strBytes() - (free-1)*e.ixPerSlot
	return need <= left, need, left
}

// RoomStats is the checkpoint room accounting (Stats.Room).
type RoomStats struct {
	BudgetBytes  int64 `json:"budget_bytes"`   // checkpoint payload room for entries and strings
	PerSlotBytes int64 `json:"per_slot_bytes"` // kept for each free slot
	UsedBytes    int64 `json:"used_bytes"`     // charged to bound slots and string tables
	SpareBytes   int64 `json:"spare_bytes"`    // what an entry may take beyond its slot's reserve now
	Refused      int64 `json:"refused"`        // puts refused with ErrIndexFull
}

func (e *Engine) roomStats() RoomStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	free := e.layout.MaxSlots - e.live - e.inflight
	used := e.ixUsed + e.strBytes()
	return RoomStats{BudgetBytes: e.ixBudget, PerSlotBytes: e.ixPerSlot, UsedBytes: used,
		SpareBytes: e.ixBudget - used - max(free, 0)*e.ixPerSlot, Refused: e.st.putRoom.Load()}
}

// ckptWindow is the crash window a caller of a periodic engine is promised
// (CheckpointInterval + ForceAfter); 0 when the engine makes no such promise.
func (e *Engine) ckptWindow() time.Duration {
	if !e.cfg.Periodic || e.cfg.ReadOnly {
		return 0
	}
	if e.cfg.ForceAfter > 0 {
		return e.cfg.CheckpointInterval + e.cfg.ForceAfter
	}
	return 0
}

// ckptFailing returns ErrCheckpointFailing (with the last error) once checkpoints have failed
// and the oldest change not in a checkpoint is older than the crash window. Called under e.mu.
func (e *Engine) ckptFailing() error {
	w := e.ckptWindow()
	if w == 0 || e.dirty == e.persisted {
		return nil
	}
	last, _ := e.st.lastCkptErr.Load().(string)
	if last == "" || e.now().Sub(e.firstDirt) <= w {
		return nil
	}
	return fieldErr(ErrCheckpointFailing, nil, "the oldest change not in a checkpoint is %s old, past the %s crash window; last checkpoint error: %s",
		e.now().Sub(e.firstDirt).Round(time.Millisecond), w, last)
}
