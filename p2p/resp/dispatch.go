package resp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

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
	Store   Store
	Auth    Auth
	Tokens  *auth.Tokens // tenant-scoped tokens as AUTH passwords (acl.go); nil: Auth's choice
	Limits  Limits
	Version string // reported by INFO and HELLO

	clients  atomic.Int64
	commands atomic.Int64
	nextID   atomic.Int64
}

// session is one connection's state.
type session struct {
	id     int64
	name   string
	authed bool
	quit   bool
	token  *auth.Token // what AUTH presented (Server.Tokens)
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
		v, ok, err := s.Store.Get(args[1])
		switch {
		case err != nil:
			r.err(storeErr(err))
		case !ok:
			r.null()
		default:
			r.bulk(v)
		}
	case "SET":
		if n < 2 {
			r.err(wrongArgs(cmd))
			return
		}
		if n > 2 {
			r.err("ERR SET options (" + strings.ToUpper(string(args[3])) + ") are not supported; plain SET key value only")
			return
		}
		if err := s.set(args[1], args[2]); err != nil {
			r.err(storeErr(err))
			return
		}
		r.ok()
	case "MSET":
		if n < 2 || n%2 != 0 {
			r.err(wrongArgs(cmd))
			return
		}
		for i := 1; i < len(args); i += 2 { // check every value first: all or nothing refused
			if int64(len(args[i+1])) > s.Store.MaxValue() {
				r.err(tooLarge(len(args[i+1]), s.Store.MaxValue()))
				return
			}
		}
		for i := 1; i < len(args); i += 2 {
			if err := s.set(args[i], args[i+1]); err != nil {
				r.err(storeErr(err))
				return
			}
		}
		r.ok()
	case "MGET":
		if n < 1 {
			r.err(wrongArgs(cmd))
			return
		}
		vals := make([][]byte, n)
		for i, k := range args[1:] {
			v, ok, err := s.Store.Get(k)
			if err == nil && ok {
				vals[i] = v
			}
		}
		r.array(n)
		for _, v := range vals {
			if v == nil {
				r.null()
			} else {
				r.bulk(v)
			}
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

func (s *Server) set(k, v []byte) error {
	if int64(len(v)) > s.Store.MaxValue() {
		return errors.New(tooLarge(len(v), s.Store.MaxValue()))
	}
	return s.Store.Set(k, v)
}

func tooLarge(n int, max int64) string {
	return fmt.Sprintf("ERR value of %d bytes is larger than a slot's payload (%d bytes); nothing stored", n, max)
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
		r.err("WRONGPASS invalid username-password pair or user is disabled.")
		return
	}
	ss.authed = true
	r.ok()
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
					r.err("WRONGPASS invalid username-password pair or user is disabled.")
					return
				}
				ss.authed = true
				i += 2
			case "SETNAME":
				if i+1 >= len(a) {
					r.err("ERR Syntax error in HELLO option 'setname'")
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
	section("Stats", "total_commands_processed:"+strconv.FormatInt(s.commands.Load(), 10))
	section("Keyspace", fmt.Sprintf("db0:keys=%d,expires=0,avg_ttl=0", s.Store.Len()))
	r.bulk(b.Bytes())
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
		if len(a) != 2 || bytes.ContainsAny(a[1], " \r\n") {
			r.err("ERR Client names cannot contain spaces, newlines or special characters.")
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
