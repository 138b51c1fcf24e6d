package engine

import (
	"cmp"
	"slices"

	"github.com/rbctl/rbctl/blockdev"
)

// Taking back what a fallback would lose. When recovery falls back to the older container
// because the newer one is damaged but still lists its entries (Selection.Lost > 0), the
// keys only the newer one lists were live at the newest checkpoint, and their slots may
// still hold them. With VerifyOnLoad each such entry is indexed where the newer container
// put it — in a slot the chosen checkpoint leaves free, for a key it does not hold — and
// then verified like every other entry (the slot header's identity, length and checksum;
// the payload too with VerifyPayloadOnRecover); what fails is left out. A damaged
// container's bytes are not trusted: an entry it garbled names a slot whose header does not
// match it, and is refused by the same check.

// applyRescue indexes the entries of the rejected container's index st whose keys the
// chosen checkpoint lacks, marking their slots in e.rescuing; what it refuses at once goes
// to NotRescued.
func (e *Engine) applyRescue(st *ckptState) {
	e.rescuing = map[int32]struct{}{}
	maxPayload := e.cfg.SlotBytes - int64(e.cfg.HeaderBytes)
	base := e.layout.DataBase
	notRescued := func(ce *ckptEntry, slot int64, why string) {
		e.recovery.NotRescued = append(e.recovery.NotRescued, DroppedEntry{Key: ce.key, Slot: slot, Reason: why})
	}
	var rec [96]byte
	st.eachChunk(applyChunk, func(ents []ckptEntry) {
		for i := range ents {
			ce := &ents[i]
			k := entryKey(ce, e.cfg.Namespace)
			if e.find(k) >= 0 || e.holds(ce) {
				continue // the chosen checkpoint holds it: not lost
			}
			if ce.hasID {
				// A damaged payload can spell a key wrong beside its right identity (one
				// flipped byte of a shared prefix garbles every key using it): the slot
				// header's key record, under its own checksum, spells it again.
				if p, err := ParseKey(ce.key, e.cfg.Namespace); err != nil || p.id != ce.id {
					key, ok := e.headerKey(ce)
					if !ok {
						notRescued(ce, e.slotOfOffset(ce.offset), "its key does not match its identity in the damaged index, and its slot header holds no key record that does")
						continue
					}
					ce.key = key
					if e.find(entryKey(ce, e.cfg.Namespace)) >= 0 {
						continue
					}
				}
			}
			live := e.live
			e.applyEntry(ce, maxPayload, base, rec[:0], notRescued)
			if e.live > live {
				e.rescuing[int32((ce.offset-base)/e.cfg.SlotBytes)] = struct{}{}
			}
		}
	})
}

// holds reports whether the entry's slot is live with the entry's identity: the same entry
// as the chosen checkpoint's, its key spelled otherwise by damage.
func (e *Engine) holds(ce *ckptEntry) bool {
	s := e.slotOfOffset(ce.offset)
	return ce.hasID && s >= 0 && e.slots[s].state == stLive && e.slots[s].id == ce.id
}

// headerKey is the key in the key record of the slot header at ce's offset when that
// record is whole (its checksum holds) and the key's identity is ce's.
func (e *Engine) headerKey(ce *ckptEntry) (string, bool) {
	s := e.slotOfOffset(ce.offset)
	if s < 0 {
		return "", false
	}
	buf, release, err := e.scratch(int(roundUp(int64(e.cfg.HeaderBytes), e.lbs)))
	if err != nil {
		return "", false
	}
	defer release()
	hdr := buf[:e.cfg.HeaderBytes]
	if blockdev.ReadAt(e.dev, buf, e.slotOff(int32(s))) != nil {
		return "", false
	}
	h, err := decodeSlotHeader(hdr)
	if err != nil || !h.HasKey || h.Identity != ce.id {
		return "", false
	}
	if p, err := ParseKey(h.Key, e.cfg.Namespace); err != nil || p.id != ce.id {
		return "", false
	}
	return h.Key, true
}

// slotOfOffset is the slot at byte offset off, or -1 when off names none.
func (e *Engine) slotOfOffset(off int64) int64 {
	base := e.layout.DataBase
	if off < base || (off-base)%e.cfg.SlotBytes != 0 || (off-base)/e.cfg.SlotBytes >= e.layout.MaxSlots {
		return -1
	}
	return (off - base) / e.cfg.SlotBytes
}

// rescued lists the keys applyRescue indexed that verification kept, and forgets the marks.
func (e *Engine) rescued() {
	for s := range e.rescuing {
		if e.slots[s].state == stLive {
			e.recovery.Rescued = append(e.recovery.Rescued, e.keyOf(s).enc)
		}
	}
	slices.Sort(e.recovery.Rescued)
	slices.SortFunc(e.recovery.NotRescued, func(a, b DroppedEntry) int { return cmp.Compare(a.Key, b.Key) })
	e.rescuing = nil
}

// entryKey is the key a checkpoint entry indexes (as applyEntry builds it).
func entryKey(ce *ckptEntry, ns Namespace) Key {
	if ce.hasID {
		return Key{enc: ce.key, id: ce.id, ns: ns}
	}
	k, _ := ParseKey(ce.key, ns)
	return k
}
