package engine

import (
	"encoding/binary"
	"fmt"
)

// rbctl's compact binary checkpoint (docs/format.md), its encoder and decoder. Part of the
// on-disk format.
//

// Version 2 added the checkpoint seq at 96..104, so that the container CRC covers it (the
// container header's seq is covered by no checksum). Version 1 payloads are still read.
const (
	compactMagic    = "RBCKPT01"
	compactVersion  = 2
	compactV1HdrLen = 96
	compactHdrLen   = 104
	compactSeqOff   = 96 // u64 LE checkpoint seq (version 2)
	ckFlagLegacy    = 1  // namespace legacy
	entHasCRC       = 1
	entHasMeta      = 2
	entFixedLen     = 4 + 4 + 4 + 1 + 2 + 8 // slot, size, crc, flags, handle, identity
)

func (e *Engine) encodeCompact(sn *snapshot) []byte {
	est := compactHdrLen + len(e.cfg.DevicePath) + len(sn.keys) + len(sn.ents)*entFixedLen + 64
	for _, p := range sn.prefixes {
		est += len(p) + 2
	}
	for _, p := range sn.salts {
		est += len(p) + 2
	}
	b := make([]byte, compactHdrLen, est)
	le := binary.LittleEndian
	copy(b[0:], compactMagic)
	le.PutUint32(b[8:], compactVersion)
	var flags uint32
	if e.cfg.Namespace == NamespaceLegacy {
		flags |= ckFlagLegacy
	}
	le.PutUint32(b[12:], flags)
	le.PutUint32(b[16:], uint32(e.cfg.BlockAlign))
	le.PutUint32(b[20:], uint32(e.cfg.HeaderBytes))
	le.PutUint64(b[24:], uint64(e.cfg.SlotBytes))
	le.PutUint64(b[32:], uint64(e.cfg.MetaTotalBytes))
	le.PutUint64(b[40:], uint64(e.layout.Capacity))
	copy(b[48:56], e.cfg.MetaMagic)
	le.PutUint32(b[56:], e.cfg.MetaVersion)
	le.PutUint64(b[64:], uint64(sn.nextSlot))
	le.PutUint64(b[72:], uint64(e.layout.MaxSlots))
	le.PutUint32(b[80:], uint32(len(sn.prefixes)))
	le.PutUint32(b[84:], uint32(len(sn.salts)))
	le.PutUint64(b[88:], uint64(len(sn.ents)))
	le.PutUint64(b[compactSeqOff:], sn.seq)
	b = binary.AppendUvarint(b, uint64(len(e.cfg.DevicePath)))
	b = append(b, e.cfg.DevicePath...)
	for _, p := range sn.prefixes {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	for _, p := range sn.salts {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	for i := range sn.ents {
		se := &sn.ents[i]
		var f uint8
		if se.flags&flHasCRC != 0 {
			f |= entHasCRC
		}
		if se.meta != nil {
			f |= entHasMeta
		}
		b = le.AppendUint32(b, uint32(se.slot))
		b = le.AppendUint32(b, se.size)
		b = le.AppendUint32(b, se.crc)
		b = append(b, f)
		b = le.AppendUint16(b, uint16(se.handle))
		b = le.AppendUint64(b, se.id)
		b = append(b, sn.keys[se.koff:se.koff+se.klen]...)
		if se.meta != nil {
			m := appendMetaJSON(nil, se.meta)
			b = binary.AppendUvarint(b, uint64(len(m)))
			b = append(b, m...)
		}
	}
	return b
}

func decodeCompact(b []byte) (*ckptState, error) {
	st, err := decodeCompactLazy(b)
	if err != nil {
		return nil, err
	}
	st.fillKeys()
	return st, nil
}

// decodeCompactLazy decodes and checks every field of a compact payload, as decodeCompact
// does, and fails exactly where it fails, but builds no entry: ckptState.materialize builds
// them (each key left as the offset of its compact record in b) and fillKeys spells the
// keys out. A million entries take some 60 MiB as ckptEntry values and more as key strings,
// and opening a cache needs them of the chosen container only.
func decodeCompactLazy(b []byte) (*ckptState, error) { return decodeCompactWalk(b, false) }

// decodeCompactWalk is decodeCompactLazy, building the entries too with keep.
func decodeCompactWalk(b []byte, keep bool) (*ckptState, error) {
	if len(b) < compactV1HdrLen {
		return nil, fmt.Errorf("%w: compact checkpoint of %d bytes", ErrTruncated, len(b))
	}
	if string(b[:8]) != compactMagic {
		return nil, fmt.Errorf("%w: compact checkpoint magic %q", ErrBadMagic, printable(b[:8]))
	}
	le := binary.LittleEndian
	hdrLen := compactHdrLen
	switch v := le.Uint32(b[8:]); v {
	case 1:
		hdrLen = compactV1HdrLen
	case compactVersion:
		if len(b) < compactHdrLen {
			return nil, fmt.Errorf("%w: compact v2 checkpoint of %d bytes", ErrTruncated, len(b))
		}
	default:
		return nil, fmt.Errorf("%w: compact checkpoint version %d (1 and 2 are supported)", ErrBadVersion, v)
	}
	st := &ckptState{format: CheckpointCompact, version: 1, hasNS: true}
	if hdrLen == compactHdrLen {
		st.seq, st.hasSeq = le.Uint64(b[compactSeqOff:]), true
	}
	flags := le.Uint32(b[12:])
	st.legacyNS = flags&ckFlagLegacy != 0
	st.blockAlign = int64(le.Uint32(b[16:]))
	st.headerBytes = int64(le.Uint32(b[20:]))
	st.slotBytes = int64(le.Uint64(b[24:]))
	st.metaTotal = int64(le.Uint64(b[32:]))
	st.capacity = int64(le.Uint64(b[40:]))
	st.metaMagic = string(b[48:56])
	st.metaVersion = int64(le.Uint32(b[56:]))
	st.nextSlot = int64(le.Uint64(b[64:]))
	st.dataBase = st.metaTotal
	np, ns := le.Uint32(b[80:]), le.Uint32(b[84:])
	ne := le.Uint64(b[88:])
	if st.nextSlot < 0 || st.slotBytes < 0 || st.metaTotal < 0 {
		return nil, fmt.Errorf("%w: negative field in compact checkpoint", ErrCorrupt)
	}
	p := b[hdrLen:]
	readStr := func() (string, error) {
		n, w := binary.Uvarint(p)
		if w <= 0 || n > uint64(len(p)-w) {
			return "", fmt.Errorf("%w: string in compact checkpoint", ErrTruncated)
		}
		s := string(p[w : w+int(n)])
		p = p[w+int(n):]
		return s, nil
	}
	var err error
	if st.devicePath, err = readStr(); err != nil {
		return nil, err
	}
	st.hasDevPath = st.devicePath != ""
	if uint64(np)+uint64(ns) > uint64(len(p)) || ne > uint64(len(p))/uint64(entFixedLen+2) {
		return nil, fmt.Errorf("%w: counts %d/%d/%d exceed the %d-byte payload", ErrCorrupt, np, ns, ne, len(b))
	}
	pre := make([]string, np)
	for i := range pre {
		if pre[i], err = readStr(); err != nil {
			return nil, err
		}
	}
	salts := make([]string, ns)
	for i := range salts {
		if salts[i], err = readStr(); err != nil {
			return nil, err
		}
	}
	if keep {
		st.entries = make([]ckptEntry, 0, ne)
	}
	cur := entryCursor{b: b, off: len(b) - len(p), dataBase: st.dataBase, slotBytes: st.slotBytes, npre: len(pre), nsalt: len(salts)}
	st.entOff = cur.off
	for i := uint64(0); i < ne; i++ {
		ce, err := cur.next(i, ne)
		if err != nil {
			return nil, err
		}
		if keep {
			st.entries = append(st.entries, ce)
		}
	}
	p = b[cur.off:]
	if len(p) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes after %d entries", ErrCorrupt, len(p), ne)
	}
	st.n, st.payload, st.pre, st.salts = int(ne), b, pre, salts
	st.unbuilt, st.lazy = !keep, true
	return st, nil
}

// entryCursor reads the entries of a compact payload b one after another, from off.
type entryCursor struct {
	b                   []byte
	off                 int
	dataBase, slotBytes int64
	npre, nsalt         int // dictionary sizes
}

// next decodes entry i of ne at c.off and moves past it; its key is left as the offset of
// its compact record (ckptEntry.recOff).
func (c *entryCursor) next(i, ne uint64) (ckptEntry, error) {
	le := binary.LittleEndian
	p := c.b[c.off:]
	if len(p) < entFixedLen+2 {
		return ckptEntry{}, fmt.Errorf("%w: entry %d of %d", ErrTruncated, i, ne)
	}
	slot := int64(le.Uint32(p))
	ce := ckptEntry{size: int64(le.Uint32(p[4:])), crc: le.Uint32(p[8:]), handle: int16(le.Uint16(p[13:])), id: le.Uint64(p[15:]), hasID: true}
	f := p[12]
	ce.hasCRC = f&entHasCRC != 0
	ce.offset = c.dataBase + slot*c.slotBytes
	p = p[entFixedLen:]
	n := keyRecordLen(p)
	if n < 0 {
		return ckptEntry{}, fmt.Errorf("%w: key of entry %d", ErrCorrupt, i)
	}
	if !keyRefsOK(p[:n], c.npre, c.nsalt) {
		return ckptEntry{}, fmt.Errorf("%w: key of entry %d references a missing dictionary string", ErrCorrupt, i)
	}
	ce.recOff = len(c.b) - len(p)
	p = p[n:]
	if f&entHasMeta != 0 {
		m, w := binary.Uvarint(p)
		if w <= 0 || m > uint64(len(p)-w) {
			return ckptEntry{}, fmt.Errorf("%w: string in compact checkpoint", ErrTruncated)
		}
		v, err := parseJSON(p[w : w+int(m)])
		if err != nil {
			return ckptEntry{}, fmt.Errorf("%w: metadata of entry %d: %v", ErrCorrupt, i, err)
		}
		ce.meta = metaFromJSON(v)
		p = p[w+int(m):]
	}
	c.off = len(c.b) - len(p)
	return ce, nil
}

// keyRefsOK reports whether the compact record b (keyRecordLen(b) == len(b)) references
// only dictionary strings that exist: decodeKey succeeds exactly when it does.
func keyRefsOK(b []byte, npre, nsalt int) bool {
	if b[0] == 0 {
		return true
	}
	pid, w := binary.Uvarint(b[1:])
	if pid >= uint64(npre) {
		return false
	}
	i := 1 + w
	i += 1 + int(b[i])
	sid, _ := binary.Uvarint(b[i:])
	return sid <= uint64(nsalt)
}
