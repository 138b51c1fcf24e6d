package resp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"sort"
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
	held      int64 // bytes of the request being run (its kept arguments)
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
		s.set(args[1], args[2])
		r.ok()
	case "MSET": // each pair as a SET: what the store does not keep is dropped and counted
		if n < 2 || n%2 != 0 {
			r.err(wrongArgs(cmd))
			return
		}
		for i := 1; i < len(args); i += 2 {
			s.set(args[i], args[i+1])
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
		s.count(cmd, args[1:], s.Store.Exists, r)
	case "DEL", "UNLINK":
		s.count(cmd, args[1:], s.Store.Delete, r)
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
func (s *Server) set(k, v []byte) {
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

func (s *Server) auth(ss *session, a [][]byte, r reply) {
	var user, pass string
	switch len(a) {
	case 1:
		user, pass = "default", string(a[0])
	case 2:
		user, pass = string(a[0]), string(a[1])
	default:
		r.err(wrongArgs("AUTH"))
		return
	}
	if !s.authRequired() {
		r.err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
		return
	}
	if !s.login(ss, user, pass) {
		s.wrongPass(ss, r)
		return
	}
	s.authenticated(ss)
	r.ok()
}

// wrongPass answers a failed AUTH: counted (auth_failed), answered after
// Conns.AuthFailDelay, and the connection closed after Conns.MaxAuthFailures of them, so one
// connection cannot try passwords at the speed of the network.
func (s *Server) wrongPass(ss *session, r reply) {
	lim := s.Conns.withDefaults()
	s.authFailed.Add(1)
	if s.AuthFailed != nil {
		s.AuthFailed()
	}
	if lim.AuthFailDelay > 0 {
		time.Sleep(lim.AuthFailDelay)
	}
	r.err("WRONGPASS invalid username-password pair or user is disabled.")
	if ss.authFails++; ss.authFails >= lim.MaxAuthFailures {
		s.authCut.Add(1)
		ss.quit = true
	}
}

func (s *Server) authenticated(ss *session) {
	if !ss.authed && ss.onAuth != nil {
		ss.onAuth()
	}
	ss.authed = true
}

// MaxClientName bounds a connection's name (CLIENT SETNAME, HELLO SETNAME).
const MaxClientName = 256

// clientName checks a name as Redis does (no spaces, newlines or other characters outside
// '!'..'~'), and its length; "" is the reply text for a good one.
func clientName(b []byte) string {
	if len(b) > MaxClientName {
		return fmt.Sprintf("ERR Client names are limited to %d bytes.", MaxClientName)
	}
	for _, c := range b {
		if c < '!' || c > '~' {
			return "ERR Client names cannot contain spaces, newlines or special characters."
		}
	}
	return ""
}

// hello answers HELLO [2 [AUTH user pass] [SETNAME name]]; protocol 3 is refused, as a
// RESP2-only server does.
func (s *Server) hello(ss *session, a [][]byte, r reply) {
	if len(a) > 0 {
		v, err := strconv.Atoi(string(a[0]))
		if err != nil {
			r.err("ERR Protocol version is not an integer or out of range")
			return
		}
		if v != 2 {
			r.err("NOPROTO unsupported protocol version")
			return
		}
		for i := 1; i < len(a); i++ {
			switch strings.ToUpper(string(a[i])) {
			case "AUTH":
				if i+2 >= len(a) {
					r.err("ERR Syntax error in HELLO option 'auth'")
					return
				}
				if !s.login(ss, string(a[i+1]), string(a[i+2])) {
					s.wrongPass(ss, r)
					return
				}
				s.authenticated(ss)
				i += 2
			case "SETNAME":
				if i+1 >= len(a) {
					r.err("ERR Syntax error in HELLO option 'setname'")
					return
				}
				if msg := clientName(a[i+1]); msg != "" {
					r.err(msg)
					return
				}
				ss.name = string(a[i+1])
				i++
			default:
				r.err("ERR Syntax error in HELLO option '" + printableArg(a[i]) + "'")
				return
			}
		}
	}
	if s.authRequired() && !ss.authed {
		r.err("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return
	}
	fields := []string{"server", "rbctl", "version", s.version(), "proto", "2", "id", strconv.FormatInt(ss.id, 10), "mode", "standalone", "role", "master"}
	r.array(len(fields) + 2)
	for i, f := range fields {
		if i == 5 || i == 7 {
			n, _ := strconv.ParseInt(f, 10, 64)
			r.int(n)
		} else {
			r.bulkString(f)
		}
	}
	r.bulkString("modules")
	r.array(0)
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

func (s *Server) info(a [][]byte, r reply) {
	want := map[string]bool{}
	for _, x := range a {
		want[strings.ToLower(string(x))] = true
	}
	all := len(want) == 0 || want["all"] || want["everything"] || want["default"]
	var b bytes.Buffer
	section := func(name string, lines ...string) {
		if !all && !want[strings.ToLower(name)] {
			return
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# " + name + "\r\n")
		for _, l := range lines {
			b.WriteString(l + "\r\n")
		}
	}
	extra := s.Store.Info()
	var mem []string
	for _, k := range sortedKeys(extra) {
		mem = append(mem, k+":"+extra[k])
	}
	section("Server", "redis_version:7.0.0", "rbctl_version:"+s.version(), "redis_mode:standalone", "resp_protocols:2")
	section("Clients", "connected_clients:"+strconv.FormatInt(s.clients.Load(), 10))
	section("Memory", append([]string{"maxmemory_policy:noeviction"}, mem...)...)
	st := s.Stats()
	stats := []string{"total_commands_processed:" + strconv.FormatInt(s.commands.Load(), 10),
		"rejected_connections:" + strconv.FormatInt(st["resp_conns_refused"], 10)}
	for _, k := range sortedKeys64(st) {
		if k != "resp_conns_refused" {
			stats = append(stats, "rbctl_"+strings.ReplaceAll(k, "/", "_")+":"+strconv.FormatInt(st[k], 10))
		}
	}
	section("Stats", stats...)
	section("Keyspace", fmt.Sprintf("db0:keys=%d,expires=0,avg_ttl=0", s.Store.Len()))
	r.bulk(b.Bytes())
}

func sortedKeys64(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Stats are the server's counters, named as the node's stats show them (docs/resp.md):
// resp_set_dropped/REASON per drop reason, resp_auth_failed, resp_conns (open now), ...
func (s *Server) Stats() map[string]int64 {
	m := map[string]int64{
		"resp_conns": s.clients.Load(), "resp_conns_refused": s.refused.Load(),
		"resp_auth_failed": s.authFailed.Load(), "resp_auth_cut": s.authCut.Load(),
		"resp_get_failed": s.getErrs.Load(), "resp_reply_bytes": s.replyBytes.Load(),
		"resp_conn_peak_bytes": s.connPeak.Load(),
	}
	for i, r := range DropReasons {
		m["resp_set_dropped/"+r] = s.drops.n[i].Load()
	}
	if s.Budget != nil {
		b := s.Budget.Stats()
		m["resp_request_bytes"], m["resp_request_peak_bytes"] = b.Used, b.Peak
		m["resp_budget_waits"], m["resp_budget_timeouts"] = b.Waits, b.Timeouts
	}
	return m
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (s *Server) client(ss *session, a [][]byte, r reply) {
	if len(a) == 0 {
		r.err(wrongArgs("CLIENT"))
		return
	}
	switch strings.ToUpper(string(a[0])) {
	case "SETNAME":
		if len(a) != 2 {
			r.err(wrongArgs("CLIENT|SETNAME"))
			return
		}
		if msg := clientName(a[1]); msg != "" {
			r.err(msg)
			return
		}
		ss.name = string(a[1])
		r.ok()
	case "GETNAME":
		if ss.name == "" {
			r.null()
		} else {
			r.bulkString(ss.name)
		}
	case "ID":
		r.int(ss.id)
	case "INFO":
		r.bulkString(fmt.Sprintf("id=%d name=%s db=0 resp=2\n", ss.id, ss.name))
	case "SETINFO":
		r.ok()
	default:
		r.err("ERR unknown subcommand '" + printableArg(a[0]) + "'. Try CLIENT HELP.")
	}
}

// command answers COMMAND, COMMAND COUNT and COMMAND DOCS with what redis-cli needs: an
// empty DOCS map (redis-cli then has no hints) and the command count.
func (s *Server) command(a [][]byte, r reply) {
	if len(a) == 0 {
		r.array(0)
		return
	}
	switch strings.ToUpper(string(a[0])) {
	case "COUNT":
		r.int(int64(len(commands)))
	case "DOCS", "INFO", "LIST":
		r.array(0)
	default:
		r.err("ERR unknown subcommand '" + printableArg(a[0]) + "'. Try COMMAND HELP.")
	}
}

var commands = []string{"AUTH", "CLIENT", "COMMAND", "CONFIG", "DBSIZE", "DEL", "ECHO", "EXISTS", "GET", "HELLO", "INFO", "MGET", "MSET",
	"PING", "QUIT", "SCAN", "SELECT", "SET", "STRLEN", "TYPE", "UNLINK"}

// count answers EXISTS and DEL: how many of keys op says yes to (a refused key counts as
// absent, as a key that cannot exist).
func (s *Server) count(cmd string, keys [][]byte, op func([]byte) (bool, error), r reply) {
	if len(keys) < 1 {
		r.err(wrongArgs(cmd))
		return
	}
	var c int64
	for _, k := range keys {
		ok, err := op(k)
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
