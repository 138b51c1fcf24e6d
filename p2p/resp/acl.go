package resp

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
// PING, ECHO, QUIT, AUTH, HELLO, SELECT, CLIENT, COMMAND and CONFIG GET need no right. The
// rights are the command table's (commands.go); permit checks them against the keys the
// dispatcher parsed.

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
