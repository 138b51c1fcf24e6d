package sys

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// IoUringSetup is io_uring_setup(2). It returns the ring fd.
func IoUringSetup(entries uint32, p *IoUringParams) (int, error) {
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(p)), 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// IoUringEnter is io_uring_enter(2) without a signal mask. It may block until minComplete
// completions are available when IORING_ENTER_GETEVENTS is set.
func IoUringEnter(fd int, toSubmit, minComplete, flags uint32) (int, error) {
	n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(fd), uintptr(toSubmit), uintptr(minComplete), uintptr(flags), 0, 0)
	if errno != 0 {
		return int(n), errno
	}
	return int(n), nil
}

// IoUringRegister is io_uring_register(2).
func IoUringRegister(fd int, opcode uint32, arg unsafe.Pointer, nrArgs uint32) (int, error) {
	n, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(fd), uintptr(opcode), uintptr(arg), uintptr(nrArgs), 0, 0)
	if errno != 0 {
		return int(n), errno
	}
	return int(n), nil
}
