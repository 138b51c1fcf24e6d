package nvmetcp

import (
	"fmt"
	"time"
)

// A write whose data does not fit in the capsule is a transfer: the target reserves its
// length in the write budget, sends an R2T, and reads the H2CData PDUs that follow straight
// into one buffer taken when the first of them arrives. When the budget is spent the write
// waits — in order, on this queue and across all of them — and a grant goroutine sends its
// R2T once earlier writes have run; the reading goroutine never blocks on the budget, so the
// data of the writes already granted keeps flowing in. A transfer that makes no progress
// for StallTimeout ends the connection, which returns its budget.
type transfer struct {
	sqe SQE
	tag uint16
	n   uint32 // bytes asked for in the R2T (and reserved)

	// Guarded by queue.mu (buf and bad are the reading goroutine's once set).
	buf      []byte // nil until the first H2CData PDU
	got      uint32
	bad      bool // a data PDU failed its data digest: complete with a transient transport error
	deadline time.Time
}

// requestData starts a write transfer of n bytes: its R2T goes out now if the budget has
// room and no earlier write of this queue waits, else when the grant goroutine gets it.
func (q *queue) requestData(sqe SQE, n uint32) {
	q.mu.Lock()
	tr := &transfer{sqe: sqe, tag: q.newTagLocked(), n: n}
	if len(q.waiting) == 0 && q.t.budget.tryAcquire(int64(n)) {
		q.startLocked(tr)
		q.mu.Unlock()
		q.lockWrite()
		q.send(AppendR2T(nil, DataPDU{CCCID: sqe.CID, TTag: tr.tag, Length: n}), nil)
		q.wmu.Unlock() // the reading loop flushes
		return
	}
	q.waiting = append(q.waiting, tr)
	q.t.counts.waiting.Add(1)
	q.t.counts.waited.Add(1)
	if !q.granting {
		q.granting = true
		q.grants.Add(1)
		go q.grantLoop()
	}
	q.mu.Unlock()
}

// newTagLocked picks a transfer tag no pending or waiting transfer uses.
func (q *queue) newTagLocked() uint16 {
	used := func(tag uint16) bool {
		if q.pending[tag] != nil {
			return true
		}
		for _, w := range q.waiting {
			if w.tag == tag {
				return true
			}
		}
		return false
	}
	tag := q.nextTag
	for used(tag) {
		tag++
	}
	q.nextTag = tag + 1
	return tag
}

// startLocked makes tr pending (its budget reserved) and arms the stall watch.
func (q *queue) startLocked(tr *transfer) {
	tr.deadline = time.Now().Add(q.t.cfg.StallTimeout)
	q.pending[tr.tag] = tr
	if q.stall == nil {
		q.stall = time.AfterFunc(q.t.cfg.StallTimeout, q.checkStall)
	} else if len(q.pending) == 1 {
		q.stall.Reset(q.t.cfg.StallTimeout)
	}
}

// grantLoop waits for budget for the queue's waiting writes, oldest first, and sends each
// one's R2T; it ends when none waits or the queue closes.
func (q *queue) grantLoop() {
	defer q.grants.Done()
	for {
		q.mu.Lock()
		if q.closed || len(q.waiting) == 0 {
			q.granting = false
			q.mu.Unlock()
			return
		}
		tr := q.waiting[0]
		q.mu.Unlock()
		if !q.t.budget.acquire(int64(tr.n), q.done) {
			q.mu.Lock()
			q.granting = false
			q.mu.Unlock()
			return // the queue closed while waiting
		}
		q.mu.Lock()
		if q.closed {
			q.granting = false
			q.mu.Unlock()
			q.t.budget.release(int64(tr.n))
			return
		}
		q.waiting[0] = nil
		q.waiting = q.waiting[1:]
		q.t.counts.waiting.Add(-1)
		q.startLocked(tr)
		q.mu.Unlock()
		q.lockWrite()
		q.send(AppendR2T(nil, DataPDU{CCCID: tr.sqe.CID, TTag: tr.tag, Length: tr.n}), nil)
		err := q.w.Flush()
		q.wmu.Unlock()
		if err != nil {
			q.kill(fmt.Errorf("%w: R2T not sent: %v", ErrStalled, err))
		}
	}
}

// checkStall runs at the earliest pending transfer's deadline: if it has passed with no
// data, the connection ends; otherwise the watch moves to the new earliest deadline.
func (q *queue) checkStall() {
	q.mu.Lock()
	if q.closed || len(q.pending) == 0 {
		q.mu.Unlock()
		return
	}
	var first *transfer
	for _, tr := range q.pending {
		if first == nil || tr.deadline.Before(first.deadline) {
			first = tr
		}
	}
	if left := time.Until(first.deadline); left > 0 {
		q.stall.Reset(left)
		q.mu.Unlock()
		return
	}
	err := fmt.Errorf("%w: R2T for %d bytes of command %d got %d bytes, none for %v", ErrStalled, first.n, first.sqe.CID, first.got, q.t.cfg.StallTimeout)
	q.mu.Unlock()
	q.t.counts.stalls.Add(1)
	q.kill(err)
}

// finish returns a transfer's buffer and budget once its command has run (or its
// connection ended).
func (q *queue) finish(tr *transfer) {
	if tr.buf != nil {
		putBuf(tr.buf)
		tr.buf = nil
		q.t.counts.allocated.Add(-int64(tr.n))
	}
	q.t.budget.release(int64(tr.n))
}
