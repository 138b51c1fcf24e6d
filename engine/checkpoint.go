package engine

import (
	"cmp"
	"fmt"
	"hash/crc32"
	"slices"
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
	n := e.alloc.nextSlot
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
			// Copies: the interners reuse released ids in place (keycodec.go).
			sn.prefixes = slices.Clone(e.prefixes.strs)
			sn.salts = slices.Clone(e.salts.strs)
			sn.nextSlot = e.alloc.nextSlot
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
	e.drainDeallocs()
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
	if fn := e.ckptNotify.Load(); fn != nil {
		(*fn)(err)
	}
	if err != nil {
		e.st.ckptErrs.Add(1)
		e.st.lastCkptErr.Store(err.Error())
		return err
	}
	e.st.lastCkptErr.Store("")
	e.st.lastCkptDur.Store(int64(time.Since(start)))
	return nil
}

// NotifyCheckpoint has fn called after every checkpoint attempt that wrote or failed (err
// nil when it was written), from the goroutine that made it, with no engine lock held: a
// node logs each failure at once and each retry (fn nil removes it).
func (e *Engine) NotifyCheckpoint(fn func(err error)) {
	if fn == nil {
		e.ckptNotify.Store(nil)
		return
	}
	e.ckptNotify.Store(&fn)
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
		return fieldErr(ErrCheckpointTooBig, []string{"meta_total_bytes"}, "%d entries need %d bytes, the container holds %d (meta_total_bytes %d); reformat with a larger meta_total_bytes or use the compact format",
			len(sn.ents), len(payload), e.layout.PayloadCap, e.layout.MetaTotalBytes)
	}
	seq := sn.seq
	off := e.layout.ContainerOffsetFor(seq)
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
	handle, err := e.placeMetadata(len(payload))
	if err != nil {
		return fmt.Errorf("checkpoint seq %d: %w", seq, err)
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
