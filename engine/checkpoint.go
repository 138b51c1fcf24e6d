package engine

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rbctl/rbctl/blockdev"
)

// Checkpoints. The snapshot is taken in chunks of snapChunk slots, each under the index
// lock; mutations made meanwhile record their slot in e.touched, and a final short lock
// re-copies those slots, so the snapshot is exactly the index at that final moment while
// no single lock hold is longer than one chunk (or the touched set). Encoding and I/O run
// without the lock. The write order is payload, flush, header, flush.

const snapChunk = 1024

type snapEnt struct {
	slot   int32
	size   uint32
	crc    uint32
	stamp  uint32
	id     uint64
	handle int16
	flags  uint8
	koff   uint32
	klen   uint32
	meta   *ObjMeta
}

type snapshot struct {
	ents     []snapEnt
	keys     []byte
	prefixes []string
	salts    []string
	nextSlot int64
	dirty    uint64
	seq      uint64 // the checkpoint's sequence number (compact v2 records it in the payload)
}

func (e *Engine) copyEnt(sn *snapshot, s int32) {
	r := &e.slots[s]
	rec := e.keys.record(r.key)
	se := snapEnt{slot: s, size: r.size, crc: r.crc, stamp: r.stamp, id: r.id, handle: r.handle, flags: r.flags & (flHasCRC | flHasMeta), koff: uint32(len(sn.keys)), klen: uint32(len(rec))}
	if r.flags&flHasMeta != 0 {
		se.meta = e.metas[s]
	}
	sn.keys = append(sn.keys, rec...)
	sn.ents = append(sn.ents, se)
}

// holdStart marks the start of an index-lock hold: wall clock and this thread's CPU clock.
type holdStart struct {
	wall time.Time
	cpu  int64
}

func threadCPU() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return ts.Nano()
}

func startHold() holdStart { return holdStart{time.Now(), threadCPU()} }

// noteHold records the longest lock hold of a checkpoint: wall time (includes the thread
// being descheduled by an oversubscribed OS) and on-CPU time of the holding thread.
func (e *Engine) noteHold(h holdStart) {
	maxInto(&e.st.maxHold, int64(time.Since(h.wall)))
	if h.cpu != 0 {
		maxInto(&e.st.maxHoldCPU, threadCPU()-h.cpu)
	}
}

func maxInto(a *atomic.Int64, d int64) {
	for {
		old := a.Load()
		if d <= old || a.CompareAndSwap(old, d) {
			return
		}
	}
}

func (e *Engine) takeSnapshot() *snapshot {
	sn := &snapshot{}
	e.mu.Lock()
	t0 := startHold()
	e.snapOn = true
	e.touched = e.touched[:0]
	n := e.nextSlot
	live := e.live
	kb := e.keys.used
	e.noteHold(t0)
	e.mu.Unlock()
	sn.ents = make([]snapEnt, 0, live+live/8+16)
	sn.keys = make([]byte, 0, kb+kb/8+64)
	// Fault the pages in now, outside the lock, so copies under the lock never page-fault.
	clear(sn.ents[:cap(sn.ents)])
	clear(sn.keys[:cap(sn.keys)])
	for lo := int64(0); lo < n; lo += snapChunk {
		e.mu.Lock()
		t0 := startHold()
		hi := min(lo+snapChunk, n)
		for s := int32(lo); int64(s) < hi; s++ {
			if e.slots[s].state == stLive {
				e.copyEnt(sn, s)
			}
		}
		e.noteHold(t0)
		e.mu.Unlock()
	}
	// Slots mutated during the scan are re-copied in rounds, each round in chunks, until
	// few enough remain to copy in one short final hold; the final hold is the snapshot's
	// point in time. A slot mutated again after its copy is flagged again and re-copied.
	redo := &snapshot{}       // own key buffer: growing sn.keys under the lock could copy tens of MiB
	latest := map[int32]int{} // slot → index in redo.ents (-1: not live)
	recopy := func(list []int32) {
		for _, s := range list {
			e.slots[s].flags &^= flTouched
			if e.slots[s].state == stLive {
				latest[s] = len(redo.ents)
				e.copyEnt(redo, s)
			} else {
				latest[s] = -1
			}
		}
	}
	for round := 0; ; round++ {
		e.mu.Lock()
		t0 := startHold()
		list := e.touched
		e.touched = nil
		if len(list) <= snapChunk || round >= 8 {
			recopy(list)
			sn.prefixes = e.prefixes.strs[:len(e.prefixes.strs):len(e.prefixes.strs)]
			sn.salts = e.salts.strs[:len(e.salts.strs):len(e.salts.strs)]
			sn.nextSlot = e.nextSlot
			sn.dirty = e.dirty
			e.snapOn = false
			e.noteHold(t0)
			e.mu.Unlock()
			break
		}
		e.noteHold(t0)
		e.mu.Unlock()
		for len(list) > 0 {
			k := min(len(list), snapChunk)
			e.mu.Lock()
			t0 := startHold()
			recopy(list[:k])
			e.noteHold(t0)
			e.mu.Unlock()
			list = list[k:]
		}
	}
	base := uint32(len(sn.keys))
	sn.keys = append(sn.keys, redo.keys...)
	for i := range redo.ents {
		redo.ents[i].koff += base
	}
	if len(latest) > 0 {
		out := sn.ents[:0]
		for _, se := range sn.ents {
			if _, redone := latest[se.slot]; !redone {
				out = append(out, se)
			}
		}
		for _, i := range latest {
			if i >= 0 {
				out = append(out, redo.ents[i])
			}
		}
		sn.ents = out
	}
	slices.SortFunc(sn.ents, func(a, b snapEnt) int { return cmp.Compare(a.stamp, b.stamp) })
	return sn
}

// checkpoint writes a checkpoint if the index changed since the last one.
func (e *Engine) checkpoint(force, final bool) error {
	_ = final
	return e.writeCheckpoint(false, false)
}

// writeCheckpoint writes a checkpoint when the index changed since the last one, or
// regardless with always (a repair that replaces a damaged container).
func (e *Engine) writeCheckpoint(forced, always bool) error {
	if e.cfg.ReadOnly {
		return ErrReadOnly
	}
	e.ckptMu.Lock()
	defer e.ckptMu.Unlock()
	e.mu.Lock()
	clean := e.dirty == e.persisted
	e.mu.Unlock()
	if clean && !always {
		return nil
	}
	start := time.Now()
	err := e.writeCheckpointLocked(forced, start)
	if err != nil {
		e.st.ckptErrs.Add(1)
		e.st.lastCkptErr.Store(err.Error())
		return err
	}
	e.st.lastCkptErr.Store("")
	e.st.lastCkptDur.Store(int64(time.Since(start)))
	return nil
}

func (e *Engine) writeCheckpointLocked(forced bool, start time.Time) error {
	sn := e.takeSnapshot()
	sn.seq = e.seq + 1
	var payload []byte
	var err error
	if e.cfg.CheckpointFormat == CheckpointLMCacheV1 {
		payload, err = e.encodeV1(sn)
	} else {
		payload = e.encodeCompact(sn)
	}
	if err != nil {
		return err
	}
	if int64(len(payload)) > e.layout.PayloadCap {
		return fmt.Errorf("%w: %d entries need %d bytes, the container holds %d (meta_total_bytes %d); reformat with a larger meta_total_bytes or use the compact format",
			ErrCheckpointTooBig, len(sn.ents), len(payload), e.layout.PayloadCap, e.layout.MetaTotalBytes)
	}
	seq := sn.seq
	off := e.layout.ContainerOffset[(seq-1)%2]
	// Header block and payload share one staging buffer: an arena buffer (registered, fixed
	// I/O) when both fit one slot, else a fresh allocation.
	plen := roundUp(int64(len(payload)), e.lbs)
	buf, release, err := e.scratch(int(e.lbs + plen))
	if err != nil {
		return err
	}
	defer release()
	hbuf, pbuf := buf[:e.lbs], buf[e.lbs:]
	clear(hbuf)
	clear(pbuf[copy(pbuf, payload):])
	var h containerHeader
	copy(h.Magic[:], e.cfg.MetaMagic)
	h.Version, h.Seq, h.Len, h.CRC = e.cfg.MetaVersion, seq, uint64(len(payload)), crc32.ChecksumIEEE(payload)
	encodeContainerHeader(hbuf, h)
	sealContainerHeader(hbuf)
	handle := e.cfg.MetadataHandle
	if handle == blockdev.NoPlacement && e.cfg.Placer != nil {
		handle = e.cfg.Placer.Place(WriteInfo{Size: len(payload), Metadata: true})
	}
	if err := blockdev.WriteAt(e.dev, pbuf, off+e.lbs, handle); err != nil {
		return fmt.Errorf("checkpoint seq %d: writing payload: %w", seq, err)
	}
	if err := e.dev.Flush(); err != nil {
		return fmt.Errorf("checkpoint seq %d: flush before header: %w", seq, err)
	}
	if err := blockdev.WriteAt(e.dev, hbuf, off, handle); err != nil {
		return fmt.Errorf("checkpoint seq %d: writing header: %w", seq, err)
	}
	if err := e.dev.Flush(); err != nil {
		return fmt.Errorf("checkpoint seq %d: flush after header: %w", seq, err)
	}
	e.seq = seq
	e.seqPub.Store(seq)
	e.mu.Lock()
	e.persisted = sn.dirty
	if e.dirty != e.persisted {
		e.firstDirt = start
	}
	e.mu.Unlock()
	e.st.ckpts.Add(1)
	if forced {
		e.st.ckptForced.Add(1)
	}
	e.st.ckptBytes.Store(int64(len(payload)))
	e.st.ckptEntries.Store(int64(len(sn.ents)))
	return nil
}

func (e *Engine) checkpointLoop() {
	defer e.bg.Done()
	t := time.NewTicker(e.cfg.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
		case <-e.kick:
		}
		e.mu.Lock()
		n := e.dirty - e.persisted
		first := e.firstDirt
		e.mu.Unlock()
		if n == 0 {
			continue
		}
		now := e.now()
		idle := e.ioInflight.Load() == 0 && now.Sub(time.Unix(0, e.lastIO.Load())) >= e.cfg.IdleQuiet
		forced := (e.cfg.ForceAfterOps > 0 && n >= uint64(e.cfg.ForceAfterOps)) ||
			(e.cfg.ForceAfter > 0 && now.Sub(first) >= e.cfg.ForceAfter)
		if idle || forced {
			_ = e.writeCheckpoint(forced && !idle, false)
		}
	}
}

// ---- container seal (docs/format.md). Part of the on-disk format: do not change. ----

// LMCache's container header is bytes 0..32 of the header block; the rest of its block is
// zero and LMCache reads none of it. Its seq is covered by no checksum, so one flipped bit
// can make an older checkpoint look newer. rbctl's seal after it repeats the seq and
// checksums the whole header: the seq is verified, and a single damaged copy is repaired.
// A container LMCache writes has no seal (its zeroed block clears ours).
const (
	sealTagOff = 32 // [4]byte "RBS1"
	sealSeqOff = 36 // u64 LE copy of the header's seq
	sealCRCOff = 44 // u32 LE CRC-32C (Castagnoli) of bytes 0..44
	sealEnd    = 48
	sealTag    = "RBS1"
)

// sealState says what a container's seal vouches for.
type sealState uint8

const (
	sealNone     sealState = iota // no seal: an LMCache (or pre-seal rbctl) container
	sealIntact                    // the seal's checksum matches: the seq is verified
	sealRepaired                  // one copy of the seq (or the seal's checksum) was damaged; the other is proven
	sealBroken                    // damaged beyond telling which seq is right
)

func (s sealState) String() string {
	return [...]string{"none", "intact", "repaired", "broken"}[s]
}

// sealContainerHeader adds the seal to a header block whose first 32 bytes are encoded.
func sealContainerHeader(b []byte) {
	copy(b[sealTagOff:], sealTag)
	copy(b[sealSeqOff:sealSeqOff+8], b[contSeqOff:contSeqOff+8])
	binary.LittleEndian.PutUint32(b[sealCRCOff:], crc32.Checksum(b[:sealCRCOff], castagnoli))
}

// checkSeal returns the seq the seal proves and how. A single damaged byte range is
// repaired: two agreeing copies are trusted; when they disagree, the copy that makes the
// checksum match is the right one.
func checkSeal(b []byte) (uint64, sealState) {
	if len(b) < sealEnd || string(b[sealTagOff:sealTagOff+4]) != sealTag {
		return 0, sealNone
	}
	le := binary.LittleEndian
	hs, cs, want := le.Uint64(b[contSeqOff:]), le.Uint64(b[sealSeqOff:]), le.Uint32(b[sealCRCOff:])
	sum := func(seq, seqCopy uint64) uint32 {
		var h [sealCRCOff]byte
		copy(h[:], b[:sealCRCOff])
		le.PutUint64(h[contSeqOff:], seq)
		le.PutUint64(h[sealSeqOff:], seqCopy)
		return crc32.Checksum(h[:], castagnoli)
	}
	switch {
	case sum(hs, cs) == want && hs == cs:
		return hs, sealIntact
	case hs == cs:
		return hs, sealRepaired // the damage is outside both copies of the seq
	case sum(cs, cs) == want:
		return cs, sealRepaired // the header's seq was damaged
	case sum(hs, hs) == want:
		return hs, sealRepaired // the seal's copy was damaged
	}
	return hs, sealBroken
}

// ---- compact binary checkpoint (docs/format.md). Part of the on-disk format. ----

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

// ckptState is a decoded checkpoint of either format.
type ckptState struct {
	format      CheckpointFormat
	version     int64
	devicePath  string
	hasDevPath  bool
	capacity    int64
	blockAlign  int64
	headerBytes int64
	slotBytes   int64
	metaTotal   int64
	metaMagic   string
	metaVersion int64
	dataBase    int64
	nextSlot    int64
	legacyNS    bool
	hasNS       bool
	seq         uint64 // compact v2: the seq the writer gave this checkpoint (CRC-covered)
	hasSeq      bool
	entries     []ckptEntry
}

type ckptEntry struct {
	key    string
	id     uint64
	hasID  bool
	offset int64
	size   int64
	crc    uint32
	hasCRC bool
	handle int16
	meta   *ObjMeta
}

func decodeCompact(b []byte) (*ckptState, error) {
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
	st.entries = make([]ckptEntry, 0, ne)
	for i := uint64(0); i < ne; i++ {
		if len(p) < entFixedLen+2 {
			return nil, fmt.Errorf("%w: entry %d of %d", ErrTruncated, i, ne)
		}
		slot := int64(le.Uint32(p))
		ce := ckptEntry{size: int64(le.Uint32(p[4:])), crc: le.Uint32(p[8:]), handle: int16(le.Uint16(p[13:])), id: le.Uint64(p[15:]), hasID: true}
		f := p[12]
		ce.hasCRC = f&entHasCRC != 0
		ce.offset = st.dataBase + slot*st.slotBytes
		p = p[entFixedLen:]
		n := keyRecordLen(p)
		if n < 0 {
			return nil, fmt.Errorf("%w: key of entry %d", ErrCorrupt, i)
		}
		k, ok := decodeKey(p[:n], pre, salts)
		if !ok {
			return nil, fmt.Errorf("%w: key of entry %d references a missing dictionary string", ErrCorrupt, i)
		}
		ce.key = k
		p = p[n:]
		if f&entHasMeta != 0 {
			ms, err := readStr()
			if err != nil {
				return nil, err
			}
			v, err := parseJSON([]byte(ms))
			if err != nil {
				return nil, fmt.Errorf("%w: metadata of entry %d: %v", ErrCorrupt, i, err)
			}
			ce.meta = metaFromJSON(v)
		}
		st.entries = append(st.entries, ce)
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes after %d entries", ErrCorrupt, len(p), ne)
	}
	return st, nil
}

// ---- LMCache v1 JSON ----

// encodeV1 writes json.dumps(state, separators=(",",":"), ensure_ascii=True) for LMCache's
// state dict, keys in LMCache's order, entries in insertion order.
func (e *Engine) encodeV1(sn *snapshot) ([]byte, error) {
	b := make([]byte, 0, 256+len(sn.ents)*160)
	b = append(b, `{"version":1,"device_path":`...)
	b = appendJSONString(b, e.cfg.DevicePath)
	b = append(b, `,"capacity_bytes":`...)
	b = strconv.AppendInt(b, e.layout.Capacity, 10)
	b = append(b, `,"block_align":`...)
	b = strconv.AppendInt(b, int64(e.cfg.BlockAlign), 10)
	b = append(b, `,"header_bytes":`...)
	b = strconv.AppendInt(b, int64(e.cfg.HeaderBytes), 10)
	b = append(b, `,"slot_bytes":`...)
	b = strconv.AppendInt(b, e.cfg.SlotBytes, 10)
	b = append(b, `,"meta_total_bytes":`...)
	b = strconv.AppendInt(b, e.cfg.MetaTotalBytes, 10)
	b = append(b, `,"meta_magic":`...)
	b = appendJSONString(b, e.cfg.MetaMagic)
	b = append(b, `,"meta_version":`...)
	b = strconv.AppendInt(b, int64(e.cfg.MetaVersion), 10)
	b = append(b, `,"data_base_offset":`...)
	b = strconv.AppendInt(b, e.layout.DataBase, 10)
	b = append(b, `,"next_slot":`...)
	b = strconv.AppendInt(b, sn.nextSlot, 10)
	b = append(b, `,"entries":{`...)
	for i := range sn.ents {
		se := &sn.ents[i]
		k, ok := decodeKey(sn.keys[se.koff:se.koff+se.klen], sn.prefixes, sn.salts)
		if !ok {
			return nil, fmt.Errorf("%w: index key of slot %d does not decode", ErrCorrupt, se.slot)
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, `:{"offset":`...)
		b = strconv.AppendInt(b, e.layout.DataBase+int64(se.slot)*e.cfg.SlotBytes, 10)
		b = append(b, `,"size":`...)
		b = strconv.AppendInt(b, int64(se.size), 10)
		b = append(b, ',')
		b = appendMetaFields(b, se.meta)
		b = append(b, '}')
	}
	b = append(b, '}')
	if e.cfg.Namespace == NamespaceLegacy || len(sn.ents) == 0 {
		// LMCache's v1 state has no namespace, and an empty cache cannot be told legacy or
		// object by its keys. LMCache ignores unknown fields (its later v2 state uses this
		// name and these values), so object-namespace output with keys stays byte-exact.
		b = append(b, `,"key_namespace":`...)
		b = appendJSONString(b, string(e.cfg.Namespace))
	}
	b = append(b, '}')
	return b, nil
}

func appendMetaFields(b []byte, m *ObjMeta) []byte {
	if m == nil {
		return append(b, `"shape":null,"dtype":null,"fmt":null,"cached_positions":null`...)
	}
	b = append(b, `"shape":`...)
	b = appendIntList(b, m.Shape)
	b = append(b, `,"dtype":`...)
	b = appendOptString(b, m.Dtype)
	b = append(b, `,"fmt":`...)
	b = appendOptString(b, m.Fmt)
	b = append(b, `,"cached_positions":`...)
	return appendIntList(b, m.CachedPositions)
}

func appendMetaJSON(b []byte, m *ObjMeta) []byte {
	b = append(b, '{')
	b = appendMetaFields(b, m)
	return append(b, '}')
}

func appendIntList(b []byte, l []int) []byte {
	if l == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, v := range l {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(v), 10)
	}
	return append(b, ']')
}

func appendOptString(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendJSONString(b, s)
}

// appendJSONString encodes s as Python's json.dumps(ensure_ascii=True) does.
func appendJSONString(b []byte, s string) []byte {
	const hexl = "0123456789abcdef"
	u := func(b []byte, r rune) []byte {
		return append(b, '\\', 'u', hexl[r>>12&15], hexl[r>>8&15], hexl[r>>4&15], hexl[r&15])
	}
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"':
			b = append(b, '\\', '"')
		case r == '\\':
			b = append(b, '\\', '\\')
		case r == '\n':
			b = append(b, '\\', 'n')
		case r == '\r':
			b = append(b, '\\', 'r')
		case r == '\t':
			b = append(b, '\\', 't')
		case r == '\b':
			b = append(b, '\\', 'b')
		case r == '\f':
			b = append(b, '\\', 'f')
		case r >= 0x20 && r < 0x7f:
			b = append(b, byte(r))
		case r > 0xffff:
			r -= 0x10000
			b = u(b, 0xd800|(r>>10)&0x3ff)
			b = u(b, 0xdc00|r&0x3ff)
		default:
			b = u(b, r)
		}
	}
	return append(b, '"')
}

func decodeV1(b []byte) (*ckptState, error) {
	v, err := parseJSON(b)
	if err != nil {
		return nil, fmt.Errorf("%w: v1 JSON checkpoint: %v", ErrCorrupt, err)
	}
	obj, ok := v.(*jsonObject)
	if !ok {
		return nil, fmt.Errorf("%w: v1 checkpoint is not a JSON object", ErrCorrupt)
	}
	st := &ckptState{format: CheckpointLMCacheV1}
	getInt := func(name string, dst *int64, required bool) error {
		x, ok := obj.get(name)
		if !ok || x == nil {
			if required {
				return fmt.Errorf("%w: v1 checkpoint has no %q", ErrCorrupt, name)
			}
			return nil
		}
		n, ok := x.(jsonNumber)
		if !ok || !n.isInt {
			return fmt.Errorf("%w: v1 checkpoint field %q is not an integer", ErrCorrupt, name)
		}
		*dst = n.i
		return nil
	}
	if err := getInt("version", &st.version, true); err != nil {
		return nil, err
	}
	if st.version != 1 {
		return nil, fmt.Errorf("%w: checkpoint state version %d (only 1 is supported)", ErrBadVersion, st.version)
	}
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"capacity_bytes", &st.capacity}, {"block_align", &st.blockAlign}, {"header_bytes", &st.headerBytes},
		{"slot_bytes", &st.slotBytes}, {"meta_total_bytes", &st.metaTotal}, {"meta_version", &st.metaVersion},
		{"data_base_offset", &st.dataBase}, {"next_slot", &st.nextSlot}} {
		if err := getInt(f.name, f.dst, f.name != "capacity_bytes" && f.name != "data_base_offset"); err != nil {
			return nil, err
		}
	}
	if x, ok := obj.get("device_path"); ok {
		if s, ok := x.(string); ok {
			st.devicePath, st.hasDevPath = s, true
		}
	}
	if x, ok := obj.get("meta_magic"); ok {
		s, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("%w: meta_magic is not a string", ErrCorrupt)
		}
		st.metaMagic = s
	} else {
		return nil, fmt.Errorf("%w: v1 checkpoint has no \"meta_magic\"", ErrCorrupt)
	}
	if st.dataBase == 0 {
		st.dataBase = st.metaTotal
	}
	if x, ok := obj.get("key_namespace"); ok {
		if s, ok := x.(string); ok && (s == string(NamespaceLegacy) || s == string(NamespaceObject)) {
			st.hasNS, st.legacyNS = true, s == string(NamespaceLegacy)
		}
	}
	x, ok := obj.get("entries")
	if !ok {
		return nil, fmt.Errorf("%w: v1 checkpoint has no \"entries\"", ErrCorrupt)
	}
	ents, ok := x.(*jsonObject)
	if !ok {
		return nil, fmt.Errorf("%w: entries is not an object", ErrCorrupt)
	}
	st.entries = make([]ckptEntry, 0, len(ents.keys))
	for i, k := range ents.keys {
		eo, ok := ents.vals[i].(*jsonObject)
		if !ok {
			st.entries = append(st.entries, ckptEntry{key: k, offset: -1})
			continue
		}
		ce := ckptEntry{key: k, offset: -1, size: -1}
		if n, ok := eo.getNum("offset"); ok {
			ce.offset = n
		}
		if n, ok := eo.getNum("size"); ok {
			ce.size = n
		}
		ce.meta = metaFromJSON(eo)
		st.entries = append(st.entries, ce)
	}
	return st, nil
}

func metaFromJSON(v any) *ObjMeta {
	o, ok := v.(*jsonObject)
	if !ok {
		return nil
	}
	m := &ObjMeta{}
	any := false
	if l, ok := o.getIntList("shape"); ok {
		m.Shape, any = l, true
	}
	if l, ok := o.getIntList("cached_positions"); ok {
		m.CachedPositions, any = l, true
	}
	if x, ok := o.get("dtype"); ok {
		if s, ok := x.(string); ok {
			m.Dtype, any = s, true
		}
	}
	if x, ok := o.get("fmt"); ok {
		if s, ok := x.(string); ok {
			m.Fmt, any = s, true
		}
	}
	if !any {
		return nil
	}
	return m
}

func decodeCheckpoint(b []byte) (*ckptState, error) {
	if len(b) >= 8 && string(b[:8]) == compactMagic {
		return decodeCompact(b)
	}
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	if i < len(b) && b[i] == '{' {
		return decodeV1(b)
	}
	return nil, fmt.Errorf("%w: checkpoint payload is neither compact (%q) nor v1 JSON", ErrCorrupt, compactMagic)
}
