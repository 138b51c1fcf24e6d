// Package resp is a RESP2 (Redis serialization protocol) front-end for a cache node: the
// request parser (parse.go), the command dispatcher against a small Store interface
// (dispatch.go) and a connection loop with pipelining, bounded buffers and an idle timeout
// (conn.go). It is what LMCache's `resp` L2 adapter speaks (AUTH, SET, GET, EXISTS, DEL,
// one chunk per value) plus what redis-cli needs. The Store decides which keys it takes
// (the node maps LMCache's native-connector keys to its ObjectKeys, engine.FromNative);
// this package only moves bytes and never changes a key or a value. Not wired into
// `rbctl serve` yet (docs/resp.md).
package resp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Limits bounds what one request may hold; a request beyond them is a protocol error and
// the connection is closed (Redis does the same), so a client cannot make the server
// buffer more than MaxRequest bytes.
type Limits struct {
	MaxArgs    int   // arguments of one request (default 1<<16)
	MaxBulk    int64 // bytes of one argument (default 512 MiB, Redis's proto-max-bulk-len)
	MaxRequest int64 // bytes of all arguments of one request (default 2 × MaxBulk)
	MaxInline  int   // bytes of an inline command line (default 64 KiB)
}

func (l Limits) withDefaults() Limits {
	if l.MaxArgs <= 0 {
		l.MaxArgs = 1 << 16
	}
	if l.MaxBulk <= 0 {
		l.MaxBulk = 512 << 20
	}
	if l.MaxRequest <= 0 {
		l.MaxRequest = 2 * l.MaxBulk
	}
	if l.MaxInline <= 0 {
		l.MaxInline = 64 << 10
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
}

// NewReader reads requests from r within lim (zero fields take their defaults).
func NewReader(r io.Reader, lim Limits) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10), lim: lim.withDefaults()}
}

// Buffered is how many bytes of further requests are already read (pipelining: the reply
// is flushed only when nothing more is waiting).
func (rd *Reader) Buffered() int { return rd.r.Buffered() }

// Next reads one request: its arguments (an empty request, a blank inline line or "*0",
// gives none), io.EOF at a clean end of input, or an error wrapping ErrProtocol.
func (rd *Reader) Next() ([][]byte, error) {
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
	if n > int64(rd.lim.MaxArgs) {
		return nil, protoErr("invalid multibulk length")
	}
	args := make([][]byte, 0, min(n, 64))
	var total int64
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
		if l < 0 || l > rd.lim.MaxBulk {
			return nil, protoErr("invalid bulk length")
		}
		if total += l; total > rd.lim.MaxRequest {
			return nil, protoErr("request larger than %d bytes", rd.lim.MaxRequest)
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

// number reads a decimal integer ended by CRLF.
func (rd *Reader) number(what string) (int64, error) {
	line, err := rd.line(32)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(string(line), 10, 64)
	if err != nil {
		return 0, protoErr("invalid %s", what)
	}
	return v, nil
}

// line reads up to CRLF (or LF, as Redis accepts inline), at most max bytes.
func (rd *Reader) line(max int) ([]byte, error) {
	var out []byte
	for {
		frag, err := rd.r.ReadSlice('\n')
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
	}
	out = out[:len(out)-1]
	return bytes.TrimSuffix(out, []byte{'\r'}), nil
}

// inline reads a command typed on one line: arguments split by spaces, with Redis's quoting
// ("a b", 'c', \xHH and \n escapes in double quotes).
func (rd *Reader) inline() ([][]byte, error) {
	line, err := rd.line(rd.lim.MaxInline)
	if err != nil {
		return nil, err
	}
	args, err := splitInline(line)
	if err != nil {
		return nil, err
	}
	if len(args) > rd.lim.MaxArgs {
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
