package resp

import (
	"context"
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

// Store is what the dispatcher needs of a cache. Key parses a client's key once per request
// (the Store's own key, its cache_salt, or why it does not take it); the other methods get
// the parsed Key and answer a key the Store does not take with an error wrapping ErrKey.
type Store interface {
	Key(raw []byte) Key
	Get(key Key) (val []byte, found bool, err error)
	// Set stores val under key; a key already stored keeps its value (a key names one
	// immutable chunk). A value larger than MaxValue is dropped by the dispatcher before
	// Set is called.
	Set(key Key, val []byte) error
	Exists(key Key) (bool, error)
	Delete(key Key) (bool, error)
	Len() int64
	// Scan returns the keys of up to count entries from cursor on (0 starts) and the cursor
	// of the next call (0 when the scan is complete), stopping early, with a cursor to go on
	// from, once the keys listed hold maxBytes or more (one key may take them past it); keys
	// may repeat or be missed across changes, as SCAN allows.
	Scan(cursor uint64, count, maxBytes int) (keys []string, next uint64)
	MaxValue() int64
	// Info is extra "name:value" lines for INFO's memory section; maxmemory_policy among
	// them names the store's eviction (absent: noeviction).
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
	Record func(op, client string, key Key, size int, hit bool, start time.Time, err error)
	// Values lends GET and MGET their value buffers when the Store is a ValueLoader
	// (values.go); nil: the store allocates each value.
	Values *ValuePool
	// RecordBatched is Record with the call's batch (docs/record.md): the keys of one MGET,
	// or the pairs of one MSET, of more than one key share a number no other call has; 0
	// for every other key. When set it is called instead of Record.
	RecordBatched func(op, client string, key Key, size int, hit bool, start time.Time, batch uint64, err error)
	// NextBatch, when set, numbers the batches instead of the server's own counter: a node
	// numbers the calls of all its front ends from one counter, so a batch number names
	// one call in its recording.
	NextBatch func() uint64

	clients  atomic.Int64
	commands atomic.Int64
	batches  atomic.Uint64 // numbers the batches (RecordBatched)
	nextID   atomic.Int64

	refused    atomic.Int64 // connections closed at accept (ConnLimits)
	evicted    atomic.Int64 // unauthenticated connections closed for a newcomer (admit.go)
	authFailed atomic.Int64
	authCut    atomic.Int64 // connections closed after MaxAuthFailures
	drops      dropCounters
	getErrs    atomic.Int64
	getLogged  atomic.Bool
	replyBytes atomic.Int64 // reply values loaded and not yet written, all connections
	connPeak   atomic.Int64 // the most one connection held at once (request + reply value)

	// Where found values' GETs spend their time (resp_get_*, docs/resp.md): how many, their
	// time in the server from the parsed request to the written reply, and the part of it
	// the reply's write took (for a value under directBulk: its copy into the reply buffer).
	getTimed, getNs, getWriteNs atomic.Int64
}

// session is one connection's state.
type session struct {
	id        int64
	name      string
	authed    bool
	quit      bool
	multi     bool        // after MULTI, until EXEC or DISCARD: every command is refused, not run (commands.go)
	token     *auth.Token // what AUTH presented (Server.Tokens)
	onAuth    func()      // told once the connection authenticates (admission)
	authFails int
	held      int64                 // bytes of the request being run (its kept arguments)
	client    string                // the peer's address
	start     time.Time             // when the request being run was read
	batch     uint64                // the batch of the MGET or MSET being run (RecordBatched); 0: none
	ctx       context.Context       // the connection's (ends a wait for a value buffer)
	alloc     func(size int) []byte // hands the store the buffer lent (values.go)
	lent      []byte                // the value buffer lent for the value being answered
	used      bool                  // whether alloc handed lent out
	req       request               // the request being run (dispatch)
}

func wrongArgs(cmd string) string {
	return "ERR wrong number of arguments for '" + strings.ToLower(cmd) + "' command"
}

// dispatch runs one request and writes its reply: the command's row of the table (commands.go)
// gives its arity, its key arguments (parsed once, Store.Key), the right a token needs and
// its handler.
func (s *Server) dispatch(ss *session, args [][]byte, r reply) {
	if len(args) == 0 {
		return
	}
	s.commands.Add(1)
	if s.recording() {
		ss.start = time.Now()
	}
	c, known := commandTable[string(args[0])] // no copy of the name to look it up
	name := c.name
	if !known {
		name = strings.ToUpper(string(args[0]))
		c, known = commandTable[name]
	}
	if s.authRequired() && !ss.authed && !c.preAuth {
		r.err("NOAUTH Authentication required.")
		return
	}
	if ss.multi && s.inMulti(ss, name, r) {
		return
	}
	if !known {
		r.err("ERR unknown command '" + printableArg(args[0]) + "', with args beginning with: " + argsBeginning(args[1:]))
		return
	}
	for i, a := range args { // a discarded argument (nil, longer than Limits.MaxKeep) is a value SET drops
		if a == nil && !((name == "SET" && i == 2) || (name == "MSET" && i > 0 && i%2 == 0)) {
			r.err(fmt.Sprintf("ERR argument %d is longer than the %d bytes a request may keep", i, s.Limits.withDefaults().MaxKeep))
			return
		}
	}
	if !c.arityOK(len(args)) {
		r.err(wrongArgs(name))
		return
	}
	q := &ss.req // reused by every request of the connection
	*q = request{name: name, args: args}
	defer func() { *q = request{} }() // nothing of the request is kept past it: its arguments go back to the budget
	if msg := s.permit(ss, c, q); msg != "" {
		r.err(msg)
		return
	}
	c.run(s, ss, q, r)
}

// set stores v under k or drops it (nil v: discarded by the reader as too long), counted by
// reason (drop.go); either way the SET is answered +OK.
func (s *Server) set(ss *session, k Key, v []byte) {
	var err error
	switch {
	case v == nil || int64(len(v)) > s.Store.MaxValue():
		err = drop(DropTooLarge, "a value larger than a slot's payload (%d bytes)", s.Store.MaxValue())
	default:
		err = s.Store.Set(k, v)
	}
	if err != nil {
		s.dropped(k.Raw, err)
	}
	s.record(ss, "set", k, len(v), err == nil, err)
}

func (s *Server) recording() bool { return s.Record != nil || s.RecordBatched != nil }

// record tells RecordBatched, else Record, of one key the request being run answered.
func (s *Server) record(ss *session, op string, k Key, size int, hit bool, err error) {
	switch {
	case s.RecordBatched != nil:
		s.RecordBatched(op, ss.client, k, size, hit, ss.start, ss.batch, err)
	case s.Record != nil:
		s.Record(op, ss.client, k, size, hit, ss.start, err)
	}
}

// batch numbers the call being run when it carries several keys and the server records.
func (s *Server) batch(ss *session, keys int) {
	if keys > 1 && s.recording() {
		if s.NextBatch != nil {
			ss.batch = s.NextBatch()
		} else {
			ss.batch = s.batches.Add(1)
		}
	}
}

// stopped says whether a command of many keys should stop before its next key: a reply
// write failed (the client is gone or reads nothing; writes are sticky no-ops now) or the
// connection's context ended (the server shuts down). The connection is closed after it, so
// a reply cut short is never followed by another.
func (s *Server) stopped(ss *session, r reply) bool {
	return r.w.err != nil || ss.ctx.Err() != nil
}

// getOne answers one key of GET or MGET: the value, or $-1 for a miss, a key the store does
// not take (it cannot exist) and a store error (counted as resp_get_failed: a cache that
// cannot read a value has not got it). The value is counted against the connection while it
// is written (Server.connPeak, resp_reply_bytes).
func (s *Server) getOne(ss *session, k Key, r reply) {
	defer s.giveBack(ss)
	t0 := time.Now()
	v, ok, err := s.get(ss, k)
	if err != nil && !errors.Is(err, ErrKey) {
		s.getFailed(k.Raw, err)
	}
	s.record(ss, "get", k, len(v), err == nil && ok, err)
	if err != nil || !ok {
		r.null()
		return
	}
	n := int64(len(v))
	s.replyBytes.Add(n)
	s.noteHeld(ss.held + n)
	t1 := time.Now()
	r.bulk(v)
	t2 := time.Now()
	s.replyBytes.Add(-n)
	s.getTimed.Add(1)
	s.getNs.Add(int64(t2.Sub(t0)))
	s.getWriteNs.Add(int64(t2.Sub(t1)))
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

// ScanCount and ScanBytes bound one SCAN call (docs/resp.md, "Bounds"): at most ScanCount
// entries visited whatever COUNT asks, and no more keys once those listed hold ScanBytes
// (one key may take them past it, by at most a key's 64 KiB); the cursor returned goes on
// from there. SCAN's contract allows fewer keys than COUNT, so a client that loops until
// the cursor is 0 lists every key; a reply is never built of all the node's keys (40
// connections each asking SCAN 0 COUNT 100000000 of 22,016 keys of 1,000 bytes, reading
// nothing, held ~15 MB each).
const (
	ScanCount = 1 << 16
	ScanBytes = 1 << 20
)

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
			count = min(c, ScanCount)
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
	keys, next := s.Store.Scan(cur, count, ScanBytes)
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
// absent, as a key that cannot exist); op is the record's name for them. Each key is parsed
// when its turn comes; the count stops (unanswered) once the connection's context ends.
func (s *Server) count(ss *session, op string, keys [][]byte, do func(Key) (bool, error), r reply) {
	var c int64
	for _, a := range keys {
		if ss.ctx.Err() != nil { // the server shuts down, or a reply write failed: the connection ends
			return
		}
		k := s.Store.Key(a)
		ok, err := do(k)
		s.record(ss, op, k, 0, ok, err)
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
