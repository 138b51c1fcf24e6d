package resp

import (
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawWriter writes a connection's large replies with writev system calls made without
// telling the Go scheduler (RawSyscall). A write to a non-blocking socket never sleeps: it
// copies what fits in the socket's buffer and returns, CPU work like any other. Go's own
// writev enters a system call that the runtime's monitor treats as blocking once it lasts
// 20 µs (a 256 KiB copy takes longer), handing the P to another thread and taking it back
// after: thread switches on every large GET. When the socket is full, the writer waits in
// the netpoller as net.Buffers does, under the connection's write deadline.
type rawWriter struct {
	rc   syscall.RawConn
	iov  [4]unix.Iovec
	rest [][]byte
	err  error
	full int                   // times a write found the socket full and waited
	fn   func(fd uintptr) bool // w.write, made once: a method value per call allocates
}

// newRawWriter returns a writer for c, or nil when c is not a socket it can write this way
// (TLS, a wrapped connection): its replies then go through net.Buffers.
func newRawWriter(c net.Conn) *rawWriter {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	w := &rawWriter{rc: rc}
	w.fn = w.write
	return w
}

// writev writes every byte of bufs (which it may reslice) or returns why it could not.
func (w *rawWriter) writev(bufs [][]byte) error {
	w.rest, w.err = bufs, nil
	err := w.rc.Write(w.fn)
	w.rest = nil
	w.iov = [4]unix.Iovec{}
	if w.err != nil {
		return &net.OpError{Op: "write", Net: "tcp", Err: w.err}
	}
	return err
}

// write is the RawConn callback: false asks to be called again once the socket can take more.
func (w *rawWriter) write(fd uintptr) bool {
	for {
		n := 0
		for _, b := range w.rest {
			if n == len(w.iov) {
				break
			}
			if len(b) > 0 {
				w.iov[n].Base = &b[0]
				w.iov[n].SetLen(len(b))
				n++
			}
		}
		if n == 0 {
			return true
		}
		r, _, errno := unix.RawSyscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&w.iov[0])), uintptr(n))
		switch {
		case errno == 0 && r > 0:
			w.rest = advance(w.rest, int(r))
		case errno == 0 || errno == unix.EAGAIN: // nothing taken (a socket never says 0 otherwise): wait
			w.full++
			return false
		case errno == unix.EINTR:
		default:
			w.err = errno
			return true
		}
	}
}

// advance drops the first n bytes of bufs.
func advance(bufs [][]byte, n int) [][]byte {
	for len(bufs) > 0 && n >= len(bufs[0]) {
		n -= len(bufs[0])
		bufs = bufs[1:]
	}
	if len(bufs) > 0 {
		bufs[0] = bufs[0][n:]
	}
	return bufs
}
