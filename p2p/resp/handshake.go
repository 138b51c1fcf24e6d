package resp

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The commands about the connection itself: AUTH, HELLO, CLIENT, COMMAND.

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
