package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/placement"
)

// Recovery after the checkpoint is chosen: applying its entries to the index and verifying
// their slot headers (and payloads) in parallel.

// applyState inserts the checkpoint's entries, dropping those LMCache would skip and
// those that would make two entries share a slot or a key.
func (e *Engine) applyState(st *ckptState) {
	e.recovery.Loaded = st.count()
	maxPayload := e.cfg.SlotBytes - int64(e.cfg.HeaderBytes)
	base := e.layout.DataBase
	drop := func(ce *ckptEntry, slot int64, why string) {
		e.recovery.Dropped = append(e.recovery.Dropped, DroppedEntry{Key: ce.key, Slot: slot, Reason: why})
	}
	e.alloc.nextSlot = st.nextSlot
	var rec [96]byte
	e.tab.reserve(st.count())
	st.eachChunk(applyChunk, func(ents []ckptEntry) {
		for lo := 0; lo < len(ents); lo += touchGroup {
			group := ents[lo:min(lo+touchGroup, len(ents))]
			e.tab.touch(group)
			for i := range group {
				e.applyEntry(&group[i], maxPayload, base, rec[:0], drop)
			}
		}
	})
}

// touchGroup is how many entries' home cells recovery loads ahead of indexing them
// (table.touch).
const touchGroup = 64

// applyChunk is how many checkpoint entries recovery builds at a time (ckptState.eachChunk).
const applyChunk = 1 << 16

// applyEntry indexes one checkpoint entry or drops it (applyState).
func (e *Engine) applyEntry(ce *ckptEntry, maxPayload, base int64, rec []byte, drop func(ce *ckptEntry, slot int64, why string)) {
	slot := int64(-1)
	if ce.offset >= base && (ce.offset-base)%e.cfg.SlotBytes == 0 {
		slot = (ce.offset - base) / e.cfg.SlotBytes
	}
	switch {
	case ce.offset < base:
		drop(ce, -1, fmt.Sprintf("offset %d is below data_base %d", ce.offset, base))
		return
	case slot < 0:
		drop(ce, -1, fmt.Sprintf("offset %d is not slot-aligned", ce.offset))
		return
	case slot >= e.layout.MaxSlots:
		drop(ce, slot, fmt.Sprintf("slot %d is beyond max_slots %d", slot, e.layout.MaxSlots))
		return
	case ce.size <= 0 || ce.size > maxPayload:
		drop(ce, slot, fmt.Sprintf("size %d outside (0, %d]", ce.size, maxPayload))
		return
	case len(ce.key) > 65535:
		drop(ce, slot, "key longer than 65535 bytes")
		return
	}
	if err := keyText(ce.key); err != nil {
		drop(ce, slot, "a key no writer stores: "+err.Error())
		return
	}
	if e.slots[slot].state != stFree {
		drop(ce, slot, "slot already owned by an earlier entry")
		return
	}
	k := entryKey(ce, e.cfg.Namespace) // an unparseable legacy key keeps identity 0 until verified
	if e.find(k) >= 0 {
		drop(ce, slot, "duplicate key")
		return
	}
	s := int32(slot)
	r := &e.slots[s]
	r.state = stLive
	r.size = uint32(ce.size)
	r.handle = ce.handle
	if !ce.hasID {
		r.handle = -1
	}
	if ce.hasCRC {
		r.crc = ce.crc
		r.flags |= flHasCRC
	}
	if ce.meta != nil {
		r.flags |= flHasMeta
		e.metas[s] = ce.meta
	}
	e.stamp++
	r.stamp = e.stamp
	// One split of the key for its cost, its record and its cache_salt (three before).
	f, isKey := splitKey(k.enc)
	sp := splitObjectOf(k.enc, f, isKey)
	e.bindRec(s, k, e.roomCostSplit(k, int(ce.size), ce.meta, sp).entry, encodeSplit(rec, k.enc, sp, e.prefixes, e.salts))
	e.live++
	salt := f.salt // k.CacheSalt()
	if k.ns == NamespaceLegacy {
		salt = ""
	}
	e.bySalt[salt] += e.cfg.SlotBytes
	e.byHandle[placement.Handle(r.handle)]++
	if slot >= e.alloc.nextSlot {
		e.alloc.nextSlot = slot + 1 // never hand out a live slot again from next_slot
	}
}

// verifyEntries reads every live slot's header (and payload with VerifyPayloadOnRecover)
// with RecoveryReaders goroutines over contiguous ranges, and drops entries whose header
// has the wrong magic, identity or length, or a checksum that differs from the checkpoint's.
// A cancelled ctx stops the readers within one batch; the error then wraps ctx.Err().
// Headers pre read already (startPrefetch; nil: none) are not read again.
func (e *Engine) verifyEntries(ctx context.Context, pre *headerPrefetch) error {
	if ctx == nil {
		ctx = context.Background()
	}
	live := make([]int32, 0, e.live)
	for s := int32(0); int64(s) < e.alloc.nextSlot; s++ {
		if e.slots[s].state == stLive {
			live = append(live, s)
		}
	}
	total := len(live)
	if total == 0 {
		return nil
	}
	type verdict struct {
		slot   int32
		reason string
		id     uint64 // adopted identity (unknown legacy keys)
		crc    uint32
		hasCRC bool
	}
	workers := min(e.cfg.RecoveryReaders, total)
	results := make([][]verdict, workers)
	var done atomic.Int64
	var progMu sync.Mutex
	report := func() {
		if e.cfg.Progress != nil {
			progMu.Lock()
			e.cfg.Progress(int(done.Load()), total)
			progMu.Unlock()
		}
	}
	if pre != nil { // its reads are this verification's: report them as its progress
		tick := time.NewTicker(100 * time.Millisecond)
	wait:
		for {
			select {
			case <-pre.done:
				break wait
			case <-tick.C:
				done.Store(min(pre.read.Load()*int64(total)/pre.slots, int64(total)))
				report()
			}
		}
		tick.Stop()
		done.Store(0)
	}
	const batch = 32
	hb := int64(e.cfg.HeaderBytes)
	hdrRead := e.lbs // the header's first block holds all 32 bytes we need
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		lo, hi := w*total/workers, (w+1)*total/workers
		wg.Add(1)
		go func(w int, part []int32) {
			defer wg.Done()
			// Staging from the engine's arena where it fits (registered: fixed reads).
			buf, release, err := e.scratch(int(hdrRead) * batch)
			if err != nil {
				for _, s := range part {
					results[w] = append(results[w], verdict{slot: s, reason: "cannot allocate read buffer: " + err.Error()})
				}
				return
			}
			defer release()
			var pbuf []byte
			if e.cfg.VerifyPayloadOnRecover {
				if b, rel, err := e.scratch(int(e.cfg.SlotBytes)); err == nil {
					pbuf = b
					defer rel()
				}
			}
			check := func(s int32, hdr []byte, rerr error) {
				r := &e.slots[s] // read-only here; no other goroutine writes records during recovery
				v := verdict{slot: s}
				if rerr != nil {
					v.reason = "slot header read failed: " + rerr.Error()
					results[w] = append(results[w], v)
					return
				}
				// The fields verification checks end at slotHeaderRB: the key record after them
				// (its CRC and its string) is for a rebuild from the headers, not for this.
				h, err := decodeSlotHeader(hdr[:min(hb, hdrRead, slotHeaderRB)])
				switch {
				case err != nil:
					v.reason = "stale slot header: " + err.Error()
				case r.id == 0 && e.cfg.Namespace == NamespaceLegacy:
					v.id = h.Identity // unparseable legacy key: adopt the header's identity
				case h.Identity != r.id:
					v.reason = fmt.Sprintf("stale slot header: identity %016x, key's is %016x", h.Identity, r.id)
				}
				if v.reason == "" && h.Len != uint64(r.size) {
					v.reason = fmt.Sprintf("stale slot header: payload_len %d, checkpoint size %d", h.Len, r.size)
				}
				if v.reason == "" && h.HasCRC {
					switch {
					case r.flags&flHasCRC == 0: // adopt the header's (a v1 checkpoint records none)
						v.crc, v.hasCRC = h.CRC, true
					case r.crc != h.CRC:
						v.reason = fmt.Sprintf("slot rewritten after the checkpoint: header checksum %08x, checkpoint %08x", h.CRC, r.crc)
					}
				}
				if v.reason == "" && pbuf != nil && (v.hasCRC || r.flags&flHasCRC != 0) && ctx.Err() == nil {
					want := r.crc
					if v.hasCRC {
						want = v.crc
					}
					rb := pbuf[:roundUp(int64(r.size), e.lbs)]
					if err := blockdev.ReadAt(e.dev, rb, e.slotOff(s)+hb); err != nil {
						v.reason = "payload read failed: " + err.Error()
					} else if coldCRC(rb[:r.size]) != want {
						v.reason = "payload checksum mismatch (torn or stale payload)"
					}
				}
				if v.reason != "" || v.id != 0 || v.hasCRC {
					results[w] = append(results[w], v)
				}
			}
			// Small slots: read runs of nearby slots as one sequential extent of up to 1 MiB
			// and pick the headers out (1M slots of 1 KiB: ~1,000 reads instead of 1M).
			var span []byte
			spanSlots := int32(0)
			if e.cfg.SlotBytes <= 64<<10 && e.cfg.SlotBytes*2 <= 1<<20 {
				spanSlots = int32((1 << 20) / e.cfg.SlotBytes)
				var rel func()
				if span, rel, err = e.scratch(int(int64(spanSlots) * e.cfg.SlotBytes)); err != nil {
					spanSlots = 0
				} else {
					defer rel()
				}
			}
			if pre != nil { // the headers read already; the others are read below
				rest := part[:0:0]
				for _, s := range part {
					if hdr := pre.header(s); hdr != nil {
						check(s, hdr, nil)
					} else {
						rest = append(rest, s)
					}
				}
				if done.Add(int64(len(part) - len(rest))); len(rest) < len(part) {
					report()
				}
				if len(rest) > 0 && len(rest) < len(part) { // verdicts in slot order, as without
					defer func() { slices.SortFunc(results[w], func(a, b verdict) int { return cmp.Compare(a.slot, b.slot) }) }()
				}
				part = rest
			}
			ops := make([]blockdev.Op, 0, batch)
			for len(part) > 0 && ctx.Err() == nil {
				n := 0
				if spanSlots > 0 {
					n = 1
					for n < len(part) && part[n]-part[0] < spanSlots {
						n++
					}
					ln := int64(part[n-1]-part[0])*e.cfg.SlotBytes + hdrRead
					op := []blockdev.Op{{Off: e.slotOff(part[0]), Buf: span[:ln], Handle: placement.None}}
					_ = e.dev.Submit(op)
					for j := 0; j < n; j++ {
						if op[0].Err != nil { // fall back to this slot's header alone
							hdr := buf[:hdrRead]
							check(part[j], hdr, blockdev.ReadAt(e.dev, hdr, e.slotOff(part[j])))
							continue
						}
						o := int64(part[j]-part[0]) * e.cfg.SlotBytes
						check(part[j], span[o:o+hdrRead], nil)
					}
				} else {
					n = min(batch, len(part))
					ops = ops[:0]
					for j := 0; j < n; j++ {
						ops = append(ops, blockdev.Op{Off: e.slotOff(part[j]), Buf: buf[int64(j)*hdrRead : int64(j+1)*hdrRead], Handle: placement.None})
					}
					_ = e.dev.Submit(ops)
					for j := 0; j < n; j++ {
						check(part[j], ops[j].Buf, ops[j].Err)
					}
				}
				part = part[n:]
				if done.Add(int64(n))%4096 < int64(n) {
					report()
				}
			}
		}(w, live[lo:hi])
	}
	wg.Wait()
	report()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("recovery stopped after verifying %d of %d entries; nothing was written: %w", done.Load(), total, err)
	}
	for _, rs := range results {
		for _, v := range rs {
			s := v.slot
			r := &e.slots[s]
			if v.reason != "" {
				k := e.keyOf(s)
				if _, ok := e.rescuing[s]; ok {
					e.recovery.NotRescued = append(e.recovery.NotRescued, DroppedEntry{Key: k.enc, Slot: int64(s), Reason: v.reason})
					delete(e.rescuing, s)
				} else {
					e.recovery.Dropped = append(e.recovery.Dropped, DroppedEntry{Key: k.enc, Slot: int64(s), Reason: v.reason})
				}
				e.bySalt[k.CacheSalt()] -= e.cfg.SlotBytes
				if e.bySalt[k.CacheSalt()] <= 0 {
					delete(e.bySalt, k.CacheSalt())
				}
				e.byHandle[placement.Handle(r.handle)]--
				if e.byHandle[placement.Handle(r.handle)] <= 0 {
					delete(e.byHandle, placement.Handle(r.handle))
				}
				e.unbind(s)
				r.state = stFree
				e.live--
				continue
			}
			if v.id != 0 {
				e.tabDelete(s)
				r.id = v.id
				e.tabInsert(s)
			}
			if v.hasCRC {
				r.crc = v.crc
				r.flags |= flHasCRC
			}
		}
	}
	return nil
}
