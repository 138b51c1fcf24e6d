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
	// unchecked: the payload's CRC is not compared (LoadOptions.Unchecked; only for a job
	// whose CRC is known, which the caller passes on to whoever checks the bytes).
	unchecked bool
}

func (e *Engine) loadManyInto(keys []Key, bufs [][]byte, o LoadOptions) ([]bool, error) {
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
		hasCRC := r.flags&flHasCRC != 0
		jobs = append(jobs, loadJob{idx: i, slot: s, size: int(r.size), crc: r.crc, hasCRC: hasCRC, id: r.id, unchecked: o.Unchecked && hasCRC})
	}
	e.mu.Unlock()
	e.st.loadMisses.Add(int64(len(keys) - len(jobs)))
	// The batch goes to the device in submissions of at most maxBatch reads, each verified
	// chunk by chunk while its later reads are in flight (runLoads).
	firstErr := e.runLoads(jobs, bufs, out)
	e.observe(keys, out, placement.Load)
	return out, firstErr
}

// runLoads reads jobs into bufs in device submissions of at most maxBatch reads, marks the
// good ones in out and returns the first error. On a blockdev.Starter a submission's reads
// all start at once, in chunks, and each chunk is verified as soon as it is done, while the
// later ones are still being read (opstream.go).
func (e *Engine) runLoads(jobs []loadJob, bufs [][]byte, out []bool) error {
	var firstErr error
	for len(jobs) > 0 {
		n := min(len(jobs), e.maxBatch())
		lc := e.prepareLoad(jobs[:n], bufs)
		jobs = jobs[n:]
		if err := e.readAndVerify(&lc, bufs, out); err != nil && firstErr == nil {
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
}

// prepareLoad builds the read ops of batch: straight into the caller's buffer when it is
// aligned (or the device is buffered), through a staging buffer otherwise.
func (e *Engine) prepareLoad(batch []loadJob, bufs [][]byte) loadChunk {
	lc := loadChunk{batch: batch, ops: make([]blockdev.Op, len(batch))}
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

// readAndVerify reads lc's ops and verifies each chunk of them as it completes, marks the
// good ones in out and returns the staging buffers; it returns the first error.
func (e *Engine) readAndVerify(lc *loadChunk, bufs [][]byte, out []bool) error {
	if lc.prepErr != nil {
		e.finishLoad(lc.batch, lc.ops, false, bufs, out)
		return lc.prepErr
	}
	s := newOpStreamIn(e.dev, lc.ops) // the stream takes lc.ops' array over
	e.ioStart()
	for _, op := range lc.ops {
		s.add(op)
	}
	var firstErr error
	for k, n := 0, s.chunks(); k < n; k++ {
		lo, hi, err := s.wait(k)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		e.finishLoad(lc.batch[lo:hi], s.ops[lo:hi], true, bufs, out)
	}
	e.ioDone()
	return firstErr
}

// finishLoad checks the reads of batch (ops[j] read batch[j]; read: they were submitted),
// marks the good ones in out and returns their staging buffers.
func (e *Engine) finishLoad(batch []loadJob, ops []blockdev.Op, read bool, bufs [][]byte, out []bool) {
	hb := int64(e.cfg.HeaderBytes)
	for j := range batch {
		lj := &batch[j]
		if read && ops[j].Err == nil {
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
			} else if lj.unchecked {
				if lj.buf != nil {
					copy(dst, lj.buf[:lj.size])
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
