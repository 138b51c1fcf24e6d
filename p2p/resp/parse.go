// Package resp is a RESP2 (Redis serialization protocol) front-end for a cache node: the
// request parser (parse.go), the command dispatcher against a small Store interface
// (dispatch.go), the connection loop with pipelining (conn.go), connection admission
// (admit.go), the request-memory budget (budget.go) and what a SET the store does not keep
// is answered (drop.go). It is what LMCache's `resp` L2 adapter speaks (AUTH, SET, GET,
// EXISTS, DEL, one chunk per value) plus what redis-cli needs. The Store decides which keys
// it takes (the node maps LMCache's native-connector keys to its ObjectKeys,
// engine.FromNative); this package only moves bytes and never changes a key or a value.
// `rbctl serve --resp` serves a node through it (p2p/node/resp.go, docs/resp.md).
package resp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Limits bounds what one request may hold. A request beyond MaxArgs, MaxBulk, MaxRequest or
// MaxInline (or, before AUTH, PreAuthArgs and PreAuthBulk) is a protocol error and the
// connection is closed, as Redis does. An argument longer than MaxKeep but within MaxBulk is
// read and discarded, never buffered, and passed on as nil (a SET of it is answered as a
// value too large to keep, dispatch.go).
type Limits struct {
	MaxArgs    int   // arguments of one request (default 1<<16)
	MaxBulk    int64 // bytes of one argument (default 512 MiB, Redis's proto-max-bulk-len)
	MaxKeep    int64 // bytes of one argument kept in memory; longer ones are discarded (default MaxBulk)
	MaxRequest int64 // bytes of the kept arguments of one request: a connection's request budget (default 2 × MaxKeep)
	MaxInline  int   // bytes of an inline command line (default 64 KiB)
	// Before AUTH, when the server checks it (Redis ≥ 6.2.6 does the same): at most
	// PreAuthArgs arguments (default 10) of at most PreAuthBulk bytes each (default 16 KiB;
	// an inline line too).
	PreAuthArgs int
	PreAuthBulk int64
}

func (l Limits) withDefaults() Limits {
	if l.MaxArgs <= 0 {
		l.MaxArgs = 1 << 16
	}
	if l.MaxBulk <= 0 {
		l.MaxBulk = 512 << 20
	}
	if l.MaxKeep <= 0 || l.MaxKeep > l.MaxBulk {
		l.MaxKeep = l.MaxBulk
	}
	if l.MaxRequest <= 0 {
		l.MaxRequest = 2 * l.MaxKeep
	}
	if l.MaxInline <= 0 {
		l.MaxInline = 64 << 10
	}
	if l.PreAuthArgs <= 0 {
		l.PreAuthArgs = 10
	}
	if l.PreAuthBulk <= 0 {
		l.PreAuthBulk = 16 << 10
	}
	return l
}

// ErrProtocol is a malformed or oversized request: the reply is "-ERR Protocol error: ..."
// and the connection ends, as in Redis.
var ErrProtocol = errors.New("Protocol error")

func protoErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, a...))
}

// Reader reads requests: RESP arrays of bulk strings ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"), as
// every client library sends them, or inline commands ("PING\r\n"), as a terminal does.
type Reader struct {
	r   *bufio.Reader
	lim Limits

	// PreAuth applies the pre-AUTH bounds (the connection loop sets it until AUTH succeeds).
	PreAuth bool
	// Budget, when set, is the server-wide bound every kept argument is taken from (waiting,
	// without reading further, while it is full) until Release; Ctx ends such a wait and
	// BudgetWait bounds it once part of the request is held (ErrBusy).
	Budget     *Budget
	Ctx        context.Context
	BudgetWait time.Duration

	held    int64      // bytes of the current request's kept arguments
	charged int64      // what the current request took from Budget: held plus argOverhead per argument
	args    [][]byte   // the last request's argument array, reused by the next (at most 64)
	lent    []*bulkBuf // the buffers its values were read into (bulkpool.go), given back by Release
}

// argOverhead is what one argument of a request holds besides its bytes, which the server's
// Budget is charged with it: its slice header in the request's array (24 bytes) and the
// rounding of its allocation with its CRLF. Limits.MaxRequest counts the arguments' bytes
// alone, as documented (an MGET of ~1 MiB of keys), but the bytes of all connections
// together stay within the budget however small the arguments (65,536 one-byte keys hold 2
// MiB, not 64 KiB).
const argOverhead = 32

// NewReader reads requests from r within lim (zero fields take their defaults).
func NewReader(r io.Reader, lim Limits) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10), lim: lim.withDefaults(), Ctx: context.Background()}
}

// Buffered is how many bytes of further requests are already read (pipelining: the reply
// is flushed only when nothing more is waiting).
func (rd *Reader) Buffered() int { return rd.r.Buffered() }

// Held is how many bytes the arguments of the last request hold until Release.
func (rd *Reader) Held() int64 { return rd.held }

// Release gives the last request's bytes back to the budget and its lent buffers back to
// their pool (its arguments must no longer be used).
func (rd *Reader) Release() {
	if rd.Budget != nil {
		rd.Budget.release(rd.charged)
	}
	rd.held, rd.charged = 0, 0
	clear(rd.args[:cap(rd.args)]) // the array is kept; what it pointed at is not
	for i, bb := range rd.lent {
		returnBulk(bb)
		rd.lent[i] = nil
	}
	rd.lent = rd.lent[:0]
}

// Next reads one request: its arguments (an empty request, a blank inline line or "*0",
// gives none; an argument past MaxKeep is nil), io.EOF at a clean end of input, or an error
// wrapping ErrProtocol (or ErrBusy). It releases the previous request's bytes first; the
// array of arguments is reused by the next request, and so are the bytes of a SET's or
// MSET's values of pooledBulk bytes or more (lent buffers): nothing of a request may be
// used after the next Next or Release.
func (rd *Reader) Next() ([][]byte, error) {
	rd.Release()
	c, err := rd.r.ReadByte()
	if err != nil {
		return nil, err
	}
	if c != '*' {
		rd.r.UnreadByte()
		return rd.inline()
	}
	n, err := rd.number("multibulk length")
	if err != nil {
		return nil, err
	}
	if n <= 0 { // *0 and *-1: nothing to run
		return nil, nil
	}
	if rd.PreAuth && n > int64(rd.lim.PreAuthArgs) {
		return nil, protoErr("unauthenticated multibulk length")
	}
	if n > int64(rd.lim.MaxArgs) {
		return nil, protoErr("invalid multibulk length")
	}
	args := rd.args[:0] // Next's arguments are the caller's until the next Next or Release
	if cap(args) < int(min(n, 64)) {
		args = make([][]byte, 0, min(n, 64))
	}
	if cap(args) <= 64 {
		rd.args = args
	}
	for range n {
		c, err := rd.r.ReadByte()
		if err != nil {
			return nil, eof(err)
		}
		if c != '$' {
			return nil, protoErr("expected '$', got '%s'", printable(c))
		}
		l, err := rd.number("bulk length")
		if err != nil {
			return nil, err
		}
		if rd.PreAuth && l > rd.lim.PreAuthBulk {
			return nil, protoErr("unauthenticated bulk length")
		}
		if l < 0 || l > rd.lim.MaxBulk {
			return nil, protoErr("invalid bulk length")
		}
		if l > rd.lim.MaxKeep {
			if err := rd.take(0, 0); err != nil { // its place in args
				return nil, err
			}
			if err := rd.discard(l); err != nil {
				return nil, err
			}
			args = append(args, nil)
			continue
		}
		if l >= pooledBulk && len(args) > 0 && valueArg(args[0], len(args)) {
			_, size := bulkClass(l)
			if err := rd.take(l, size-l); err != nil {
				return nil, err
			}
			bb := lendBulk(l)
			rd.lent = append(rd.lent, bb)
			if _, err := io.ReadFull(rd.r, bb.b); err != nil {
				return nil, eof(err)
			}
			var crlf [2]byte
			if _, err := io.ReadFull(rd.r, crlf[:]); err != nil {
				return nil, eof(err)
			}
			if crlf != [2]byte{'\r', '\n'} {
				return nil, protoErr("bulk string not terminated by CRLF")
			}
			args = append(args, bb.b[:l:l])
			continue
		}
		if err := rd.take(l, 0); err != nil {
			return nil, err
		}
		b := make([]byte, l+2)
		if _, err := io.ReadFull(rd.r, b); err != nil {
			return nil, eof(err)
		}
		if b[l] != '\r' || b[l+1] != '\n' {
			return nil, protoErr("bulk string not terminated by CRLF")
		}
		args = append(args, b[:l:l])
	}
	return args, nil
}

// take accounts one more argument of l bytes of the current request: its bytes within
// MaxRequest, and they, slack (what its lent buffer holds past them) and argOverhead from
// the budget (waiting, without reading, while it is full).
func (rd *Reader) take(l, slack int64) error {
	if rd.held+l > rd.lim.MaxRequest {
		return protoErr("request larger than %d bytes", rd.lim.MaxRequest)
	}
	if rd.Budget != nil {
		wait := time.Duration(0)
		if rd.charged > 0 {
			wait = rd.BudgetWait
		}
		if err := rd.Budget.acquire(rd.Ctx, l+slack+argOverhead, wait); err != nil {
			return err
		}
		rd.charged += l + slack + argOverhead
	}
	rd.held += l
	return nil
}

// discard reads an l-byte bulk and its CRLF without keeping it.
func (rd *Reader) discard(l int64) error {
	if _, err := io.CopyN(io.Discard, rd.r, l); err != nil {
		return eof(err)
	}
	var crlf [2]byte
	if _, err := io.ReadFull(rd.r, crlf[:]); err != nil {
		return eof(err)
	}
	if crlf != [2]byte{'\r', '\n'} {
		return protoErr("bulk string not terminated by CRLF")
	}
	return nil
}

// number reads a decimal integer ended by CRLF, spelled as Redis's string2ll takes it: an
// optional '-' and digits without a leading zero ("0" alone), nothing else ("+4", " 4",
// "04" are protocol errors).
func (rd *Reader) number(what string) (int64, error) {
	line, err := rd.line(32)
	if err != nil {
		return 0, err
	}
	v, ok := strictInt(line)
	if !ok {
		return 0, protoErr("invalid %s", what)
	}
	return v, nil
}

func strictInt(b []byte) (int64, bool) {
	digits := b
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || (digits[0] == '0' && len(b) > 1) {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	return v, err == nil
}

// line reads up to CRLF (or LF, as Redis accepts inline), at most max bytes. The line may
// be the reader's buffer, valid until the next read: callers parse it or copy it.
func (rd *Reader) line(max int) ([]byte, error) {
	frag, err := rd.r.ReadSlice('\n')
	if err == nil && len(frag) <= max+2 { // the whole line was buffered: no copy
		return bytes.TrimSuffix(frag[:len(frag)-1], []byte{'\r'}), nil
	}
	var out []byte
	for {
		out = append(out, frag...)
		if len(out) > max+2 {
			return nil, protoErr("line longer than %d bytes", max)
		}
		if err == nil {
			break
		}
		if err != bufio.ErrBufferFull {
			return nil, eof(err)
		}
		frag, err = rd.r.ReadSlice('\n')
	}
	out = out[:len(out)-1]
	return bytes.TrimSuffix(out, []byte{'\r'}), nil
}

// inline reads a command typed on one line: arguments split by spaces, with Redis's quoting
// ("a b", 'c', \xHH and \n escapes in double quotes).
func (rd *Reader) inline() ([][]byte, error) {
	max := rd.lim.MaxInline
	if rd.PreAuth {
		max = min(max, int(rd.lim.PreAuthBulk))
	}
	line, err := rd.line(max)
	if err != nil {
		return nil, err
	}
	args, err := splitInline(line)
	if err != nil {
		return nil, err
	}
	if len(args) > rd.lim.MaxArgs || (rd.PreAuth && len(args) > rd.lim.PreAuthArgs) {
		return nil, protoErr("too many arguments")
	}
	return args, nil
}

func splitInline(line []byte) ([][]byte, error) {
	var args [][]byte
	i := 0
	for {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		if i == len(line) {
			return args, nil
		}
		var cur []byte
		switch q := line[i]; q {
		case '"', '\'':
			i++
			closed := false
			for i < len(line) {
				c := line[i]
				if c == q {
					closed = true
					i++
					break
				}
				if q == '"' && c == '\\' && i+1 < len(line) {
					i++
					switch e := line[i]; e {
					case 'n':
						c = '\n'
					case 'r':
						c = '\r'
					case 't':
						c = '\t'
					case 'x':
						if i+2 < len(line) {
							if v, err := strconv.ParseUint(string(line[i+1:i+3]), 16, 8); err == nil {
								c = byte(v)
								i += 2
								break
							}
						}
						c = 'x'
					default:
						c = e
					}
				} else if q == '\'' && c == '\\' && i+1 < len(line) && line[i+1] == '\'' {
					i++
					c = '\''
				}
				cur = append(cur, c)
				i++
			}
			if !closed || (i < len(line) && line[i] != ' ' && line[i] != '\t') {
				return nil, protoErr("unbalanced quotes in request")
			}
		default:
			for i < len(line) && line[i] != ' ' && line[i] != '\t' {
				cur = append(cur, line[i])
				i++
			}
		}
		if cur == nil {
			cur = []byte{}
		}
		args = append(args, cur)
	}
}

func eof(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func printable(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return string(c)
	}
	return fmt.Sprintf("\\x%02x", c)
}
