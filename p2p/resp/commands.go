package resp

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/p2p/auth"
)

// The command table: one row per command says its arity, the right a token needs, which
// arguments are keys and what runs it. The dispatcher, the access check (permit) and
// COMMAND COUNT are derived from it, so a command is added in one place. A key argument is
// parsed (Store.Key) when the command comes to it, one key at a time, and handed to the
// Store parsed: a request of 65,536 keys holds its arguments' bytes (which the request budget
// counts), never 65,536 parsed Keys at once (each a few hundred bytes: its engine key, its
// cache_salt, the refusal's error).

// Key is a client's key as the Store parsed it, when the command comes to it.
type Key struct {
	Raw    []byte     // as the client sent it
	Engine engine.Key // what it maps to in a raw-block cache (EngineStore, NodeStore)
	Salt   string     // its cache_salt: the tenant a token's salts are checked against
	Err    error      // why the Store does not take it (wraps ErrKey); nil when it does
}

// keySpec says which arguments of a command are keys.
type keySpec uint8

const (
	keysNone  keySpec = iota
	keysFirst         // args[1]
	keysAll           // args[1:]
	keysPairs         // args[1], args[3], ... (MSET's key-value pairs)
)

// request is one command; its key arguments are parsed one at a time as it runs.
type request struct {
	name  string   // upper case
	args  [][]byte // args[0] is the command
	first *Key     // args[1] as the access check parsed it (with tokens), so it is parsed once
}

// key is the request's key argument i, parsed: the one the access check parsed when it is
// the first, else parsed now.
func (s *Server) key(q *request, i int) Key {
	if i == 1 && q.first != nil {
		return *q.first
	}
	return s.Store.Key(q.args[i])
}

// command is one row of the table.
type command struct {
	// arity counts the command's name, as Redis's COMMAND does: n exactly n arguments, -n
	// at least n.
	arity int
	// right a token needs on every key's cache_salt (auth.Read, Write, Delete), or
	// auth.Admin for a command that shows every tenant's keys; 0: none.
	right auth.Right
	keys  keySpec
	run   func(s *Server, ss *session, q *request, r reply)
	// preAuth: the command runs before the connection authenticates (AUTH, HELLO, QUIT).
	preAuth bool
	name    string // its key in the table (set by init)
}

var commandTable map[string]command

func init() {
	commandTable = map[string]command{
		"PING": {arity: -1, run: func(s *Server, ss *session, q *request, r reply) {
			switch len(q.args) {
			case 1:
				r.simple("PONG")
			case 2:
				r.bulk(q.args[1])
			default:
				r.err(wrongArgs(q.name))
			}
		}},
		"ECHO":   {arity: 2, run: func(s *Server, ss *session, q *request, r reply) { r.bulk(q.args[1]) }},
		"QUIT":   {arity: 1, preAuth: true, run: func(s *Server, ss *session, q *request, r reply) { ss.quit = true; r.ok() }},
		"AUTH":   {arity: -2, preAuth: true, run: func(s *Server, ss *session, q *request, r reply) { s.auth(ss, q.args[1:], r) }},
		"HELLO":  {arity: -1, preAuth: true, run: func(s *Server, ss *session, q *request, r reply) { s.hello(ss, q.args[1:], r) }},
		"SELECT": {arity: 2, run: cmdSelect},
		"GET": {arity: 2, right: auth.Read, keys: keysFirst, run: func(s *Server, ss *session, q *request, r reply) {
			s.getOne(ss, s.key(q, 1), r)
		}},
		"SET":  {arity: -3, right: auth.Write, keys: keysFirst, run: cmdSet},
		"MSET": {arity: -3, right: auth.Write, keys: keysPairs, run: cmdMSet},
		"MGET": {arity: -2, right: auth.Read, keys: keysAll, run: func(s *Server, ss *session, q *request, r reply) {
			keys := q.args[1:]
			r.array(len(keys)) // streamed: one key parsed, one value loaded and written at a time
			s.batch(ss, len(keys))
			defer func() { ss.batch = 0 }()
			for _, a := range keys {
				if s.stopped(ss, r) { // the client is gone, or the server shuts down: the connection ends
					return
				}
				s.getOne(ss, s.Store.Key(a), r)
			}
		}},
		"EXISTS": {arity: -2, right: auth.Read, keys: keysAll, run: func(s *Server, ss *session, q *request, r reply) {
			s.count(ss, "exists", q.args[1:], s.Store.Exists, r)
		}},
		"DEL": {arity: -2, right: auth.Delete, keys: keysAll, run: func(s *Server, ss *session, q *request, r reply) {
			s.count(ss, "delete", q.args[1:], s.Store.Delete, r)
		}},
		// Transactions are not run (their commands are not queued): MULTI is refused, and every
		// command after it is refused unrun until EXEC (answered EXECABORT) or DISCARD, as
		// Redis answers a transaction whose commands could not be queued (inMulti).
		"MULTI": {arity: 1, run: func(s *Server, ss *session, q *request, r reply) {
			ss.multi = true
			r.err(errMulti)
		}},
		"EXEC":    {arity: 1, run: func(s *Server, ss *session, q *request, r reply) { r.err("ERR EXEC without MULTI") }},
		"DISCARD": {arity: 1, run: func(s *Server, ss *session, q *request, r reply) { r.err("ERR DISCARD without MULTI") }},
		"STRLEN":  {arity: 2, right: auth.Read, keys: keysFirst, run: cmdStrlen},
		"TYPE":    {arity: 2, right: auth.Read, keys: keysFirst, run: cmdType},
		"DBSIZE":  {arity: 1, right: auth.Admin, run: func(s *Server, ss *session, q *request, r reply) { r.int(s.Store.Len()) }},
		"SCAN":    {arity: -2, right: auth.Admin, run: func(s *Server, ss *session, q *request, r reply) { s.scan(q.args[1:], r) }},
		"INFO":    {arity: -1, right: auth.Admin, run: func(s *Server, ss *session, q *request, r reply) { s.info(q.args[1:], r) }},
		"CLIENT":  {arity: -2, run: func(s *Server, ss *session, q *request, r reply) { s.client(ss, q.args[1:], r) }},
		"COMMAND": {arity: -1, run: func(s *Server, ss *session, q *request, r reply) { s.command(q.args[1:], r) }},
		"CONFIG": {arity: -2, run: func(s *Server, ss *session, q *request, r reply) {
			if len(q.args) >= 3 && strings.EqualFold(string(q.args[1]), "GET") {
				r.array(0) // redis-benchmark asks CONFIG GET save / appendonly: no settings
			} else {
				r.err("ERR CONFIG is read-only here; only CONFIG GET (answered empty)")
			}
		}},
	}
	commandTable["UNLINK"] = commandTable["DEL"]
	for name, c := range commandTable {
		c.name = name
		commandTable[name] = c
	}
}

// errMulti answers MULTI: transactions are not supported, and the commands that follow are
// refused (errNotRun) until EXEC or DISCARD, so a client that sends MULTI ... EXEC in one go
// (redis-py's default pipeline) is told the batch failed and nothing of it was applied.
const (
	errMulti  = "ERR MULTI is not supported: transactions are not run here; every command until EXEC or DISCARD is refused, not run"
	errNotRun = "ERR MULTI is not supported: command not run"
)

// inMulti answers a request that follows MULTI (ss.multi), as Redis answers the rest of a
// transaction one of whose commands could not be queued: EXEC ends it with EXECABORT,
// DISCARD with +OK, a nested MULTI is an error, QUIT runs, and any other command is refused
// without running. It returns false when the request is to run (QUIT).
func (s *Server) inMulti(ss *session, name string, r reply) bool {
	switch name {
	case "EXEC":
		ss.multi = false
		r.err("EXECABORT Transaction discarded because of previous errors.")
	case "DISCARD":
		ss.multi = false
		r.ok()
	case "MULTI":
		r.err("ERR MULTI calls can not be nested")
	case "QUIT":
		return false
	default:
		r.err(errNotRun)
	}
	return true
}

// arityOK checks n arguments (the name included) against a command's arity.
func (c command) arityOK(n int) bool {
	if c.arity >= 0 {
		return n == c.arity
	}
	return n >= -c.arity
}

// keyArgs returns where the keys of args are: from the first on, every step-th (none when
// first is past args).
func (c command) keyArgs(args [][]byte) (first, step int) {
	switch c.keys {
	case keysFirst:
		return 1, len(args)
	case keysAll:
		return 1, 1
	case keysPairs:
		return 1, 2
	}
	return len(args), 1
}

// permit returns the NOPERM reply for a request the session's token does not cover, or "".
func (s *Server) permit(ss *session, c command, q *request) string {
	if s.Tokens == nil || ss.token == nil || c.right == 0 {
		return ""
	}
	if c.right == auth.Admin {
		if !ss.token.Allows(auth.Admin, "") {
			return fmt.Sprintf("NOPERM token %s has no permissions to run the '%s' command (it needs admin)", ss.token.Name, strings.ToLower(q.name))
		}
		return ""
	}
	for i, step := c.keyArgs(q.args); i < len(q.args); i += step { // parsed one at a time, not kept
		k := s.Store.Key(q.args[i])
		if i == 1 {
			q.first = &k
		}
		if !ss.token.Allows(c.right, k.Salt) {
			return fmt.Sprintf("NOPERM token %s has no %s right on cache_salt %q", ss.token.Name, c.right, k.Salt)
		}
	}
	return ""
}

func cmdSelect(s *Server, ss *session, q *request, r reply) {
	if string(q.args[1]) != "0" {
		r.err("ERR DB index is out of range")
		return
	}
	r.ok()
}

func cmdSet(s *Server, ss *session, q *request, r reply) {
	if len(q.args) > 3 {
		r.err("ERR SET options (" + strings.ToUpper(string(q.args[3])) + ") are not supported; plain SET key value only")
		return
	}
	s.set(ss, s.key(q, 1), q.args[2])
	r.ok()
}

// cmdMSet stores each pair as a SET: what the store does not keep is dropped and counted.
func cmdMSet(s *Server, ss *session, q *request, r reply) {
	if len(q.args)%2 != 1 {
		r.err(wrongArgs(q.name))
		return
	}
	s.batch(ss, len(q.args)/2)
	defer func() { ss.batch = 0 }()
	for i := 1; i < len(q.args); i += 2 {
		if ss.ctx.Err() != nil { // the server shuts down (or the client is gone): no +OK will be read
			return
		}
		s.set(ss, s.Store.Key(q.args[i]), q.args[i+1])
	}
	r.ok()
}

// cmdStrlen loads the value as GET does, into a buffer the value pool lends (Server.get):
// STRLENs on many connections hold no more memory than as many GETs.
func cmdStrlen(s *Server, ss *session, q *request, r reply) {
	defer s.giveBack(ss)
	v, ok, err := s.get(ss, s.key(q, 1))
	if err != nil && !errors.Is(err, ErrKey) {
		r.err(storeErr(err))
		return
	}
	if !ok {
		r.int(0)
		return
	}
	r.int(int64(len(v)))
}

func cmdType(s *Server, ss *session, q *request, r reply) {
	ok, err := s.Store.Exists(s.key(q, 1))
	if err != nil && !errors.Is(err, ErrKey) {
		r.err(storeErr(err))
		return
	}
	if ok {
		r.simple("string")
	} else {
		r.simple("none")
	}
}
