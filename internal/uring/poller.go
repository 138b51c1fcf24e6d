package uring

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/rbctl/rbctl/internal/sys"
	"golang.org/x/sys/unix"
)

// The Executor's wait in the Go netpoller (see Executor.WaitsInPoller, docs/io_uring.md).

// pollOn registers a new eventfd with r and returns a netpoller handle on it (closing the
// file closes the eventfd), its signals off until waitInPoller turns them on.
func pollOn(r *Ring) (*os.File, syscall.RawConn, error) {
	cfd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, nil, err
	}
	f := os.NewFile(uintptr(cfd), "io_uring completions") // non-blocking: the netpoller takes it
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		f.Close() // not pollable
		return nil, nil, err
	}
	rc, err := f.SyscallConn()
	if err == nil {
		err = r.RegisterEventfd(cfd)
	}
	if err == nil {
		if err = signalsDeferredWork(r, cfd); err == nil && !r.SetEventfdSignals(false) {
			err = errors.New("io_uring executor: no IORING_CQ_EVENTFD_DISABLED")
		}
		if err != nil {
			sys.IoUringRegister(r.Fd(), sys.IORING_UNREGISTER_EVENTFD, nil, 0)
		}
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, rc, nil
}

// waitInPoller turns the registered eventfd's signals on, submits what is prepared and,
// unless completions are then ready, parks the goroutine in the netpoller until the kernel
// signals completion work or a caller writes that eventfd (see wake); then it runs the
// completion work so the CQ holds what finished. Work queued before the signals were on is
// run by the first io_uring_enter, and only the read that ends the park clears the eventfd:
// a signal left from an earlier wait only costs a turn of the loop.
func waitInPoller(r *Ring, rc syscall.RawConn) error {
	r.SetEventfdSignals(true)
	defer r.SetEventfdSignals(false)
	if _, err := r.SubmitAndWait(0); err != nil { // GETEVENTS: runs queued completion work
		return err
	}
	if r.CQReady() > 0 {
		return nil
	}
	var buf [8]byte
	if err := rc.Read(func(fd uintptr) bool {
		_, err := unix.Read(int(fd), buf[:])
		return err != unix.EAGAIN
	}); err != nil {
		return fmt.Errorf("io_uring executor: waiting on the eventfd: %w", err)
	}
	_, err := r.Submit()
	return err
}

// signalsDeferredWork checks that the kernel signals efd, registered with the DEFER_TASKRUN
// ring r, when completion work is queued for the issuer (Linux 6.2, and 6.1's stable
// updates): it submits a 1 µs timeout, which completes from a timer interrupt as block I/O
// does from the disk's, and waits up to a second for efd without entering the ring; then
// it reaps the timeout's completion. Without the signal the Executor would sleep through
// its completions, so it waits in the kernel instead. (A poll on a pipe written from this
// thread was signalled 15–20 ms late here: each Executor started that much later.)
//
// A kernel that did not signal once will not signal for the rest of the process: the verdict
// is kept (noDeferredSignal), so the Executors started after the first skip the second-long
// wait and go straight to waiting in the kernel.
func signalsDeferredWork(r *Ring, efd int) error {
	if noDeferredSignal.Load() {
		return errNoDeferredSignal
	}
	sqe, ok := r.GetSQE()
	if !ok {
		return errors.New("io_uring executor: no SQE for the eventfd probe")
	}
	ts := &unix.Timespec{Nsec: 1000}
	sqe.SetOpcode(sys.IORING_OP_TIMEOUT)
	sqe.SetAddr(uint64(uintptr(unsafe.Pointer(ts))))
	sqe.SetLen(1)
	sqe.SetUserData(wakeTag)
	_, err := r.Submit() // the kernel copies the timespec while it prepares the SQE
	runtime.KeepAlive(ts)
	if err != nil {
		return err
	}
	pfd := []unix.PollFd{{Fd: int32(efd), Events: unix.POLLIN}}
	n, perr := unix.Poll(pfd, 1000)
	for errors.Is(perr, unix.EINTR) {
		n, perr = unix.Poll(pfd, 1000)
	}
	if err := r.Wait(1); err != nil { // the timeout expires: its completion is certain
		return err
	}
	var c [1]CQE
	if n := r.Reap(c[:]); n != 1 || c[0].UserData != wakeTag || c[0].Res != -int32(unix.ETIME) {
		return fmt.Errorf("io_uring executor: the eventfd probe's timeout completed as %d CQEs, res %d", n, c[0].Res)
	}
	var buf [8]byte
	unix.Read(efd, buf[:])
	if perr != nil {
		return perr
	}
	if n == 0 {
		noDeferredSignal.Store(true)
		return errNoDeferredSignal
	}
	return nil
}

var (
	errNoDeferredSignal = errors.New("io_uring executor: the kernel does not signal a registered eventfd for deferred completion work")
	// noDeferredSignal: a probe of this process found that the kernel does not signal.
	noDeferredSignal atomic.Bool
)
