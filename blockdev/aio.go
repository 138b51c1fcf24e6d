package blockdev

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The Linux native AIO backend (io_setup, io_submit, io_getevents).
//
// Why a second asynchronous path next to io_uring: a block read's completion reaches an
// io_uring ring as task work of the thread that submitted it (with DEFER_TASKRUN, of the
// ring's one issuer), so the ring's owner is a goroutine locked to its OS thread, and every
// batch crosses threads three times: to the owner, back from the device to the owner, and
// from the owner to its caller (docs/resp.md, "Each GET's time in stages"). Native AIO
// completes an O_DIRECT read from the device's interrupt: the kernel puts the event in the
// context's ring and signals an eventfd, with no thread of the submitter involved. Here
// the caller submits from its own goroutine, and one unlocked goroutine waits on the
// eventfd in the Go netpoller, reaps the events and wakes the callers, on whichever thread
// the netpoller woke. Without O_DIRECT (or on a filesystem that completes in a worker) the
// kernel runs io_submit synchronously: correct, but no faster than posix.

// iocb is struct iocb (linux/aio_abi.h), little endian: 64 bytes.
type iocb struct {
	data     uint64 // aio_data: the slot
	key      uint32
	rwFlags  uint32
	opcode   uint16
	reqprio  int16
	fildes   uint32
	buf      uint64
	nbytes   uint64
	offset   int64
	reserved uint64
	flags    uint32
	resfd    uint32
}

// ioEvent is struct io_event: 32 bytes.
type ioEvent struct {
	data, obj uint64
	res, res2 int64
}

const (
	iocbCmdPread   = 0
	iocbCmdPwrite  = 1
	iocbCmdPwritev = 8
	iocbFlagResfd  = 1 << 0
)

// AioDevice is a File whose Submit and Start go through one native AIO context.
type AioDevice struct {
	*File
	ctx   uintptr
	depth int
	efd   *os.File
	rc    syscall.RawConn
	efdN  uint32 // efd's number, for the iocbs

	mu      sync.Mutex
	free    []int32     // free slots
	slots   []aioSlot   // what each slot carries
	iocbs   []iocb      // one per slot; the kernel copies it at io_submit
	iovs    [][4]uint64 // one iovec pair per slot, for a write with a Tail
	waiting []aioPiece  // ops waiting for a slot, in order
	held    int         // slots in use
	closing bool
	idle    *sync.Cond    // signalled when held and waiting reach 0
	reaped  chan struct{} // the reaper has exited

	submits, events atomic.Int64

	// started holds finished batches for the next Start: a GET's batch, its channel and
	// its Pinner are reused instead of allocated (Wait puts a batch back once it has read
	// everything it returns; the contract that Wait is called exactly once keeps the
	// caller's handle from reaching it again).
	started sync.Pool

	// RingTiming's sums (see RingTiming), added by each batch's Wait.
	start                          time.Time
	timed, queuedNs, runNs, wakeNs atomic.Int64
}

type aioSlot struct {
	s     *aioStarted
	op    int32 // index into s.ops
	tries uint8
}

type aioPiece struct {
	s  *aioStarted
	op int32
}

var _ Device = (*AioDevice)(nil)
var _ Starter = (*AioDevice)(nil)

// OpenAio opens path as OpenFile does and sets up a native AIO context of QueueDepth events.
func OpenAio(path string, opt FileOptions) (*AioDevice, error) {
	f, err := OpenFile(path, opt)
	if err != nil {
		return nil, err
	}
	d := &AioDevice{File: f, depth: f.qd, reaped: make(chan struct{}), start: time.Now()}
	fail := func(err error) (*AioDevice, error) {
		if d.ctx != 0 {
			unix.Syscall(unix.SYS_IO_DESTROY, d.ctx, 0, 0)
		}
		if d.efd != nil {
			d.efd.Close()
		}
		f.Close()
		return nil, fmt.Errorf("open %s: native aio: %w", path, err)
	}
	if _, _, e := unix.Syscall(unix.SYS_IO_SETUP, uintptr(d.depth), uintptr(unsafe.Pointer(&d.ctx)), 0); e != 0 {
		switch e {
		case unix.EAGAIN:
			return fail(fmt.Errorf("%w: io_setup(%d): %w: the system's AIO events are used up (fs.aio-nr has reached fs.aio-max-nr)", ErrAioUnavailable, d.depth, e))
		case unix.ENOSYS:
			return fail(fmt.Errorf("%w: io_setup(%d): %w: %w (the kernel has no native AIO)", ErrAioUnavailable, d.depth, e, ErrNotSupported))
		}
		return fail(fmt.Errorf("%w: io_setup(%d): %w", ErrAioUnavailable, d.depth, e))
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return fail(err)
	}
	d.efd, d.efdN = os.NewFile(uintptr(efd), "aio completions"), uint32(efd)
	if err := d.efd.SetReadDeadline(time.Time{}); err != nil {
		return fail(err) // not pollable
	}
	if d.rc, err = d.efd.SyscallConn(); err != nil {
		return fail(err)
	}
	d.slots = make([]aioSlot, d.depth)
	d.iocbs = make([]iocb, d.depth)
	d.iovs = make([][4]uint64, d.depth)
	d.free = make([]int32, d.depth)
	for i := range d.free {
		d.free[i] = int32(d.depth - 1 - i)
	}
	d.idle = sync.NewCond(&d.mu)
	go d.reap()
	return d, nil
}

// aioStarted is a batch Start queued.
type aioStarted struct {
	d    *AioDevice
	ops  []Op
	left atomic.Int32
	done chan struct{}
	pin  runtime.Pinner
	err  error

	// Stamps for RingTiming (AioDevice.since): started, submitted, last event reaped
	// (the caller woken); 0 until then.
	tStart, tSubmitted, tReaped int64
}

// since is the monotonic time since the device opened, the clock of its stamps.
func (d *AioDevice) since() int64 { return int64(time.Since(d.start)) }

// RingTiming implements RingTimed for the AIO context: Queued is the submission (from
// Start until io_submit has taken the batch's ops that had slots), Run until the reaper
// handled its last event (the device, the interrupt's eventfd signal and the netpoller's
// wake-up of the reaper), Wake until the caller's Wait returned.
func (d *AioDevice) RingTiming() (RingTiming, bool) {
	return RingTiming{Batches: d.timed.Load(), QueuedNs: d.queuedNs.Load(), RunNs: d.runNs.Load(), WakeNs: d.wakeNs.Load()}, true
}

// Submit implements Device.
func (d *AioDevice) Submit(ops []Op) error { return d.Start(ops).Wait() }

// Start implements Starter: the ops are submitted from the calling goroutine, as many as
// free slots allow; the rest wait for slots, which the reaper fills as events come in.
func (d *AioDevice) Start(ops []Op) Started {
	s, _ := d.started.Get().(*aioStarted)
	if s == nil {
		s = &aioStarted{d: d, done: make(chan struct{}, 1)}
	}
	s.ops, s.tStart = ops, d.since()
	var itemsBuf [8]int32
	items := itemsBuf[:0]
	for i := range ops {
		op := &ops[i]
		if op.Err = d.check(op); op.Err != nil || op.Len() == 0 {
			continue
		}
		if len(op.Buf) > 0 {
			s.pin.Pin(&op.Buf[0])
		}
		if len(op.Tail) > 0 {
			s.pin.Pin(&op.Tail[0])
		}
		items = append(items, int32(i))
	}
	if len(items) == 0 {
		s.done <- struct{}{}
		return s
	}
	s.left.Store(int32(len(items)))
	var list [8]*iocb
	batch := list[:0]
	d.mu.Lock()
	if d.closing {
		d.mu.Unlock()
		s.err = fmt.Errorf("%s: closed", d.info.Path)
		s.done <- struct{}{}
		return s
	}
	for _, i := range items {
		if len(d.free) == 0 {
			d.waiting = append(d.waiting, aioPiece{s, i})
			continue
		}
		batch = append(batch, d.slot(aioPiece{s, i}))
	}
	d.mu.Unlock()
	d.submit(batch)
	s.tSubmitted = d.since()
	return s
}

// slot takes a free slot for p and prepares its iocb; d.mu is held.
func (d *AioDevice) slot(p aioPiece) *iocb {
	k := d.free[len(d.free)-1]
	d.free = d.free[:len(d.free)-1]
	d.held++
	d.slots[k] = aioSlot{s: p.s, op: p.op}
	return d.prep(k)
}

// prep fills slot k's iocb for the rest of its op.
func (d *AioDevice) prep(k int32) *iocb {
	sl := &d.slots[k]
	op := &sl.s.ops[sl.op]
	cb := &d.iocbs[k]
	*cb = iocb{data: uint64(k), fildes: uint32(d.fd), offset: op.Off + int64(op.N), flags: iocbFlagResfd, resfd: d.efdN}
	var p []byte
	switch {
	case len(op.Tail) > 0 && op.N < len(op.Buf):
		head := op.Buf[op.N:]
		v := &d.iovs[k]
		v[0], v[1] = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(head)))), uint64(len(head))
		v[2], v[3] = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(op.Tail)))), uint64(len(op.Tail))
		cb.opcode, cb.buf, cb.nbytes = iocbCmdPwritev, uint64(uintptr(unsafe.Pointer(v))), 2
		return cb
	case op.N < len(op.Buf):
		p = op.Buf[op.N:]
	default:
		p = op.Tail[op.N-len(op.Buf):]
	}
	cb.opcode = iocbCmdPread
	if op.Write {
		cb.opcode = iocbCmdPwrite
	}
	cb.buf, cb.nbytes = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(p)))), uint64(len(p))
	return cb
}

// submit hands the prepared iocbs to the kernel; those it refuses complete with the error.
func (d *AioDevice) submit(list []*iocb) {
	for len(list) > 0 {
		n, _, e := unix.Syscall(unix.SYS_IO_SUBMIT, d.ctx, uintptr(len(list)), uintptr(unsafe.Pointer(&list[0])))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			// The first iocb was refused (the rest were not looked at): complete it with
			// the error (EAGAIN, out of kernel resources, is retried a few times, a
			// millisecond apart) and go on with the others and what it gave back.
			if e == unix.EAGAIN {
				time.Sleep(time.Millisecond)
			}
			more := d.complete(int32(list[0].data), -int64(e), nil)
			list = append(append([]*iocb(nil), list[1:]...), more...)
			continue
		}
		d.submits.Add(int64(n))
		list = list[n:]
	}
}

// reap waits on the eventfd in the netpoller and handles every event, until Close.
func (d *AioDevice) reap() {
	defer close(d.reaped)
	events := make([]ioEvent, d.depth)
	var again []*iocb
	var buf [8]byte
	zero := unix.Timespec{}
	drain := func(fd uintptr) bool { // made once: a closure per wake-up allocates
		_, err := unix.Read(int(fd), buf[:])
		return err != unix.EAGAIN
	}
	for {
		err := d.rc.Read(drain)
		if err != nil {
			return // closed
		}
		for {
			n, _, e := unix.Syscall6(unix.SYS_IO_GETEVENTS, d.ctx, 0, uintptr(len(events)), uintptr(unsafe.Pointer(&events[0])), uintptr(unsafe.Pointer(&zero)), 0)
			if e == unix.EINTR {
				continue
			}
			if e != 0 || n == 0 {
				break
			}
			d.events.Add(int64(n))
			again = again[:0]
			for _, ev := range events[:n] {
				again = d.complete(int32(ev.data), ev.res, again)
			}
			d.submit(again)
		}
	}
}

// complete handles slot k's result res: it resubmits the rest of a short transfer (or a
// retryable error) through again, else finishes the op, frees the slot and fills it with
// a waiting op. It returns again with what to submit.
func (d *AioDevice) complete(k int32, res int64, again []*iocb) []*iocb {
	// Under d.mu: the slot and its op were written under it by the submitter (the kernel's
	// event orders them too, but not for the race detector).
	d.mu.Lock()
	sl := &d.slots[k]
	s := sl.s
	op := &s.ops[sl.op]
	retry := false
	switch {
	case res < 0:
		errno := unix.Errno(-res)
		if retryable(errno) && sl.tries < maxTries {
			sl.tries++
			retry = true
			break
		}
		what := "read"
		if op.Write {
			what = "write"
		}
		op.Err = fmt.Errorf("aio %s of %d bytes at %d on %s: %w", what, op.Len()-op.N, op.Off+int64(op.N), d.info.Path, errno)
	case res == 0:
		op.Err = fmt.Errorf("aio: %w at offset %d of %s", ErrUnexpectedEOF, op.Off+int64(op.N), d.info.Path)
	default:
		op.N += int(res)
		retry = op.N < op.Len()
	}
	if retry {
		cb := d.prep(k)
		d.mu.Unlock()
		return append(again, cb)
	}
	d.slots[k] = aioSlot{}
	d.free = append(d.free, k)
	d.held--
	if len(d.waiting) > 0 {
		p := d.waiting[0]
		d.waiting[0] = aioPiece{}
		d.waiting = d.waiting[1:]
		again = append(again, d.slot(p))
	}
	if d.held == 0 && len(d.waiting) == 0 {
		d.idle.Broadcast()
	}
	d.mu.Unlock()
	if s.left.Add(-1) == 0 {
		s.tReaped = d.since()
		s.done <- struct{}{}
	}
	return again
}

// Wait implements Started.
func (s *aioStarted) Wait() error {
	<-s.done
	s.pin.Unpin()
	d := s.d
	if s.tReaped > 0 && s.tSubmitted > 0 {
		d.queuedNs.Add(s.tSubmitted - s.tStart)
		d.runNs.Add(max(0, s.tReaped-s.tSubmitted))
		d.wakeNs.Add(d.since() - s.tReaped)
		d.timed.Add(1)
	}
	err := s.err
	for i := range s.ops {
		if err != nil {
			break
		}
		err = s.ops[i].Err
	}
	// The reaper is done with s (its last touch was the send on done) and so is this
	// caller: back to the pool for the next Start.
	s.ops, s.err = nil, nil
	s.left.Store(0) // a batch refused on a closing device never counted down
	s.tStart, s.tSubmitted, s.tReaped = 0, 0, 0
	d.started.Put(s)
	return err
}

// Close waits for the ops in flight, then tears the context down and closes the file.
func (d *AioDevice) Close() error {
	d.mu.Lock()
	if d.closing {
		d.mu.Unlock()
		return nil
	}
	d.closing = true
	for d.held > 0 || len(d.waiting) > 0 {
		d.idle.Wait()
	}
	d.mu.Unlock()
	d.efd.Close()
	<-d.reaped
	unix.Syscall(unix.SYS_IO_DESTROY, d.ctx, 0, 0)
	return d.File.Close()
}
