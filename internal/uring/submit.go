package uring

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/rbctl/rbctl/internal/sys"
	"golang.org/x/sys/unix"
)

// flush publishes the SQEs handed out so far (release store of the tail) and returns how
// many the kernel has not consumed yet.
func (r *Ring) flush() uint32 {
	atomic.StoreUint32(r.sqTail, r.sqeTail)
	return r.sqeTail - atomic.LoadUint32(r.sqHead)
}

// Submit hands every prepared SQE to the kernel in one io_uring_enter and returns how many
// it consumed. With SQPOLL it only wakes the poller when it sleeps.
func (r *Ring) Submit() (int, error) { return r.submit(0) }

// SubmitAndWait submits like Submit and then waits until at least waitNr completions are
// ready: one io_uring_enter for both, and more only if a signal cut its wait short (see
// waitRest).
func (r *Ring) SubmitAndWait(waitNr uint32) (int, error) { return r.submit(waitNr) }

// Wait blocks until at least n completions are ready, without submitting.
func (r *Ring) Wait(n uint32) error {
	if r.closed {
		return ErrClosed
	}
	if r.CQReady() >= n && !r.needsEnterForCQ() {
		return nil
	}
	_, err := r.enter(0, n, sys.IORING_ENTER_GETEVENTS)
	return err
}

func (r *Ring) needsEnterForCQ() bool {
	return r.flags&(sys.IORING_SETUP_IOPOLL|sys.IORING_SETUP_DEFER_TASKRUN) != 0 ||
		atomic.LoadUint32(r.sqFlags)&(sys.IORING_SQ_TASKRUN|sys.IORING_SQ_CQ_OVERFLOW) != 0
}

func (r *Ring) submit(waitNr uint32) (int, error) {
	if r.closed {
		return 0, ErrClosed
	}
	n := r.flush()
	var flags uint32
	if waitNr > 0 || r.needsEnterForCQ() {
		flags |= sys.IORING_ENTER_GETEVENTS
	}
	if r.flags&sys.IORING_SETUP_SQPOLL != 0 {
		// The poller consumes the SQ by itself; enter only to wake it or to wait.
		if atomic.LoadUint32(r.sqFlags)&sys.IORING_SQ_NEED_WAKEUP != 0 {
			flags |= sys.IORING_ENTER_SQ_WAKEUP
		}
		if flags == 0 {
			return int(n), nil
		}
		_, err := r.enter(0, waitNr, flags)
		if err != nil {
			return int(n), err
		}
		return int(n), r.waitRest(waitNr)
	}
	if n == 0 && flags == 0 {
		return 0, nil
	}
	got, err := r.enter(n, waitNr, flags)
	if err != nil {
		return got, err
	}
	return got, r.waitRest(waitNr)
}

// waitRest finishes a wait that io_uring_enter may have cut short: when an enter submits
// and its wait is then interrupted by a signal, the kernel returns the submitted count and
// drops the wait's -EINTR, so success does not mean n completions are ready.
func (r *Ring) waitRest(n uint32) error {
	for n > 0 && r.CQReady() < n {
		if _, err := r.enter(0, n, sys.IORING_ENTER_GETEVENTS); err != nil {
			return err
		}
	}
	return nil
}

// enter calls io_uring_enter, retrying EINTR (the Go runtime preempts with signals).
func (r *Ring) enter(toSubmit, minComplete, flags uint32) (int, error) {
	for {
		n, err := sys.IoUringEnter(r.fd, toSubmit, minComplete, flags)
		if err == nil {
			return n, nil
		}
		if errors.Is(err, unix.EINTR) {
			if n > 0 {
				toSubmit -= uint32(n)
			}
			continue
		}
		if errors.Is(err, unix.EEXIST) && r.flags&sys.IORING_SETUP_SINGLE_ISSUER != 0 {
			return n, fmt.Errorf("io_uring_enter: ring is SINGLE_ISSUER and this is not its thread (lock the owning goroutine with runtime.LockOSThread): %w", err)
		}
		return n, fmt.Errorf("io_uring_enter(submit=%d wait=%d flags=%#x): %w", toSubmit, minComplete, flags, err)
	}
}
