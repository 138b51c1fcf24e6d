package uring

import (
	"sync/atomic"
	"unsafe"

	"github.com/rbctl/rbctl/internal/sys"
)

// CQE is a copy of one completion. With CQE32, Big holds big_cqe[0..1] (for NVMe
// passthrough: big_cqe[0] is the command's 64-bit result, CQE DW0 in the low half).
type CQE struct {
	UserData uint64
	Res      int32 // bytes transferred, 0/NVMe status for URING_CMD, or -errno
	Flags    uint32
	big      [2]uint64
}

// Big returns the two extra words of a 32-byte CQE (zero on a 16-byte CQE ring).
func (c CQE) Big() [2]uint64 { return c.big }

// Err is the errno of a negative Res, nil otherwise.
func (c CQE) Err() error { return errnoRes(c.Res) }

// CQReady is the number of completions waiting to be reaped.
func (r *Ring) CQReady() uint32 { return atomic.LoadUint32(r.cqTail) - atomic.LoadUint32(r.cqHead) }

// Reap copies up to len(dst) completions into dst, releases their slots to the kernel with
// one store, and returns how many it copied. It never enters the kernel: with DeferTaskrun,
// IOPoll or a pending task-run flag, completions appear only after SubmitAndWait or Wait.
func (r *Ring) Reap(dst []CQE) int {
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail) // acquire: entries up to tail are written
	n := int(tail - head)
	if n > len(dst) {
		n = len(dst)
	}
	big := r.cqeShift == 5
	for i := 0; i < n; i++ {
		p := unsafe.Add(r.cqes, uintptr((head+uint32(i))&r.cqMask)<<r.cqeShift)
		c := (*sys.CQE)(p)
		dst[i] = CQE{UserData: c.UserData, Res: c.Res, Flags: c.Flags}
		if big {
			dst[i].big = (*sys.CQE32)(p).Big
		}
	}
	if n > 0 {
		atomic.StoreUint32(r.cqHead, head+uint32(n)) // release: the kernel may reuse the slots
	}
	return n
}

// Overflow is the kernel's count of completions it could not post (0 with IORING_FEAT_NODROP
// unless memory ran out).
func (r *Ring) Overflow() uint32 { return atomic.LoadUint32(r.cqOverflow) }
