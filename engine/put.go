package engine

import (
	"fmt"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/placement"
)

// PutMany: placement, slot allocation under the index lock, then the slot writes in
// batches of at most maxBatch ops with the lock released.

// putAttempts bounds how often a put that found no free slot while freed slots were
// waiting for their discard tries again. Once was not enough with concurrent callers: the
// slots one caller's drain freed could be taken by another's put before its retry (the
// 3-worker bench of TestBackendEndToEnd failed 1 to 12 of its stores in about one run in
// 60 on two busy cores, at 2e2634f too). Each retry issues and waits for the discards
// pending then, so a retry costs only when slots really were waiting.
const putAttempts = 4

type putJob struct {
	idx      int
	slot     int32
	buf      []byte // the staging buffer: header and copied payload, or the header alone
	crc      uint32
	vectored bool // the payload goes out from the caller's memory as the op's Tail
}

// writesInPlace reports whether payload p can be written from the caller's memory: the
// device takes vectored writes, the slot write needs no padding after p, and on an
// O_DIRECT device p starts on a block_align boundary (the rule loads into caller memory
// follow too).
func (e *Engine) writesInPlace(p []byte) bool {
	return e.vectored && int64(len(p))%e.lbs == 0 && (!e.direct || blockdev.Aligned(p, int(e.lbs)))
}

func (e *Engine) putMany(keys []Key, payloads [][]byte, o PutOptions) (PutResult, error) {
	metas := o.Metas
	if len(keys) != len(payloads) || (metas != nil && len(metas) != len(keys)) {
		return PutResult{}, fmt.Errorf("%w: PutMany got %d keys, %d payloads, %d metas", ErrConfig, len(keys), len(payloads), len(metas))
	}
	res := PutResult{Results: make([]bool, len(keys))}
	if err := e.usable(); err != nil {
		return res, err
	}
	if e.cfg.ReadOnly {
		return res, ErrReadOnly
	}
	handles := make([]placement.Handle, len(keys))
	var firstErr error
	for i, k := range keys {
		h, err := e.placeData(k, len(payloads[i]))
		if o.Placed {
			h, err = o.Handle, e.checkHandle(o.Handle, "data write", "PutOptions.Handle")
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
		handles[i] = h
		if err != nil {
			handles[i] = badHandle
		}
	}
	maxPayload := e.layout.PayloadBytes()
	costs := make([]roomCost, len(keys))
	for i, k := range keys {
		var m *ObjMeta
		if metas != nil {
			m = metas[i]
		}
		costs[i] = e.roomCostOf(k, len(payloads[i]), m)
	}
	var dup map[string]int
	if len(keys) > 1 {
		dup = make(map[string]int, len(keys))
	}
	dupOf := make([]int, len(keys))
	todo := make([]int, 0, len(keys))
	for i := range keys {
		dupOf[i] = -1
		if dup != nil {
			if j, ok := dup[keys[i].enc]; ok {
				dupOf[i] = j
				continue
			}
			dup[keys[i].enc] = i
		}
		todo = append(todo, i)
	}
	for attempt := 0; attempt < putAttempts && len(todo) > 0; attempt++ {
		var jobs []putJob
		var noSlot []int
		e.mu.Lock()
		if err := e.ckptFailing(); err != nil {
			e.mu.Unlock()
			e.st.putCkptFailing.Add(int64(len(todo)))
			e.st.putFailed.Add(int64(len(todo)))
			if firstErr == nil {
				firstErr = err
			}
			break
		}
		for _, i := range todo {
			k := keys[i]
			if int64(len(payloads[i])) > maxPayload || len(payloads[i]) == 0 || len(k.enc) > 65535 || handles[i] == badHandle {
				e.st.putFailed.Add(1)
				continue
			}
			if s := e.find(k); s >= 0 {
				if e.slots[s].state == stLive {
					res.Results[i] = true
					e.st.putSkipped.Add(1)
				} else {
					e.st.putFailed.Add(1)
				}
				continue
			}
			if ok, need, left := e.roomFor(costs[i]); !ok {
				e.st.putFailed.Add(1)
				e.st.putRoom.Add(1)
				if firstErr == nil {
					firstErr = fieldErr(ErrIndexFull, []string{"meta_total_bytes"}, "key of %d bytes needs %d bytes of checkpoint (with its metadata and any new model prefix or cache_salt), %d are left beyond the %d kept for each free slot; use shorter model names, salts or keys, or reformat with a larger meta_total_bytes (now %d)",
						len(k.enc), need, max(left, 0), e.ixPerSlot, e.layout.MetaTotalBytes)
				}
				continue
			}
			s := e.allocSlot(handles[i])
			if s < 0 {
				noSlot = append(noSlot, i)
				continue
			}
			r := &e.slots[s]
			r.state = stInflight
			r.size = uint32(len(payloads[i]))
			r.handle = int16(handles[i]) // checkHandle keeps it within -1..maxStoredHandle
			r.flags &= flTouched
			r.locks = 0
			e.bind(s, k, costs[i].entry)
			e.inflight++
			jobs = append(jobs, putJob{idx: i, slot: s})
		}
		// Freed slots become free only once discarded (dealloc.go): a put that found none
		// while slots were queued or being discarded issues the queued discards, waits for
		// them and retries, up to putAttempts times in all.
		retry := len(noSlot) > 0 && (e.dealloc > 0 || len(e.pending) > 0) && attempt < putAttempts-1
		e.mu.Unlock()
		if err := e.writeJobs(keys, payloads, metas, jobs, handles, &res); err != nil && firstErr == nil {
			firstErr = err
		}
		todo = todo[:0]
		if retry {
			e.drainDeallocs()
			todo = append(todo, noSlot...)
		} else {
			e.st.putFailed.Add(int64(len(noSlot)))
		}
	}
	for i, j := range dupOf {
		if j >= 0 {
			res.Results[i] = res.Results[j]
		}
	}
	if e.obs != nil {
		for _, i := range res.Stored {
			e.obs.Observe(keys[i].id, placement.Store)
		}
	}
	return res, firstErr
}

func (e *Engine) writeJobs(keys []Key, payloads [][]byte, metas []*ObjMeta, jobs []putJob, handles []placement.Handle, res *PutResult) error {
	var firstErr error
	hb := e.cfg.HeaderBytes
	for len(jobs) > 0 {
		n := min(len(jobs), e.maxBatch())
		batch := jobs[:n]
		jobs = jobs[n:]
		// Each write is started (in chunks, on a device that can) as soon as its payload is
		// checksummed, so the device writes while the rest is checksummed (opstream.go).
		ops := newOpStream(e.dev, n)
		var prepErr error
		e.ioStart()
		for j := range batch {
			b, err := e.pool.get()
			if err != nil {
				prepErr = err
				break
			}
			p := payloads[batch[j].idx]
			k := &keys[batch[j].idx]
			h := slotHeader{Identity: k.id, Len: uint64(len(p)), Key: k.enc, Legacy: e.cfg.Namespace == NamespaceLegacy,
				HasKey: keyRecordFits(len(k.enc), hb), Gen: e.nextGen()}
			op := blockdev.Op{Write: true, Off: e.slotOff(batch[j].slot), Handle: handles[batch[j].idx]}
			batch[j].buf = b
			if e.writesInPlace(p) {
				// Header and payload in one vectored write, the payload not copied.
				if e.cfg.PayloadChecksum {
					h.HasCRC = true
					h.CRC = coldCRC(p)
					batch[j].crc = h.CRC
				}
				op.Buf, op.Tail = b[:hb], p
				batch[j].vectored = true
			} else {
				b = b[:e.layout.SlotWriteBytes(len(p))]
				if e.cfg.PayloadChecksum {
					h.HasCRC = true
					h.CRC = copyCRC(b[hb:], p) // the checksum of the bytes written
					batch[j].crc = h.CRC
				} else {
					copy(b[hb:], p)
				}
				clear(b[hb+len(p):])
				op.Buf = b
			}
			encodeSlotHeader(b[:hb], h)
			ops.add(op)
		}
		var err error
		if prepErr != nil {
			ops.drain() // nothing of this batch is stored; its started writes land in free slots
			err = prepErr
		} else {
			err = ops.waitAll()
		}
		e.ioDone()
		if err != nil && firstErr == nil {
			firstErr = err
		}
		kick := false
		e.mu.Lock()
		for j := range batch {
			s := batch[j].slot
			r := &e.slots[s]
			ok := prepErr == nil && ops.ops[j].Err == nil
			e.inflight--
			if !ok {
				e.unbind(s)
				e.freeSlot(s)
				e.st.putFailed.Add(1)
				continue
			}
			if r.flags&flCanceled != 0 { // deleted while in flight: the written slot is freed
				e.unbind(s)
				kick = e.releaseSlot(s) || kick
				continue
			}
			r.state = stLive
			e.stamp++
			r.stamp = e.stamp
			if e.cfg.PayloadChecksum {
				r.flags |= flHasCRC
				r.crc = batch[j].crc
			}
			i := batch[j].idx
			if metas != nil && metas[i] != nil {
				r.flags |= flHasMeta
				e.metas[s] = metas[i]
			}
			e.live++
			e.bySalt[keys[i].CacheSalt()] += e.cfg.SlotBytes
			e.byHandle[placement.Handle(r.handle)]++
			e.markDirty(s)
			res.Results[i] = true
			res.Stored = append(res.Stored, i)
			e.st.puts.Add(1)
			e.st.putBytes.Add(int64(len(payloads[i])))
			if batch[j].vectored {
				e.st.putsVectored.Add(1)
			}
		}
		e.mu.Unlock()
		if kick {
			e.kickDealloc()
		}
		for j := range batch {
			e.pool.put(batch[j].buf)
		}
	}
	return firstErr
}
