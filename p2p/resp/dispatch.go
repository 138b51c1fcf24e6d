package resp

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rbctl/rbctl/p2p/auth"
)

// Store is what the dispatcher needs of a cache. Keys are passed as the client sent them;
// the Store maps them to its own keys and refuses the ones it does not take (an error
// wrapping ErrKey is answered "-ERR ..." and changes nothing).
type Store interface {
	Get(key []byte) (val []byte, found bool, err error)
	// Set stores val under key (replacing an older value). A value larger than MaxValue is
	// refused by the dispatcher before Set is called.
	Set(key, val []byte) error
	Exists(key []byte) (bool, error)
	Delete(key []byte) (bool, error)
	Len() int64
	// Scan returns up to count keys from cursor on (0 starts) and the cursor of the next
	// call (0 when the scan is complete); keys may repeat or be missed across changes, as
	// SCAN allows.
	Scan(cursor uint64, count int) (keys []string, next uint64)
	MaxValue() int64
	// Info is extra "name:value" lines for INFO's keyspace and memory sections.
	Info() map[string]string
}

// ErrKey: the Store does not take the key (its shape is not one it maps).
var ErrKey = errors.New("key refused")

// Auth checks AUTH [username] password; nil means no authentication (AUTH is then an error,
// as Redis answers without requirepass).
type Auth func(user, password string) bool

// Server holds what every connection shares.
type Server struct {
	Store  Store
	Auth   Auth
	Tokens *auth.Tokens // tenant-scoped tokens as AUTH passwords (acl.go); nil: Auth's choice
	Limits Limits       // per request (parse.go)
	Conns  ConnLimits   // admission, AUTH deadline and failures (admit.go)
	// Budget bounds the request bytes of all connections together (nil: only
	// Limits.MaxRequest per connection); a connection that holds part of a request waits for
	// it at most BudgetWait (default 10 s).
	Budget     *Budget
	BudgetWait time.Duration
	Logger     *slog.Logger // the first SET dropped for each reason, the first failed GET; nil: none
	// AuthFailed, when set, is told of every failed AUTH (the node's auth_failed counter).
	AuthFailed func()
	Version    string // reported by INFO and HELLO
	// Record, when set, is told of every key a GET, MGET, SET, MSET, EXISTS, DEL or UNLINK
	// answered (serve --record): the command's op (get, set, exists, delete), the client's
	// address, the key, the bytes stored or returned, whether it was there (get, exists,
	// delete) or kept (set), when the request arrived and the store's error.
	Record func(op, client string, key []byte, size int, hit bool, start time.Time, err error)

	clients  atomic.Int64
	commands atomic.Int64
	nextID   atomic.Int64

	refused    atomic.Int64 // connections closed at accept (ConnLimits)
	authFailed atomic.Int64
	authCut    atomic.Int64 // connections closed after MaxAuthFailures
	drops      dropCounters
	getErrs    atomic.Int64
	getLogged  atomic.Bool
	replyBytes atomic.Int64 // reply values loaded and not yet written, all connections
	connPeak   atomic.Int64 // the most one connection held at once (request + reply value)
}

// session is one connection's state.
type session struct {
	id        int64
	name      string
	authed    bool
	quit      bool
	token     *auth.Token // what AUTH presented (Server.Tokens)
	onAuth    func()      // told once the connection authenticates (admission)
	authFails int
	held      int64     // bytes of the request being run (its kept arguments)
	client    string    // the peer's address
	start     time.Time // when the request being run was read
}

// reply writes RESP2 replies.
type reply struct{ w *bufio.Writer }

func (r reply) ok()                 { r.w.WriteString("+OK\r\n") }
func (r reply) simple(s string)     { r.w.WriteString("+" + s + "\r\n") }
func (r reply) err(s string)        { r.w.WriteString("-" + oneLine(s) + "\r\n") }
func (r reply) int(n int64)         { r.w.WriteString(":" + strconv.FormatInt(n, 10) + "\r\n") }
func (r reply) null()               { r.w.WriteString("$-1\r\n") }
func (r reply) array(n int)         { r.w.WriteString("*" + strconv.Itoa(n) + "\r\n") }
func (r reply) bulkString(s string) { r.bulk([]byte(s)) }
func (r reply) bulk(b []byte) {
	r.w.WriteString("$" + strconv.Itoa(len(b)) + "\r\n")
	r.w.Write(b)
	r.w.WriteString("\r\n")
}

// oneLine keeps an error on one line (a CR or LF would end the reply early).
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
}

func wrongArgs(cmd string) string {
	return "ERR wrong number of arguments for '" + strings.ToLower(cmd) + "' command"
}

// dispatch runs one request and writes its reply.
func (s *Server) dispatch(ss *session, args [][]byte, r reply) {
	if len(args) == 0 {
		return
	}
	s.commands.Add(1)
	if s.Record != nil {
		ss.start = time.Now()
	}
	cmd := strings.ToUpper(string(args[0]))
	n := len(args) - 1
	if s.authRequired() && !ss.authed && cmd != "AUTH" && cmd != "HELLO" && cmd != "QUIT" {
		r.err("NOAUTH Authentication required.")
		return
	}
	if msg := s.permit(ss, cmd, args); msg != "" {
		r.err(msg)
		return
	}
	for i, a := range args { // a discarded argument (nil, longer than Limits.MaxKeep) is a value SET drops
		if a == nil && !((cmd == "SET" && i == 2) || (cmd == "MSET" && i > 0 && i%2 == 0)) {
			r.err(fmt.Sprintf("ERR argument %d is longer than the %d bytes a request may keep", i, s.Limits.withDefaults().MaxKeep))
			return
		}
	}
	switch cmd {
	case "PING":
		switch n {
		case 0:
			r.simple("PONG")
		case 1:
			r.bulk(args[1])
		default:
			r.err(wrongArgs(cmd))
		}
	case "ECHO":
		if n != 1 {
			r.err(wrongArgs(cmd))
			return
		}
		r.bulk(args[1])
	case "QUIT":
		ss.quit = true
		r.ok()
	case "AUTH":
		s.auth(ss, args[1:], r)
	case "HELLO":
		s.hello(ss, args[1:], r)
	case "SELECT":
		if n != 1 {
			r.err(wrongArgs(cmd))
		} else if string(args[1]) != "0" {
			r.err("ERR DB index is out of range")
		} else {
			r.ok()
		}
	case "GET":
		if n != 1 {
			r.err(wrongArgs(cmd))
			return
		}
		s.getOne(ss, args[1], r)
	case "SET":
		if n < 2 {
			r.err(wrongArgs(cmd))
			return
		}
		if n > 2 {
			r.err("ERR SET options (" + strings.ToUpper(string(args[3])) + ") are not supported; plain SET key value only")
			return
		}
		s.set(ss, args[1], args[2])
		r.ok()
	case "MSET": // each pair as a SET: what the store does not keep is dropped and counted
		if n < 2 || n%2 != 0 {
			r.err(wrongArgs(cmd))
			return
		}
		for i := 1; i < len(args); i += 2 {
			s.set(ss, args[i], args[i+1])
		}
		r.ok()
	case "MGET": // streamed: one value loaded and written at a time, never the whole reply
		if n < 1 {
			r.err(wrongArgs(cmd))
			return
		}
		r.array(n)
		for _, k := range args[1:] {
			s.getOne(ss, k, r)
		}
	case "EXISTS":
		s.count(ss, cmd, args[1:], s.Store.Exists, r)
	case "DEL", "UNLINK":
		s.count(ss, cmd, args[1:], s.Store.Delete, r)
	case "STRLEN":
		if n != 1 {
			r.err(wrongArgs(cmd))
			return
		}
		v, ok, err := s.Store.Get(args[1])
		if err != nil && !errors.Is(err, ErrKey) {
			r.err(storeErr(err))
			return
		}
		if !ok {
			r.int(0)
			return
		}
		r.int(int64(len(v)))
	case "TYPE":
		if n != 1 {
			r.err(wrongArgs(cmd))
			return
		}
		ok, err := s.Store.Exists(args[1])
		if err != nil && !errors.Is(err, ErrKey) {
			r.err(storeErr(err))
			return
		}
		if ok {
			r.simple("string")
		} else {
			r.simple("none")
		}
	case "DBSIZE":
		if n != 0 {
			r.err(wrongArgs(cmd))
			return
		}
		r.int(s.Store.Len())
	case "SCAN":
		s.scan(args[1:], r)
	case "INFO":
		s.info(args[1:], r)
	case "CLIENT":
		s.client(ss, args[1:], r)
	case "COMMAND":
		s.command(args[1:], r)
	case "CONFIG": // redis-benchmark asks CONFIG GET save / appendonly: no settings to show
		if n >= 2 && strings.EqualFold(string(args[1]), "GET") {
			r.array(0)
		} else {
			r.err("ERR CONFIG is read-only here; only CONFIG GET (answered empty)")
		}
	default:
		r.err("ERR unknown command '" + printableArg(args[0]) + "', with args beginning with: " + argsBeginning(args[1:]))
	}
}

// set stores v under k or drops it (nil v: discarded by the reader as too long), counted by
// reason (drop.go); either way the SET is answered +OK.
func (s *Server) set(ss *session, k, v []byte) {
	var err error
	switch {
	case v == nil || int64(len(v)) > s.Store.MaxValue():
		err = drop(DropTooLarge, "a value larger than a slot's payload (%d bytes)", s.Store.MaxValue())
	default:
		err = s.Store.Set(k, v)
	}
	if err != nil {
		s.dropped(k, err)
	}
	if s.Record != nil {
		s.Record("set", ss.client, k, len(v), err == nil, ss.start, err)
	}
}

// getOne answers one key of GET or MGET: the value, or $-1 for a miss, a key the store does
// not take (it cannot exist) and a store error (counted as resp_get_failed: a cache that
// cannot read a value has not got it). The value is counted against the connection while it
// is written (Server.connPeak, resp_reply_bytes).
func (s *Server) getOne(ss *session, k []byte, r reply) {
	v, ok, err := s.Store.Get(k)
	if err != nil && !errors.Is(err, ErrKey) {
		s.getFailed(k, err)
	}
	if s.Record != nil {
		s.Record("get", ss.client, k, len(v), err == nil && ok, ss.start, err)
	}
	if err != nil || !ok {
		r.null()
		return
	}
	n := int64(len(v))
	s.replyBytes.Add(n)
	s.noteHeld(ss.held + n)
	r.bulk(v)
	s.replyBytes.Add(-n)
}

// noteHeld records what a connection holds now (its request's kept arguments, plus a reply
// value while one is written) in the per-connection peak.
func (s *Server) noteHeld(now int64) {
	for {
		p := s.connPeak.Load()
		if now <= p || s.connPeak.CompareAndSwap(p, now) {
			return
		}
	}
}

// storeErr is the reply text of a Store error ("ERR ..." unless it already has a code).
func storeErr(err error) string {
	m := err.Error()
	if strings.HasPrefix(m, "ERR ") {
		return m
	}
	return "ERR " + m
}

// argsBeginning quotes the first arguments of an unknown command as Redis does in its
// error, each as 'arg' and a space, until 128 characters are out.
func argsBeginning(args [][]byte) string {
	var sb strings.Builder
	for _, a := range args {
		if sb.Len() >= 128 {
			break
		}
		p := printableArg(a)
		sb.WriteString("'" + p[:min(len(p), 128-sb.Len())] + "' ")
	}
	return sb.String()
}

func printableArg(b []byte) string {
	var sb strings.Builder
	for _, c := range b[:min(len(b), 128)] {
		if c < 0x20 || c >= 0x7f || c == '\'' {
			sb.WriteString(fmt.Sprintf("\\x%02x", c))
		} else {
			sb.WriteByte(c)
		}
	}
	return sb.String()
}

func (s *Server) version() string {
	if s.Version == "" {
		return "0"
	}
	return s.Version
}

// scan answers SCAN cursor [MATCH pattern] [COUNT n] [TYPE string].
func (s *Server) scan(a [][]byte, r reply) {
	if len(a) < 1 {
		r.err(wrongArgs("SCAN"))
		return
	}
	cur, err := strconv.ParseUint(string(a[0]), 10, 64)
	if err != nil {
		r.err("ERR invalid cursor")
		return
	}
	count, match, typ := 10, "", ""
	for i := 1; i < len(a); i += 2 {
		if i+1 >= len(a) {
			r.err("ERR syntax error")
			return
		}
		switch strings.ToUpper(string(a[i])) {
		case "COUNT":
			c, err := strconv.Atoi(string(a[i+1]))
			if err != nil || c < 1 {
				r.err("ERR value is not an integer or out of range")
				return
			}
			count = min(c, 1<<16)
		case "MATCH":
			match = string(a[i+1])
			if _, err := path.Match(match, ""); err != nil {
				r.err("ERR invalid MATCH pattern")
				return
			}
		case "TYPE":
			typ = strings.ToLower(string(a[i+1]))
		default:
			r.err("ERR syntax error")
			return
		}
	}
	keys, next := s.Store.Scan(cur, count)
	out := keys[:0:0]
	if typ == "" || typ == "string" {
		for _, k := range keys {
			if ok, _ := globMatch(match, k); match == "" || ok {
				out = append(out, k)
			}
		}
	}
	r.array(2)
	r.bulkString(strconv.FormatUint(next, 10))
	r.array(len(out))
	for _, k := range out {
		r.bulkString(k)
	}
}

// globMatch is Redis's glob (*, ?, [..], \ escapes) over the whole key, '/' not special.
func globMatch(pattern, s string) (bool, error) {
	// path.Match treats '/' as a separator; keys hold '/', so match segment-free by mapping
	// '/' to a byte patterns cannot name.
	const sub = "\x00"
	return path.Match(strings.ReplaceAll(pattern, "/", sub), strings.ReplaceAll(s, "/", sub))
}

// count answers EXISTS and DEL: how many of keys op says yes to (a refused key counts as
// absent, as a key that cannot exist).
func (s *Server) count(ss *session, cmd string, keys [][]byte, op func([]byte) (bool, error), r reply) {
	if len(keys) < 1 {
		r.err(wrongArgs(cmd))
		return
	}
	var c int64
	for _, k := range keys {
		ok, err := op(k)
		if s.Record != nil {
			name := "exists"
			if cmd != "EXISTS" {
				name = "delete"
			}
			s.Record(name, ss.client, k, 0, ok, ss.start, err)
		}
		if err != nil && !errors.Is(err, ErrKey) {
			r.err(storeErr(err))
			return
		}
		if ok {
			c++
		}
	}
	r.int(c)
}
