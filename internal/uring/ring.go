package uring

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rbctl/rbctl/internal/sys"
	"golang.org/x/sys/unix"
)

// Options configure Setup. The zero value (plus Entries) is a plain ring with 64-byte SQEs
// and 16-byte CQEs.
type Options struct {
	Entries   uint32 // SQ entries; rounded up to a power of two by the kernel (default 64)
	CQEntries uint32 // CQ entries (0: twice Entries)

	SQE128 bool // 128-byte SQEs with an 80-byte command area (URING_CMD; 5.19)
	CQE32  bool // 32-byte CQEs with two extra result words (URING_CMD; 5.19)

	SingleIssuer bool // only the creating thread submits (6.0); lock the goroutine to its thread
	DeferTaskrun bool // run completion work only when the issuer waits (6.1); implies SingleIssuer
	CoopTaskrun  bool // no IPI to the issuer on completion (5.19)
	SubmitAll    bool // keep submitting after an SQE fails to prepare (5.18)

	SQPoll     bool          // kernel thread polls the SQ (5.1; unprivileged since 5.11)
	SQPollIdle time.Duration // SQPOLL thread idle time before it sleeps (default 1s)
	IOPoll     bool          // busy-poll completions (O_DIRECT on polled queues only; 5.1)

	// KernelWait (Executor only) makes the Executor wait for completions inside
	// io_uring_enter on every ring. By default a DEFER_TASKRUN ring's Executor waits in the
	// Go netpoller on an eventfd registered with the ring instead, so that its thread holds
	// no P while it waits: goroutines it just woke (the callers of finished batches, queued
	// on its P) run at once rather than after the runtime takes a P back from a system call
	// (20 µs to 10 ms). Rings without DEFER_TASKRUN always wait in the kernel.
	KernelWait bool

	// BestEffort drops the optional performance flags (SingleIssuer, DeferTaskrun,
	// CoopTaskrun, SubmitAll) the kernel rejects instead of failing; Ring.Flags tells what
	// is in effect. Flags that change semantics (SQE128, CQE32, SQPoll, IOPoll) never drop.
	BestEffort bool
}

// Ring is one io_uring instance. It is not safe for concurrent use; see Executor.
type Ring struct {
	fd       int
	flags    uint32 // setup flags in effect
	features uint32
	params   sys.IoUringParams

	sqMem, cqMem, sqeMem []byte // cqMem aliases sqMem with IORING_FEAT_SINGLE_MMAP

	sqHead, sqTail, sqFlags, sqDropped *uint32
	sqMask, sqEntries                  uint32
	sqes                               unsafe.Pointer
	sqeShift                           uint   // 6 (64 B) or 7 (128 B)
	sqeTail                            uint32 // next SQE handed out; published to *sqTail by flush

	cqHead, cqTail, cqOverflow *uint32
	cqFlags                    *uint32 // nil before 5.8
	cqMask, cqEntries          uint32
	cqes                       unsafe.Pointer
	cqeShift                   uint // 4 (16 B) or 5 (32 B)

	probe  *Probe
	closed bool
}

// flagInfo names each setup flag and the kernel that introduced it.
type flagDesc struct {
	flag     uint32
	name     string
	kernel   string
	optional bool
}

var flagInfo = []flagDesc{
	{sys.IORING_SETUP_IOPOLL, "IORING_SETUP_IOPOLL", "5.1", false},
	{sys.IORING_SETUP_SQPOLL, "IORING_SETUP_SQPOLL", "5.1", false},
	{sys.IORING_SETUP_CQSIZE, "IORING_SETUP_CQSIZE", "5.5", false},
	{sys.IORING_SETUP_SUBMIT_ALL, "IORING_SETUP_SUBMIT_ALL", "5.18", true},
	{sys.IORING_SETUP_COOP_TASKRUN, "IORING_SETUP_COOP_TASKRUN", "5.19", true},
	{sys.IORING_SETUP_SQE128, "IORING_SETUP_SQE128", "5.19", false},
	{sys.IORING_SETUP_CQE32, "IORING_SETUP_CQE32", "5.19", false},
	{sys.IORING_SETUP_SINGLE_ISSUER, "IORING_SETUP_SINGLE_ISSUER", "6.0", true},
	{sys.IORING_SETUP_DEFER_TASKRUN, "IORING_SETUP_DEFER_TASKRUN", "6.1", true},
}

func (o *Options) setupFlags() uint32 {
	var f uint32
	if o.CQEntries != 0 {
		f |= sys.IORING_SETUP_CQSIZE
	}
	if o.SQE128 {
		f |= sys.IORING_SETUP_SQE128
	}
	if o.CQE32 {
		f |= sys.IORING_SETUP_CQE32
	}
	if o.SingleIssuer || o.DeferTaskrun {
		f |= sys.IORING_SETUP_SINGLE_ISSUER
	}
	if o.DeferTaskrun {
		f |= sys.IORING_SETUP_DEFER_TASKRUN
	}
	if o.CoopTaskrun {
		f |= sys.IORING_SETUP_COOP_TASKRUN
	}
	if o.SubmitAll {
		f |= sys.IORING_SETUP_SUBMIT_ALL
	}
	if o.SQPoll {
		f |= sys.IORING_SETUP_SQPOLL
	}
	if o.IOPoll {
		f |= sys.IORING_SETUP_IOPOLL
	}
	return f
}

// Setup creates a ring. A flag the kernel rejects yields a *NotSupportedError naming the
// flag and its minimum kernel (unless BestEffort drops it). With SingleIssuer or DeferTaskrun
// the calling goroutine must be locked to its OS thread (runtime.LockOSThread) for the life
// of the ring: the kernel binds the ring to the creating thread.
func Setup(opt Options) (*Ring, error) {
	if opt.Entries == 0 {
		opt.Entries = 64
	}
	flags := opt.setupFlags()
	for {
		r, err := setup(opt, flags)
		if err == nil {
			return r, nil
		}
		if !errors.Is(err, unix.EINVAL) || flags == 0 {
			if errors.Is(err, unix.ENOSYS) {
				return nil, &NotSupportedError{Feature: "io_uring", MinKernel: "5.1", Err: err}
			}
			return nil, fmt.Errorf("io_uring_setup(entries=%d flags=%#x): %w", opt.Entries, flags, err)
		}
		// Find which requested flag the kernel rejects by trying each alone.
		bad := diagnose(flags)
		if bad == nil {
			return nil, fmt.Errorf("io_uring_setup(entries=%d flags=%#x): %w", opt.Entries, flags, err)
		}
		if !opt.BestEffort || !bad.optional {
			return nil, &NotSupportedError{Feature: bad.name, MinKernel: bad.kernel, Err: err}
		}
		flags &^= bad.flag
		if bad.flag == sys.IORING_SETUP_SINGLE_ISSUER {
			flags &^= sys.IORING_SETUP_DEFER_TASKRUN
		}
	}
}

func diagnose(flags uint32) *flagDesc {
	for i := range flagInfo {
		fi := &flagInfo[i]
		if flags&fi.flag == 0 {
			continue
		}
		try := fi.flag
		switch fi.flag {
		case sys.IORING_SETUP_DEFER_TASKRUN:
			try |= sys.IORING_SETUP_SINGLE_ISSUER
		case sys.IORING_SETUP_SQPOLL, sys.IORING_SETUP_IOPOLL, sys.IORING_SETUP_CQSIZE:
			continue // old and accepted alone; EINVAL comes from a combination or a value
		}
		p := sys.IoUringParams{Flags: try}
		fd, err := sys.IoUringSetup(2, &p)
		if err == nil {
			unix.Close(fd)
			continue
		}
		if errors.Is(err, unix.EINVAL) {
			return fi
		}
	}
	return nil
}

func setup(opt Options, flags uint32) (*Ring, error) {
	p := sys.IoUringParams{Flags: flags, CQEntries: opt.CQEntries}
	if opt.SQPoll {
		idle := opt.SQPollIdle
		if idle == 0 {
			idle = time.Second
		}
		p.SQThreadIdle = uint32(idle / time.Millisecond)
	}
	fd, err := sys.IoUringSetup(opt.Entries, &p)
	if err != nil {
		return nil, err
	}
	r := &Ring{fd: fd, flags: flags, features: p.Features, params: p}
	if err := r.mmap(); err != nil {
		r.unmap()
		unix.Close(fd)
		return nil, err
	}
	r.probe, _ = r.loadProbe() // absent before 5.6: Supports then reports false for all but the basics
	return r, nil
}

func (r *Ring) mmap() error {
	p := &r.params
	r.sqeShift, r.cqeShift = 6, 4
	if r.flags&sys.IORING_SETUP_SQE128 != 0 {
		r.sqeShift = 7
	}
	if r.flags&sys.IORING_SETUP_CQE32 != 0 {
		r.cqeShift = 5
	}
	sqSize := int(p.SQOff.Array) + int(p.SQEntries)*4
	cqSize := int(p.CQOff.CQEs) + int(p.CQEntries)<<r.cqeShift
	single := p.Features&sys.IORING_FEAT_SINGLE_MMAP != 0
	if single {
		sqSize = max(sqSize, cqSize)
	}
	const prot = unix.PROT_READ | unix.PROT_WRITE
	const fl = unix.MAP_SHARED | unix.MAP_POPULATE
	var err error
	if r.sqMem, err = unix.Mmap(r.fd, sys.IORING_OFF_SQ_RING, sqSize, prot, fl); err != nil {
		return fmt.Errorf("io_uring: mmap SQ ring: %w", err)
	}
	if single {
		r.cqMem = r.sqMem
	} else if r.cqMem, err = unix.Mmap(r.fd, sys.IORING_OFF_CQ_RING, cqSize, prot, fl); err != nil {
		return fmt.Errorf("io_uring: mmap CQ ring: %w", err)
	}
	if r.sqeMem, err = unix.Mmap(r.fd, sys.IORING_OFF_SQES, int(p.SQEntries)<<r.sqeShift, prot, fl); err != nil {
		return fmt.Errorf("io_uring: mmap SQEs: %w", err)
	}
	sq := unsafe.Pointer(&r.sqMem[0])
	cq := unsafe.Pointer(&r.cqMem[0])
	u32 := func(base unsafe.Pointer, off uint32) *uint32 { return (*uint32)(unsafe.Add(base, off)) }
	r.sqHead, r.sqTail = u32(sq, p.SQOff.Head), u32(sq, p.SQOff.Tail)
	r.sqFlags, r.sqDropped = u32(sq, p.SQOff.Flags), u32(sq, p.SQOff.Dropped)
	r.sqMask, r.sqEntries = *u32(sq, p.SQOff.RingMask), *u32(sq, p.SQOff.RingEntries)
	r.cqHead, r.cqTail, r.cqOverflow = u32(cq, p.CQOff.Head), u32(cq, p.CQOff.Tail), u32(cq, p.CQOff.Overflow)
	r.cqMask, r.cqEntries = *u32(cq, p.CQOff.RingMask), *u32(cq, p.CQOff.RingEntries)
	if p.CQOff.Flags != 0 {
		r.cqFlags = u32(cq, p.CQOff.Flags)
	}
	r.cqes = unsafe.Add(cq, p.CQOff.CQEs)
	r.sqes = unsafe.Pointer(&r.sqeMem[0])
	// The SQ index array maps ring position i to SQE i once and for all, so SQEs are handed
	// out in ring order and the array never changes afterwards.
	arr := unsafe.Slice((*uint32)(unsafe.Add(sq, p.SQOff.Array)), r.sqEntries)
	for i := range arr {
		arr[i] = uint32(i)
	}
	r.sqeTail = atomic.LoadUint32(r.sqTail)
	return nil
}

func (r *Ring) unmap() {
	if r.sqeMem != nil {
		unix.Munmap(r.sqeMem)
	}
	if r.cqMem != nil && len(r.sqMem) > 0 && &r.cqMem[0] != &r.sqMem[0] {
		unix.Munmap(r.cqMem)
	}
	if r.sqMem != nil {
		unix.Munmap(r.sqMem)
	}
	r.sqMem, r.cqMem, r.sqeMem = nil, nil, nil
}

// Close unmaps the ring and closes its fd. In-flight operations are cancelled by the kernel;
// their buffers must stay valid until Close returns. Registered files and buffers are
// unregistered first: the kernel tears a closed ring down asynchronously, and until it does
// a registered file stays open (an O_EXCL claim on a block device would outlive Close).
func (r *Ring) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	sys.IoUringRegister(r.fd, sys.IORING_UNREGISTER_FILES, nil, 0)   // ENXIO when none
	sys.IoUringRegister(r.fd, sys.IORING_UNREGISTER_BUFFERS, nil, 0) // ENXIO when none
	r.unmap()
	return unix.Close(r.fd)
}

// Fd is the ring's file descriptor.
func (r *Ring) Fd() int { return r.fd }

// Flags are the IORING_SETUP_* flags in effect.
func (r *Ring) Flags() uint32 { return r.flags }

// Features are the IORING_FEAT_* bits the kernel reported.
func (r *Ring) Features() uint32 { return r.features }

// SQEntries and CQEntries are the ring sizes the kernel chose.
func (r *Ring) SQEntries() uint32 { return r.sqEntries }
func (r *Ring) CQEntries() uint32 { return r.cqEntries }

// Params is a copy of the io_uring_params the kernel returned.
func (r *Ring) Params() sys.IoUringParams { return r.params }
