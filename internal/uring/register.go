package uring

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/rbctl/rbctl/internal/sys"
	"golang.org/x/sys/unix"
)

// RegisterBuffers registers bufs as fixed buffers 0..len(bufs)-1 (IORING_REGISTER_BUFFERS,
// 5.1). The kernel pins their pages; they must stay mapped until UnregisterBuffers or Close.
// Each buffer is at most 1 GiB; at most 16384 buffers.
func (r *Ring) RegisterBuffers(bufs [][]byte) error {
	if len(bufs) == 0 {
		return fmt.Errorf("io_uring: RegisterBuffers: no buffers")
	}
	iov := make([]sys.Iovec, len(bufs))
	for i, b := range bufs {
		if len(b) == 0 {
			return fmt.Errorf("io_uring: RegisterBuffers: buffer %d is empty", i)
		}
		iov[i] = sys.Iovec{Base: uintptr(unsafe.Pointer(unsafe.SliceData(b))), Len: uint64(len(b))}
	}
	_, err := sys.IoUringRegister(r.fd, sys.IORING_REGISTER_BUFFERS, unsafe.Pointer(&iov[0]), uint32(len(iov)))
	if err != nil {
		return fmt.Errorf("io_uring: register %d buffers: %w", len(bufs), err)
	}
	return nil
}

// UnregisterBuffers drops every registered buffer.
func (r *Ring) UnregisterBuffers() error {
	if _, err := sys.IoUringRegister(r.fd, sys.IORING_UNREGISTER_BUFFERS, nil, 0); err != nil {
		return fmt.Errorf("io_uring: unregister buffers: %w", err)
	}
	return nil
}

// RegisterFiles registers fds as fixed files 0..len(fds)-1; an SQE then names index i with
// SetFd(i) and SetFlags(sys.IOSQE_FIXED_FILE).
func (r *Ring) RegisterFiles(fds []int32) error {
	if len(fds) == 0 {
		return fmt.Errorf("io_uring: RegisterFiles: no files")
	}
	if _, err := sys.IoUringRegister(r.fd, sys.IORING_REGISTER_FILES, unsafe.Pointer(&fds[0]), uint32(len(fds))); err != nil {
		return fmt.Errorf("io_uring: register %d files: %w", len(fds), err)
	}
	return nil
}

// UnregisterFiles drops every registered file.
func (r *Ring) UnregisterFiles() error {
	if _, err := sys.IoUringRegister(r.fd, sys.IORING_UNREGISTER_FILES, nil, 0); err != nil {
		return fmt.Errorf("io_uring: unregister files: %w", err)
	}
	return nil
}

// RegisterEventfd has the kernel signal the eventfd fd when completions are posted and, on a
// DEFER_TASKRUN ring, when completion work is queued for the issuer to run (which it does in
// its next io_uring_enter with GETEVENTS) (IORING_REGISTER_EVENTFD, 5.1).
func (r *Ring) RegisterEventfd(fd int) error {
	v := int32(fd)
	if _, err := sys.IoUringRegister(r.fd, sys.IORING_REGISTER_EVENTFD, unsafe.Pointer(&v), 1); err != nil {
		return fmt.Errorf("io_uring: register eventfd: %w", err)
	}
	return nil
}

// SetEventfdSignals turns the registered eventfd's signals on or off
// (IORING_CQ_EVENTFD_DISABLED, 5.8); it reports false where the kernel has no such switch.
// Work queued while they are off is not signalled later: look at the ring after turning
// them on.
func (r *Ring) SetEventfdSignals(on bool) bool {
	if r.cqFlags == nil {
		return false
	}
	f := atomic.LoadUint32(r.cqFlags) &^ sys.IORING_CQ_EVENTFD_DISABLED
	if !on {
		f |= sys.IORING_CQ_EVENTFD_DISABLED
	}
	atomic.StoreUint32(r.cqFlags, f)
	return true
}

// Probe is the kernel's list of supported opcodes (IORING_REGISTER_PROBE, 5.6).
type Probe struct {
	LastOp uint8
	ops    [256]bool
}

// Supports reports whether the kernel implements opcode op.
func (p *Probe) Supports(op uint8) bool { return p != nil && p.ops[op] }

func (r *Ring) loadProbe() (*Probe, error) {
	const n = 256
	buf := make([]byte, unsafe.Sizeof(sys.ProbeHeader{})+n*unsafe.Sizeof(sys.ProbeOp{}))
	if _, err := sys.IoUringRegister(r.fd, sys.IORING_REGISTER_PROBE, unsafe.Pointer(&buf[0]), n); err != nil {
		return nil, err
	}
	h := (*sys.ProbeHeader)(unsafe.Pointer(&buf[0]))
	ops := unsafe.Slice((*sys.ProbeOp)(unsafe.Pointer(&buf[unsafe.Sizeof(*h)])), n)
	p := &Probe{LastOp: h.LastOp}
	for i := 0; i < int(h.OpsLen) && i < n; i++ {
		if ops[i].Flags&sys.IO_URING_OP_SUPPORTED != 0 {
			p.ops[ops[i].Op] = true
		}
	}
	return p, nil
}

// Probe is the opcode probe taken at Setup (nil before Linux 5.6).
func (r *Ring) Probe() *Probe { return r.probe }

// opKernel names the kernel that introduced the opcodes rbctl uses.
var opKernel = map[uint8]struct{ name, kernel string }{
	sys.IORING_OP_NOP:         {"IORING_OP_NOP", "5.1"},
	sys.IORING_OP_READV:       {"IORING_OP_READV", "5.1"},
	sys.IORING_OP_WRITEV:      {"IORING_OP_WRITEV", "5.1"},
	sys.IORING_OP_FSYNC:       {"IORING_OP_FSYNC", "5.1"},
	sys.IORING_OP_READ_FIXED:  {"IORING_OP_READ_FIXED", "5.1"},
	sys.IORING_OP_WRITE_FIXED: {"IORING_OP_WRITE_FIXED", "5.1"},
	sys.IORING_OP_READ:        {"IORING_OP_READ", "5.6"},
	sys.IORING_OP_WRITE:       {"IORING_OP_WRITE", "5.6"},
	sys.IORING_OP_URING_CMD:   {"IORING_OP_URING_CMD", "5.19"},
}

// RequireOp returns nil when the kernel implements op, else a *NotSupportedError naming the
// first kernel that does. Without a probe (before 5.6) only the 5.1 opcodes pass.
func (r *Ring) RequireOp(op uint8) error {
	if r.probe != nil {
		if r.probe.Supports(op) {
			return nil
		}
	} else if op <= sys.IORING_OP_WRITE_FIXED {
		return nil
	}
	k, ok := opKernel[op]
	if !ok {
		k.name, k.kernel = fmt.Sprintf("io_uring opcode %d", op), "unknown"
	}
	return &NotSupportedError{Feature: k.name, MinKernel: k.kernel, Err: unix.EOPNOTSUPP}
}
