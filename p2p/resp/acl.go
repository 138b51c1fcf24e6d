package resp

import (
	"fmt"
	"strings"

	"github.com/rbctl/rbctl/p2p/auth"
)

// Tenant-scoped access over RESP (issue 28): with Server.Tokens set, a connection
// authenticates with AUTH [user] TOKEN (user "default" or the token's name; HELLO 2 AUTH
// too) and every later command is checked against the token before it runs: a command
// outside the token's rights or salts is answered "-NOPERM ..." and changes nothing. A
// key's cache_salt is the one of the raw-block key it is stored under (storeKey; a generic
// key has none, the salt ""). What each command needs:
//
//	GET MGET STRLEN EXISTS TYPE   read on every key's cache_salt
//	SET MSET                      write on every key's cache_salt
//	DEL UNLINK                    delete on every key's cache_salt
//	SCAN DBSIZE INFO              admin (they show every tenant's keys or counts)
//
// PING, ECHO, QUIT, AUTH, HELLO, SELECT, CLIENT, COMMAND and CONFIG GET need no right.

// authRequired says whether a connection must AUTH first.
func (s *Server) authRequired() bool { return s.Auth != nil || s.Tokens != nil }

// login checks AUTH's user and password and records the token on the session.
func (s *Server) login(ss *session, user, pass string) bool {
	if s.Tokens != nil {
		tok, ok := s.Tokens.Lookup(pass)
		if !ok || (user != "default" && user != tok.Name) {
			return false
		}
		ss.token = tok
		return true
	}
	return s.Auth != nil && s.Auth(user, pass)
}

// permit returns the NOPERM reply for a command the session's token does not cover, or "".
func (s *Server) permit(ss *session, cmd string, args [][]byte) string {
	if s.Tokens == nil || ss.token == nil {
		return ""
	}
	var right auth.Right
	keys := args[1:]
	switch cmd {
	case "GET", "MGET", "STRLEN", "EXISTS", "TYPE":
		right = auth.Read
	case "SET":
		right, keys = auth.Write, keys[:min(1, len(keys))]
	case "MSET":
		right, keys = auth.Write, nil
		for i := 1; i < len(args); i += 2 {
			keys = append(keys, args[i])
		}
	case "DEL", "UNLINK":
		right = auth.Delete
	case "SCAN", "DBSIZE", "INFO":
		if !ss.token.Allows(auth.Admin, "") {
			return fmt.Sprintf("NOPERM token %s has no permissions to run the '%s' command (it needs admin)", ss.token.Name, strings.ToLower(cmd))
		}
		return ""
	default:
		return ""
	}
	for _, k := range keys {
		salt := ""
		if key, err := storeKey(k); err == nil {
			salt = key.CacheSalt()
		}
		if !ss.token.Allows(right, salt) {
			return fmt.Sprintf("NOPERM token %s has no %s right on cache_salt %q", ss.token.Name, right, salt)
		}
	}
	return ""
}
