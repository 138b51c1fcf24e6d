package blockdev

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/rbctl/rbctl/internal/sys"
	"github.com/rbctl/rbctl/internal/uring"
	"github.com/rbctl/rbctl/placement"
	"golang.org/x/sys/unix"
)

// The batch path of UringDevice: Submit and Start, and the uring.Batch that prepares an
// Op's SQE and completes it (resubmitting short transfers).

// uringBatch adapts a slice of Ops to uring.Batch.
type uringBatch struct {
	d     *UringDevice
	ops   []Op
	items []int32 // indices into ops of the ops to issue
	regs  *uring.BufferTable
	tries []uint8  // EAGAIN/EINTR/ECANCELED retries per item
	iov   []uint64 // per item two iovecs (base, length pairs) for ops with a Tail; nil without
}

func (d *UringDevice) newBatch(ops []Op, items []int32, regs *uring.BufferTable, tails bool) *uringBatch {
	b := &uringBatch{d: d, ops: ops, items: items, regs: regs, tries: make([]uint8, len(items))}
	if tails {
		b.iov = make([]uint64, 4*len(items)) // no Go pointers: the kernel reads it at submission
	}
	return b
}

func (b *uringBatch) Len() int { return len(b.items) }

func (b *uringBatch) Prep(i int, sqe uring.SQE) {
	op := &b.ops[b.items[i]]
	if op.N > 0 {
		b.d.resubmits.Add(1)
	}
	off := uint64(op.Off + int64(op.N))
	fd := int32(b.d.fd)
	if b.d.fixedFile {
		fd = 0
	}
	// The rest of the op: Buf[N:] and Tail as one WRITEV while both fit one SQE, else the
	// rest of Buf, then the rest of Tail, each a plain or fixed transfer.
	var p []byte
	switch {
	case len(op.Tail) > 0 && op.N < len(op.Buf) && op.Len()-op.N <= b.d.maxChunk:
		head := op.Buf[op.N:]
		v := b.iov[4*i : 4*i+4]
		v[0], v[1] = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(head)))), uint64(len(head))
		v[2], v[3] = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(op.Tail)))), uint64(len(op.Tail))
		b.d.vectoredOps.Add(1)
		sqe.PrepWritev(fd, v, off)
		b.finish(op, sqe)
		return
	case op.N < len(op.Buf):
		p = op.Buf[op.N:]
	default:
		p = op.Tail[op.N-len(op.Buf):]
	}
	if len(p) > b.d.maxChunk {
		p = p[:b.d.maxChunk]
	}
	if idx, ok := b.regs.Lookup(p); ok {
		b.d.fixedOps.Add(1)
		if op.Write {
			sqe.PrepWriteFixed(fd, p, off, idx)
		} else {
			sqe.PrepReadFixed(fd, p, off, idx)
		}
	} else if b.d.plainOps.Add(1); op.Write {
		sqe.PrepWrite(fd, p, off)
	} else {
		sqe.PrepRead(fd, p, off)
	}
	b.finish(op, sqe)
}

// finish sets what every SQE of op carries: the fixed-file flag and its write stream.
func (b *uringBatch) finish(op *Op, sqe uring.SQE) {
	if b.d.fixedFile {
		sqe.SetFlags(sys.IOSQE_FIXED_FILE)
	}
	if op.Write && op.Handle != placement.None && b.d.streams.Max > 0 {
		// write_stream is the u8 at offset 44, the low byte of the splice_fd_in union
		// (little endian); the three bytes after it must stay zero. Stream s (1..max) is
		// placement handle s-1; Submit has checked the range.
		sqe.Raw().SpliceFdIn = int32(op.Handle) + 1
	}
}

// maxTries bounds the resubmissions of one op that completed with a retryable errno.
const maxTries = 16

// retryable reports whether an op that completed with errno may simply be issued again.
// EAGAIN and EINTR say so themselves. ECANCELED does too here, because this package never
// links SQEs nor cancels an op it issued: the kernel cancels a buffered file write or read it
// had punted to io-wq when it could not start io-wq's first worker thread (Linux 6.1,
// io_wqe_enqueue and create_worker_cont: "failed to create the first worker"), which is
// transient. A ring torn down under an op cannot be the cause, since the Executor closes
// its ring only with nothing in flight. Seen once in CI: the first 64 KiB write on a fresh
// ring in the 6.1 guest failed with "operation canceled".
func retryable(errno unix.Errno) bool {
	return errno == unix.EAGAIN || errno == unix.EINTR || errno == unix.ECANCELED
}

func (b *uringBatch) Complete(i int, c uring.CQE) bool {
	op := &b.ops[b.items[i]]
	switch {
	case c.Res < 0:
		errno := unix.Errno(-c.Res)
		if retryable(errno) && b.tries[i] < maxTries {
			b.tries[i]++
			return true
		}
		what := "read"
		if op.Write {
			what = "write"
		}
		op.Err = fmt.Errorf("uring %s of %d bytes at %d on %s: %w", what, op.Len()-op.N, op.Off+int64(op.N), b.d.info.Path, errno)
		return false
	case c.Res == 0:
		op.Err = fmt.Errorf("uring: %w at offset %d of %s", ErrUnexpectedEOF, op.Off+int64(op.N), b.d.info.Path)
		return false
	}
	op.N += int(c.Res)
	return op.N < op.Len() // short transfer: issue the remainder
}

// VectoredWrites implements VectoredWriter: a write with a Tail is one IORING_OP_WRITEV
// (the header from the staging arena, the payload from the caller's memory). WRITEV takes
// no registered buffers, so the kernel pins the pages of such a write for its duration.
func (d *UringDevice) VectoredWrites() bool { return true }

// Submit implements Device.
func (d *UringDevice) Submit(ops []Op) error { return d.Start(ops).Wait() }

// Start implements Starter: it checks and pins ops, queues them on the rings and returns
// while they run. A batch longer than the queue depth is spread over every ring in
// contiguous chunks.
func (d *UringDevice) Start(ops []Op) Started {
	s := &uringStarted{d: d, ops: ops}
	if d.closed.Load() {
		s.err = fmt.Errorf("uring device %s: closed", d.info.Path)
		return s
	}
	items, tails := d.admit(ops, &s.pin)
	regs := d.regs.Load()
	n := len(d.execs)
	if n == 1 || len(items) <= d.execs[0].Depth() {
		e := d.execs[int(d.rr.Add(1))%n]
		s.runs = append(s.runs, e.Start(d.newBatch(ops, items, regs, tails)))
		return s
	}
	start := int(d.rr.Add(1))
	for k := 0; k < n; k++ {
		lo, hi := k*len(items)/n, (k+1)*len(items)/n
		if lo < hi {
			s.runs = append(s.runs, d.execs[(start+k)%n].Start(d.newBatch(ops, items[lo:hi], regs, tails)))
		}
	}
	return s
}

// admit resets every op's outcome, fails the ops the device cannot take (their Err set)
// and pins the buffers of the rest (a no-op for Alloc'd memory). It returns the indices of
// the ops to issue, and whether any has a Tail.
func (d *UringDevice) admit(ops []Op, pin *runtime.Pinner) (items []int32, tails bool) {
	items = make([]int32, 0, len(ops))
	for i := range ops {
		op := &ops[i]
		op.N, op.Err = 0, nil
		if err := CheckOp(d.info, op); err != nil {
			op.Err = err
			continue
		}
		if op.Write && d.readOnly {
			op.Err = fmt.Errorf("uring device %s: opened read-only", d.info.Path)
			continue
		}
		if op.Write && op.Handle != placement.None && d.streams.Max > 0 && (op.Handle < 0 || int(op.Handle) >= d.streams.Max) {
			op.Err = fmt.Errorf("uring device %s: placement handle %d: the device has %d write streams (handles 0..%d)",
				d.info.Path, op.Handle, d.streams.Max, d.streams.Max-1)
			continue
		}
		if op.Len() == 0 {
			continue
		}
		if len(op.Buf) > 0 {
			pin.Pin(&op.Buf[0])
		}
		if len(op.Tail) > 0 {
			pin.Pin(&op.Tail[0])
			tails = true
		}
		items = append(items, int32(i))
	}
	return items, tails
}

// uringStarted is a batch Start queued: one run per ring it went to.
type uringStarted struct {
	d    *UringDevice
	ops  []Op
	runs []uring.Pending
	pin  runtime.Pinner // the ops' buffers, until the kernel is done with them
	err  error          // the batch was refused as a whole
}

// Wait implements Started.
func (s *uringStarted) Wait() error {
	defer s.pin.Unpin()
	if s.err != nil {
		return s.err
	}
	var errs []error
	for _, p := range s.runs {
		if err := p.Wait(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("uring device %s: %w", s.d.info.Path, err)
	}
	for i := range s.ops {
		if s.ops[i].Err != nil {
			return s.ops[i].Err
		}
	}
	return nil
}
