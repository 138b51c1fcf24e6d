package engine

import (
	"fmt"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/placement"
)

// LoadManyInto: reads straight into the caller's buffers when they are aligned, through a
// pool buffer otherwise, and checks each payload's CRC.

type loadJob struct {
	idx    int
	slot   int32
	size   int
	crc    uint32
	hasCRC bool
	id     uint64
	buf    []byte // bounce buffer (nil: reading straight into the caller's buffer)
	hdr    bool   // buf holds header + payload
}

func (e *Engine) loadManyInto(keys []Key, bufs [][]byte) ([]bool, error) {
	out := make([]bool, len(keys))
	if len(bufs) != len(keys) {
		return out, fmt.Errorf("%w: LoadManyInto got %d keys and %d buffers", ErrConfig, len(keys), len(bufs))
	}
	if err := e.usable(); err != nil {
		return out, err
	}
	jobs := make([]loadJob, 0, len(keys))
	e.mu.Lock()
	for i, k := range keys {
		s := e.find(k)
		if s < 0 || e.slots[s].state != stLive {
			continue
		}
		r := &e.slots[s]
		if int(r.size) > len(bufs[i]) {
			continue
		}
		jobs = append(jobs, loadJob{idx: i, slot: s, size: int(r.size), crc: r.crc, hasCRC: r.flags&flHasCRC != 0, id: r.id})
	}
	e.mu.Unlock()
	e.st.loadMisses.Add(int64(len(keys) - len(jobs)))
	// The batch goes to the device in chunks of at most maxBatch reads. Overlapping the
	// checksums with reads (the next chunk's, or a chunk split into concurrent sub-batches
	// verified as each completes) was tried twice and measured no faster here: the callers'
	// concurrency already keeps the queue full (docs/io_uring.md "make bench-io").
	firstErr := e.runLoads(jobs, bufs, out)
	e.observe(keys, out, placement.Load)
	return out, firstErr
}

// runLoads reads jobs into bufs in device submissions of at most maxBatch reads, marks the
// good ones in out and returns the first error.
func (e *Engine) runLoads(jobs []loadJob, bufs [][]byte, out []bool) error {
	var firstErr error
	for len(jobs) > 0 {
		n := min(len(jobs), e.maxBatch())
		lc := e.prepareLoad(jobs[:n], bufs)
		jobs = jobs[n:]
		e.submitLoad(lc)
		if err := e.finishLoad(lc, bufs, out); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// loadChunk is one device submission of a load batch.
type loadChunk struct {
	batch   []loadJob
	ops     []blockdev.Op
	prepErr error // a staging buffer could not be had: nothing was submitted
	err     error // Submit's error
}

// prepareLoad builds the read ops of batch: straight into the caller's buffer when it is
// aligned (or the device is buffered), through a staging buffer otherwise.
func (e *Engine) prepareLoad(batch []loadJob, bufs [][]byte) *loadChunk {
	lc := &loadChunk{batch: batch, ops: make([]blockdev.Op, len(batch))}
	hb := int64(e.cfg.HeaderBytes)
	for j := range batch {
		lj := &batch[j]
		off := e.slotOff(lj.slot)
		if !lj.hasCRC {
			// Unknown checksum (v1 checkpoint without verify): read the header too and
			// check identity, length and the header's checksum when it has one.
			b, err := e.pool.get()
			if err != nil {
				lc.prepErr = err
				return lc
			}
			lj.buf, lj.hdr = b[:roundUp(hb+int64(lj.size), e.lbs)], true
			lc.ops[j] = blockdev.Op{Off: off, Buf: lj.buf, Handle: placement.None}
			continue
		}
		dst := bufs[lj.idx]
		want := roundUp(int64(lj.size), e.lbs)
		if !e.direct && len(dst) >= lj.size {
			lc.ops[j] = blockdev.Op{Off: off + hb, Buf: dst[:lj.size], Handle: placement.None}
			continue
		}
		if e.direct && int64(len(dst)) >= want && blockdev.Aligned(dst, int(e.lbs)) {
			lc.ops[j] = blockdev.Op{Off: off + hb, Buf: dst[:want], Handle: placement.None}
			continue
		}
		b, err := e.pool.get()
		if err != nil {
			lc.prepErr = err
			return lc
		}
		lj.buf = b[:want]
		lc.ops[j] = blockdev.Op{Off: off + hb, Buf: lj.buf, Handle: placement.None}
	}
	return lc
}

func (e *Engine) submitLoad(lc *loadChunk) {
	if lc.prepErr != nil {
		return
	}
	e.ioStart()
	lc.err = e.dev.Submit(lc.ops)
	e.ioDone()
}

// finishLoad checks each read of lc, marks the good ones in out and returns the staging
// buffers; it returns the chunk's error.
func (e *Engine) finishLoad(lc *loadChunk, bufs [][]byte, out []bool) error {
	hb := int64(e.cfg.HeaderBytes)
	for j := range lc.batch {
		lj := &lc.batch[j]
		if lc.prepErr == nil && lc.ops[j].Err == nil {
			dst := bufs[lj.idx]
			ok := true
			if lj.hdr {
				h, herr := decodeSlotHeader(lj.buf[:hb])
				switch {
				case herr != nil, h.Identity != lj.id && e.cfg.Namespace == NamespaceObject, h.Len != uint64(lj.size):
					ok = false
				default:
					src := lj.buf[hb : hb+int64(lj.size)]
					if h.HasCRC {
						ok = copyCRC(dst, src) == h.CRC
					} else {
						copy(dst, src)
					}
				}
			} else {
				var sum uint32
				if lj.buf != nil {
					sum = copyCRC(dst, lj.buf[:lj.size])
				} else {
					sum = coldCRC(dst[:lj.size])
				}
				ok = sum == lj.crc
			}
			if ok {
				out[lj.idx] = true
				e.st.loads.Add(1)
				e.st.loadBytes.Add(int64(lj.size))
			} else {
				e.st.crcErrs.Add(1)
			}
		}
		if lj.buf != nil {
			e.pool.put(lj.buf[:cap(lj.buf)])
		}
	}
	if lc.prepErr != nil {
		return lc.prepErr
	}
	return lc.err
}

// loadMany pins every hit of keys under one hold of the index lock, loads the hits into
// buffers from alloc (of each payload's size), and unpins them under one more: what
// MetadataPrefix(lock), LoadManyInto and UnlockMany did in three calls (and a lock hold per
// key). The pin keeps an entry from being deleted or replaced while it is read.
func (e *Engine) loadMany(keys []Key, alloc func(size int) []byte) ([][]byte, error) {
	out := make([][]byte, len(keys))
	if err := e.usable(); err != nil {
		return out, err
	}
	if alloc == nil {
		alloc = func(n int) []byte { return make([]byte, n) }
	}
	jobs := make([]loadJob, 0, len(keys))
	e.mu.Lock()
	for i, k := range keys {
		s := e.find(k)
		if s < 0 || e.slots[s].state != stLive {
			continue
		}
		r := &e.slots[s]
		r.locks++
		jobs = append(jobs, loadJob{idx: i, slot: s, size: int(r.size), crc: r.crc, hasCRC: r.flags&flHasCRC != 0, id: r.id})
	}
	e.mu.Unlock()
	e.st.loadMisses.Add(int64(len(keys) - len(jobs)))
	bufs := make([][]byte, len(keys))
	for i := range bufs {
		bufs[i] = []byte{}
	}
	for _, j := range jobs {
		bufs[j.idx] = alloc(j.size)
	}
	ok := make([]bool, len(keys))
	firstErr := e.runLoads(jobs, bufs, ok)
	e.mu.Lock()
	for _, j := range jobs {
		if s := e.find(keys[j.idx]); s >= 0 && e.slots[s].locks > 0 {
			e.slots[s].locks--
		}
	}
	e.mu.Unlock()
	for _, j := range jobs {
		if ok[j.idx] {
			out[j.idx] = bufs[j.idx][:j.size:j.size]
		}
	}
	e.observe(keys, ok, placement.Load)
	return out, firstErr
}
