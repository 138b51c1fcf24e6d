package engine

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/placement"
)

// Checkpoint selection: which of the two metadata containers recovery continues from, and
// why (docs/format.md "Choosing the checkpoint", docs/reliability.md "Checkpoint
// selection"). LMCache takes the valid container with the highest seq, but its seq sits in
// the header, outside the payload CRC: one flipped bit can make the older checkpoint win.
// rbctl trusts a seq only when a checksum covers it (the compact payload, or the seal of
// an rbctl-written header); otherwise it checks the seq against the container it sits in,
// against the other container's, and against the index contents (next_slot only grows;
// slot headers carry the identity of the last key written to each slot).

// ErrSelectionDoubt: the two containers hold different indexes and nothing checksummed
// tells which one is newer. Open refuses to write over the other one unless told to.
var ErrSelectionDoubt = errors.New("checkpoint selection in doubt")

// Selection says which checkpoint recovery used and why (RecoveryReport.Selection).
type Selection struct {
	Container int    // the container recovery used (-1: none)
	Seq       uint64 // its seq: the checksummed one when the header's copy was damaged
	Reason    string // why this one, in a sentence or two
	// Doubt: the containers hold different indexes and no checksummed evidence tells which
	// is newer (or another program wrote one of two containers of different formats).
	// Open refuses to write unless OpenOptions.AcceptDoubt.
	Doubt bool
	// Fallback: a container that is, or may be, newer than the one used was rejected.
	Fallback bool
	// Lost counts the keys of the rejected container that the chosen one lacks (with
	// Fallback). LostKnown is false when the rejected container is too damaged to count.
	Lost       int
	LostKnown  bool
	LostSample []string // up to 8 of those keys
	// MixedFormats: the two usable containers hold different checkpoint formats.
	MixedFormats bool
	// Namespace of the chosen checkpoint and where it came from: "checkpoint" (its marker),
	// "slot headers" (its keys' identities match them), "key shape", "container N: ..."
	// (the other container told), or "" when nothing tells.
	Namespace       Namespace
	NamespaceSource string
	Candidates      [2]Candidate
	// rejected is the rejected container's index when Lost counted keys in it: recovery
	// with VerifyOnLoad takes back those whose slots still hold them (rescue.go).
	rejected *ckptState
}

// Candidate is what selection saw in one container.
type Candidate struct {
	Container int
	Usable    bool   // valid header and CRC, and the payload decodes
	HeaderSeq uint64 // the seq in the header, as read
	Seq       uint64 // the seq selection used
	// SeqSource: "payload" (compact v2, under the CRC), "seal" or "seal (repaired)" (rbctl's
	// header seal), "header" (LMCache's header seq, under no checksum).
	SeqSource string
	SeqNote   string // a damaged or misplaced seq, when found
	Format    CheckpointFormat
	Entries   int // -1: the payload does not decode
	NextSlot  int64
	Namespace Namespace // from the checkpoint's own marker ("" when it has none)
	Problem   string    // why it is not usable
	// Stale counts entries whose slot header contradicts them, among the slots where the
	// two containers disagree (-1: not checked).
	Stale int
}

// Damaged reports whether the container's header is damaged though its checkpoint is
// usable: a seq repaired from a checksummed copy, a broken seal, or a misplaced seq.
func (c Candidate) Damaged() bool { return c.SeqNote != "" || c.SeqSource == "seal (repaired)" }

// cand is a container under selection.
type cand struct {
	sc      *scanned
	st      *ckptState // decoded payload; of an invalid container only to count what is lost
	usable  bool
	seq     uint64
	trusted bool // a checksum covers seq
	out     Candidate
}

// seqContainer is the container seq n is written to: (n-1) mod 2.
func seqContainer(n uint64) int { return int((n - 1) % 2) }

// newer orders seqs as serial numbers (RFC 1982): a is newer than b when a-b, read as a
// signed 64-bit number, is positive. A wrap (2^64-1 then 0) keeps the order; seqs exactly
// 2^63 apart are unordered.
func newer(a, b uint64) bool { return int64(a-b) > 0 }

// adjacent reports whether two seqs are consecutive (as two alternating writes leave them).
func adjacent(a, b uint64) bool { return a-b == 1 || b-a == 1 }

func nsOf(st *ckptState) Namespace {
	if st.legacyNS {
		return NamespaceLegacy
	}
	return NamespaceObject
}

func makeCand(i int, s *scanned) cand {
	c := cand{sc: s}
	o := &c.out
	o.Container, o.HeaderSeq, o.Entries, o.Stale, o.Problem = i, s.info.Seq, -1, -1, s.info.Problem
	if s.payload != nil {
		st, err := s.decoded, error(nil)
		if st == nil {
			st, err = decodeCheckpointLazy(s.payload) // keys spelled out only where needed
		}
		switch {
		case err == nil:
			c.st = st
			o.Format, o.Entries, o.NextSlot = st.format, st.count(), st.nextSlot
			if st.hasNS {
				o.Namespace = nsOf(st)
			}
			c.usable = s.info.Valid
		case s.info.Valid:
			// A sound container whose payload does not decode is as good as a corrupt one.
			s.info.Valid = false
			s.info.Problem = err.Error()
			s.damaged = true
			o.Problem = s.info.Problem
		}
	}
	o.Usable = c.usable
	c.seq, o.SeqSource = s.info.Seq, "header"
	switch {
	case c.usable && c.st.hasSeq:
		c.seq, c.trusted, o.SeqSource = c.st.seq, true, "payload"
	case s.seal == sealIntact:
		c.seq, c.trusted, o.SeqSource = s.sealSeq, true, "seal"
	case s.seal == sealRepaired:
		c.seq, c.trusted, o.SeqSource = s.sealSeq, true, "seal (repaired)"
	case s.seal == sealBroken:
		o.SeqNote = "its seal is damaged; the header seq is not verified"
	}
	o.Seq = c.seq
	if s.hdrOK && c.seq != s.info.Seq {
		o.SeqNote = fmt.Sprintf("header seq %d is damaged; the checksummed seq is %d", s.info.Seq, c.seq)
	}
	if c.usable && seqContainer(c.seq) != i {
		o.SeqNote = strings.TrimPrefix(o.SeqNote+fmt.Sprintf("; seq %d belongs in container %d", c.seq, seqContainer(c.seq)), "; ")
	}
	return c
}

// selectCheckpoint picks the container to recover from. It reads slot headers (never
// writes) when the seqs alone cannot be trusted, and marks a container whose payload does
// not decode invalid in sc.
func selectCheckpoint(dev blockdev.Device, lay Layout, sc *[2]scanned) (Selection, *ckptState) {
	cs := [2]cand{makeCand(0, &sc[0]), makeCand(1, &sc[1])}
	sel := Selection{Container: -1, Namespace: NamespaceObject}
	switch {
	case cs[0].usable && cs[1].usable:
		decideTwo(dev, lay, &cs, &sel)
	case cs[0].usable:
		decideOne(&cs, 0, &sel)
	case cs[1].usable:
		decideOne(&cs, 1, &sel)
	default:
		sel.Reason = fmt.Sprintf("no usable checkpoint: container 0: %s; container 1: %s", problemOf(&cs[0]), problemOf(&cs[1]))
	}
	sel.Candidates = [2]Candidate{cs[0].out, cs[1].out}
	if sel.Container < 0 {
		return sel, nil
	}
	chosen := &cs[sel.Container]
	sel.Seq = chosen.seq
	other := &cs[1-sel.Container]
	if sel.Fallback {
		countLost(&sel, chosen.st, other.st)
		if sel.Lost > 0 {
			sel.rejected = other.st
		}
	}
	sel.Namespace, sel.NamespaceSource = inferNamespace(dev, lay, chosen.st)
	if sel.NamespaceSource == "" && other.usable {
		if ns, src := inferNamespace(dev, lay, other.st); src != "" {
			sel.Namespace, sel.NamespaceSource = ns, fmt.Sprintf("container %d (seq %d): %s", 1-sel.Container, other.seq, src)
		}
	}
	return sel, chosen.st
}

func problemOf(c *cand) string {
	if c.out.Problem != "" {
		return c.out.Problem
	}
	return "not usable"
}

// decideOne: only container u is usable. The other one matters for the report: if it is
// (or may be) newer, recovery falls back and says so.
func decideOne(cs *[2]cand, u int, sel *Selection) {
	c, o := &cs[u], &cs[1-u]
	sel.Container = u
	switch {
	case o.sc.info.Problem == "empty":
		sel.Reason = fmt.Sprintf("container %d holds the only checkpoint (seq %d); container %d was never written", u, c.seq, 1-u)
	case o.sc.hdrOK && newer(o.seq, c.seq):
		sel.Fallback = true
		sel.Reason = fmt.Sprintf("container %d (seq %d) is newer but invalid (%s); fell back to container %d (seq %d)", 1-u, o.seq, o.out.Problem, u, c.seq)
	case o.sc.hdrOK && !o.trusted && !adjacent(o.seq, c.seq):
		sel.Fallback = true
		sel.Reason = fmt.Sprintf("container %d is invalid (%s) and its unverified seq %d is not next to %d, so it may have been newer; fell back to container %d (seq %d)", 1-u, o.out.Problem, o.seq, c.seq, u, c.seq)
	case o.sc.hdrOK:
		sel.Reason = fmt.Sprintf("container %d (seq %d) is the newest valid checkpoint; container %d (seq %d, older) is invalid: %s", u, c.seq, 1-u, o.seq, o.out.Problem)
	default:
		sel.Fallback = true
		sel.Reason = fmt.Sprintf("container %d is unreadable (%s) and may have held a newer checkpoint; fell back to container %d (seq %d)", 1-u, o.out.Problem, u, c.seq)
	}
}

// decideTwo: both containers are usable.
func decideTwo(dev blockdev.Device, lay Layout, cs *[2]cand, sel *Selection) {
	a, b := &cs[0], &cs[1]
	seqOrd := 0 // 1: container 0 is newer by seq, -1: container 1
	switch {
	case newer(a.seq, b.seq):
		seqOrd = 1
	case newer(b.seq, a.seq):
		seqOrd = -1
	}
	pick := func(ord int) int {
		if ord < 0 {
			return 1
		}
		return 0
	}
	sel.MixedFormats = a.st.format != b.st.format
	certain := a.trusted && b.trusted && seqOrd != 0
	// Alternating writes leave consecutive seqs, each in its own container.
	plausible := seqOrd != 0 && adjacent(a.seq, b.seq) && seqContainer(a.seq) == 0 && seqContainer(b.seq) == 1
	var why string
	if certain {
		sel.Container = pick(seqOrd)
		n, o := cs[sel.Container], cs[1-sel.Container]
		why = fmt.Sprintf("seq %d (container %d) is newer than seq %d (container %d); both seqs are checksummed (%s, %s)",
			n.seq, sel.Container, o.seq, 1-sel.Container, n.out.SeqSource, o.out.SeqSource)
		if !plausible {
			why += "; they are not consecutive"
		}
	} else {
		ev := compareContent(dev, lay, a.st, b.st)
		a.out.Stale, b.out.Stale = ev.stale[0], ev.stale[1]
		nsText := fmt.Sprintf("next_slot (%d in container 0, %d in container 1; it only grows)", a.st.nextSlot, b.st.nextSlot)
		stale := 0 // the container whose entries all match their slot headers while the other's do not
		switch {
		case ev.stale[0] == 0 && ev.stale[1] > 0:
			stale = 1
		case ev.stale[1] == 0 && ev.stale[0] > 0:
			stale = -1
		}
		staleText := fmt.Sprintf("the slot headers (%d stale entries in container 0, %d in container 1, of %d slots where the indexes differ)", ev.stale[0], ev.stale[1], ev.checked)
		seqText := fmt.Sprintf("the header seqs (%d in container 0, %d in container 1) are not checksummed", a.seq, b.seq)
		switch {
		case ev.same:
			sel.Container = pick(seqOrd)
			why = fmt.Sprintf("both containers hold the same index; using seq %d", cs[sel.Container].seq)
		case plausible && (ev.nextSlot == 0 || ev.nextSlot == seqOrd):
			// LMCache's own rule, checked against what can be checked. A slot reused after
			// the newest checkpoint can make its entries stale, so stale entries alone do
			// not overrule consecutive seqs.
			sel.Container = pick(seqOrd)
			why = fmt.Sprintf("seq %d (container %d) follows seq %d; %s, and %s does not contradict them", cs[sel.Container].seq, sel.Container, cs[1-sel.Container].seq, seqText, nsText)
		case plausible:
			sel.Doubt = true
			sel.Container = pick(ev.nextSlot)
			why = fmt.Sprintf("%s and say container %d is newer, but %s says container %d", seqText, pick(seqOrd), nsText, sel.Container)
		case ev.nextSlot != 0 && (stale == 0 || stale == ev.nextSlot):
			sel.Container = pick(ev.nextSlot)
			why = fmt.Sprintf("%s and are not consecutive alternating seqs (one is damaged); %s says container %d is newer", seqText, nsText, sel.Container)
		case ev.nextSlot != 0:
			sel.Doubt = true
			sel.Container = pick(ev.nextSlot)
			why = fmt.Sprintf("%s and are not consecutive; %s says container %d is newer, but %s say container %d", seqText, nsText, sel.Container, staleText, pick(stale))
		case stale != 0:
			sel.Container = pick(stale)
			why = fmt.Sprintf("%s and are not consecutive alternating seqs (one is damaged); next_slot is the same, and %s say container %d is newer", seqText, staleText, sel.Container)
		default:
			sel.Doubt = true
			sel.Container = pick(cmp.Or(cmp.Compare(a.st.count(), b.st.count()), seqOrd))
			why = fmt.Sprintf("%s and are not consecutive, and neither next_slot nor %s tell which index is newer; kept container %d, the one with more entries (%d)",
				seqText, staleText, sel.Container, cs[sel.Container].st.count())
		}
	}
	if sel.MixedFormats {
		why += fmt.Sprintf("; the containers hold different formats (%s in container 0, %s in container 1)", a.st.format, b.st.format)
		if !(a.trusted && b.trusted) {
			// One container was written by a program that does not seal its header: another
			// program (LMCache) wrote into this cache; which index is right is for a person.
			sel.Doubt = true
			why += ", one written by another program"
		}
	}
	sel.Fallback = sel.Doubt
	if sel.Doubt {
		why += "; in doubt"
	}
	sel.Reason = why
}

// countLost fills Lost with the keys of the rejected container the chosen one lacks.
func countLost(sel *Selection, chosen, rejected *ckptState) {
	if rejected == nil {
		return
	}
	chosen.fillKeys()
	rejected.fillKeys()
	have := make(map[string]struct{}, len(chosen.entries))
	// The same entry (slot and identity) is not lost when damage spells its key otherwise.
	type at struct {
		off int64
		id  uint64
	}
	same := make(map[at]struct{}, len(chosen.entries))
	for i := range chosen.entries {
		ce := &chosen.entries[i]
		have[ce.key] = struct{}{}
		if ce.hasID {
			same[at{ce.offset, ce.id}] = struct{}{}
		}
	}
	sel.LostKnown = true
	for i := range rejected.entries {
		re := &rejected.entries[i]
		k := re.key
		if _, ok := have[k]; ok {
			continue
		}
		if _, ok := same[at{re.offset, re.id}]; ok && re.hasID {
			continue
		}
		have[k] = struct{}{} // count a repeated key once
		sel.Lost++
		if len(sel.LostSample) < 8 {
			sel.LostSample = append(sel.LostSample, k)
		}
	}
}

// slotEnt is a checkpoint entry placed at its slot.
type slotEnt struct {
	slot int64
	e    *ckptEntry
}

// bySlot lists the entries of st that name a slot of lay (the first one per slot, as
// applyState keeps it), in slot order.
func bySlot(st *ckptState, lay Layout) []slotEnt {
	st.materialize()
	out := make([]slotEnt, 0, len(st.entries))
	for i := range st.entries {
		ce := &st.entries[i]
		if ce.offset < lay.DataBase || (ce.offset-lay.DataBase)%lay.SlotBytes != 0 {
			continue
		}
		if s := (ce.offset - lay.DataBase) / lay.SlotBytes; s < lay.MaxSlots {
			out = append(out, slotEnt{s, ce})
		}
	}
	slices.SortStableFunc(out, func(x, y slotEnt) int { return cmp.Compare(x.slot, y.slot) })
	return slices.CompactFunc(out, func(x, y slotEnt) bool { return x.slot == y.slot })
}

// maxEvidenceSlots bounds the slot headers one comparison reads.
const maxEvidenceSlots = 4096

type contentEvidence struct {
	same     bool
	nextSlot int    // 1: container 0's next_slot is higher (it is newer: next_slot only grows), -1: container 1's
	stale    [2]int // entries contradicted by their slot header, among the slots checked
	checked  int
}

// compareContent compares two checkpoints' indexes, reading the slot headers of (up to
// maxEvidenceSlots of) the slots where they differ.
func compareContent(dev blockdev.Device, lay Layout, a, b *ckptState) contentEvidence {
	a.fillKeys()
	b.fillKeys()
	ev := contentEvidence{nextSlot: cmp.Compare(a.nextSlot, b.nextSlot)}
	ea, eb := bySlot(a, lay), bySlot(b, lay)
	type diff struct {
		slot int64
		e    [2]*ckptEntry
	}
	var diffs []diff
	differs := len(a.entries) != len(b.entries)
	i, j := 0, 0
	for i < len(ea) || j < len(eb) {
		var d diff
		switch {
		case j >= len(eb) || (i < len(ea) && ea[i].slot < eb[j].slot):
			d = diff{ea[i].slot, [2]*ckptEntry{ea[i].e, nil}}
			i++
		case i >= len(ea) || eb[j].slot < ea[i].slot:
			d = diff{eb[j].slot, [2]*ckptEntry{nil, eb[j].e}}
			j++
		default:
			x, y := ea[i].e, eb[j].e
			d = diff{ea[i].slot, [2]*ckptEntry{x, y}}
			i, j = i+1, j+1
			if x.key == y.key && x.size == y.size {
				continue
			}
		}
		differs = true
		if len(diffs) < maxEvidenceSlots {
			diffs = append(diffs, d)
		}
	}
	ev.same = !differs && ev.nextSlot == 0
	if len(diffs) == 0 {
		return ev
	}
	slots := make([]int64, len(diffs))
	for k, d := range diffs {
		slots[k] = d.slot
	}
	hdrs := readSlotHeaders(dev, lay, slots)
	for k, d := range diffs {
		ev.checked++
		for side, ce := range d.e {
			if ce != nil && !headerMatches(hdrs[k], ce, "") {
				ev.stale[side]++
			}
		}
	}
	return ev
}

type headerRead struct {
	h   slotHeader
	err error
}

// readSlotHeaders reads the slot headers of slots (read-only).
func readSlotHeaders(dev blockdev.Device, lay Layout, slots []int64) []headerRead {
	out := make([]headerRead, len(slots))
	ba := int64(lay.BlockAlign)
	const batch = 32
	buf, err := blockdev.Alloc(int(ba) * batch)
	if err != nil {
		for k := range out {
			out[k].err = err
		}
		return out
	}
	defer blockdev.Free(buf)
	ops := make([]blockdev.Op, 0, batch)
	for lo := 0; lo < len(slots); lo += batch {
		hi := min(lo+batch, len(slots))
		ops = ops[:0]
		for k := lo; k < hi; k++ {
			ops = append(ops, blockdev.Op{Off: lay.DataBase + slots[k]*lay.SlotBytes, Buf: buf[int64(k-lo)*ba : int64(k-lo+1)*ba], Handle: placement.None})
		}
		_ = dev.Submit(ops)
		for k := lo; k < hi; k++ {
			op := &ops[k-lo]
			if op.Err != nil {
				out[k].err = op.Err
				continue
			}
			out[k].h, out[k].err = decodeSlotHeader(op.Buf[:min(int64(lay.HeaderBytes), ba)])
		}
	}
	return out
}

// headerMatches reports whether a slot header was written for entry ce: the identity (the
// checkpoint's own, or the key's under ns; "" accepts either namespace) and the length, and
// the payload checksum when both record one.
func headerMatches(r headerRead, ce *ckptEntry, ns Namespace) bool {
	if r.err != nil || r.h.Len != uint64(ce.size) {
		return false
	}
	if ce.hasCRC && r.h.HasCRC && ce.crc != r.h.CRC {
		return false
	}
	if ce.hasID {
		return r.h.Identity == ce.id
	}
	if ns != NamespaceLegacy && r.h.Identity == objectIdentity(ce.key) {
		return true
	}
	if ns != NamespaceObject {
		if k, err := ParseKey(ce.key, NamespaceLegacy); err == nil && k.id == r.h.Identity {
			return true
		}
	}
	return false
}

// namespaceSample bounds the slot headers read to infer a namespace.
const namespaceSample = 64

// inferNamespace tells a checkpoint's key namespace: its marker, else the slot headers of
// (a sample of) its entries — BLAKE2b of the key (object) or the chunk hash (legacy) — else
// the shape of its keys. source is "" when nothing tells.
func inferNamespace(dev blockdev.Device, lay Layout, st *ckptState) (Namespace, string) {
	switch {
	case st == nil:
		return NamespaceObject, ""
	case st.hasNS:
		return nsOf(st), "checkpoint"
	case st.count() == 0:
		return NamespaceObject, ""
	}
	st.fillKeys()
	ents := bySlot(st, lay)
	if len(ents) > namespaceSample {
		step := len(ents) / namespaceSample
		sample := make([]slotEnt, 0, namespaceSample)
		for k := 0; k < len(ents) && len(sample) < namespaceSample; k += step {
			sample = append(sample, ents[k])
		}
		ents = sample
	}
	slots := make([]int64, len(ents))
	for k := range ents {
		slots[k] = ents[k].slot
	}
	hdrs := readSlotHeaders(dev, lay, slots)
	var obj, leg int
	for k := range ents {
		if headerMatches(hdrs[k], ents[k].e, NamespaceObject) {
			obj++
		}
		if headerMatches(hdrs[k], ents[k].e, NamespaceLegacy) {
			leg++
		}
	}
	switch {
	case leg > obj:
		return NamespaceLegacy, "slot headers"
	case obj > leg:
		return NamespaceObject, "slot headers"
	case v1KeysAreLegacy(st):
		return NamespaceLegacy, "key shape"
	}
	for i := range st.entries {
		if _, ok := RawKey(st.entries[i].key).Parts(); !ok {
			return NamespaceObject, ""
		}
	}
	return NamespaceObject, "key shape"
}
