package resp

import (
	"net"
	"strconv"
	"strings"
	"time"
)

// directBulk is the length from which a bulk reply's bytes go to the socket from where they
// are (a GET's value from its load buffer) instead of being copied into the reply buffer.
const directBulk = 16 << 10

// replyWriter is a connection's reply side. Small replies gather in buf and go out in one
// write when the connection flushes (when no further request is buffered: a pipelined batch
// is one write). A bulk of directBulk bytes or more goes out at once in one writev
// (net.Buffers): the pending replies and its header, its bytes from the caller's memory,
// its CRLF — never copied into buf, and written before the call returns, so a GET's value
// buffer is given back right after. Errors are sticky, as bufio.Writer's: after one, writes
// do nothing and Flush returns it.
type replyWriter struct {
	c       net.Conn // the socket itself (an admitted connection unwrapped: writev needs it)
	timeout time.Duration
	armed   time.Time // when the write deadline was last set
	buf     []byte
	vec     [3][]byte
	bufs    net.Buffers
	err     error
	failed  func()     // called once, when a write first fails (ends the connection's context)
	raw     *rawWriter // large replies' writev (nil: through net.Buffers)
}

const replyBufBytes = 64 << 10

var crlf = []byte("\r\n")

func newReplyWriter(c net.Conn, timeout time.Duration) *replyWriter {
	if ac, ok := c.(*admitConn); ok {
		c = ac.Conn
	}
	return &replyWriter{c: c, timeout: timeout, buf: make([]byte, 0, replyBufBytes), raw: newRawWriter(c)}
}

// arm gives the write about to start timeout to make progress: a slow reader is served, one
// that stopped reading is cut (ConnLimits.WriteTimeout). The deadline is moved at most once
// per sixteenth of it (each move takes the runtime's timer locks), so every write has at
// least 15/16 of the timeout.
func (w *replyWriter) arm() {
	now := time.Now()
	if now.Sub(w.armed) > w.timeout/16 {
		w.c.SetWriteDeadline(now.Add(w.timeout))
		w.armed = now
	}
}

// Flush writes the pending replies.
func (w *replyWriter) Flush() error {
	if w.err != nil || len(w.buf) == 0 {
		return w.err
	}
	w.arm()
	_, err := w.c.Write(w.buf)
	w.buf = w.buf[:0]
	w.fail(err)
	return w.err
}

// fail makes err (when not nil) the writer's sticky error and tells failed.
func (w *replyWriter) fail(err error) {
	if err == nil || w.err != nil {
		return
	}
	w.err = err
	if w.failed != nil {
		w.failed()
	}
}

// Buffered is the length of the pending replies.
func (w *replyWriter) Buffered() int { return len(w.buf) }

func (w *replyWriter) room(n int) {
	if len(w.buf)+n > cap(w.buf) {
		w.Flush()
	}
}

func (w *replyWriter) str(s string) {
	if w.err != nil {
		return
	}
	w.room(len(s))
	w.buf = append(w.buf, s...)
}

// head appends a reply's type byte, n and CRLF.
func (w *replyWriter) head(c byte, n int64) {
	if w.err != nil {
		return
	}
	w.room(24)
	w.buf = append(w.buf, c)
	w.buf = strconv.AppendInt(w.buf, n, 10)
	w.buf = append(w.buf, '\r', '\n')
}

// bulk writes b as a bulk string: copied into buf when short, else in one writev from b.
func (w *replyWriter) bulk(b []byte) {
	w.head('$', int64(len(b)))
	if w.err != nil {
		return
	}
	if len(b) < directBulk {
		w.room(len(b) + 2)
		w.buf = append(w.buf, b...)
		w.buf = append(w.buf, '\r', '\n')
		return
	}
	w.direct(b)
}

// direct writes the pending replies, b and a CRLF in one writev.
func (w *replyWriter) direct(b []byte) {
	w.vec = [3][]byte{w.buf, b, crlf}
	w.bufs = w.vec[:]
	w.arm()
	var err error
	if w.raw != nil {
		err = w.raw.writev(w.bufs)
	} else {
		_, err = w.bufs.WriteTo(w.c)
	}
	w.fail(err)
	w.vec = [3][]byte{}
	w.buf = w.buf[:0]
}

// reply writes RESP2 replies.
type reply struct{ w *replyWriter }

func (r reply) ok()                 { r.w.str("+OK\r\n") }
func (r reply) simple(s string)     { r.w.str("+" + s + "\r\n") }
func (r reply) err(s string)        { r.w.str("-" + oneLine(s) + "\r\n") }
func (r reply) int(n int64)         { r.w.head(':', n) }
func (r reply) null()               { r.w.str("$-1\r\n") }
func (r reply) array(n int)         { r.w.head('*', int64(n)) }
func (r reply) bulkString(s string) { r.bulk([]byte(s)) }
func (r reply) bulk(b []byte)       { r.w.bulk(b) }

// oneLine keeps an error on one line (a CR or LF would end the reply early).
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
}
