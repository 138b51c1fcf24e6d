package resp

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// dialFrom connects to addr from a loopback address of its own (127.0.0.N), so admission
// sees several clients.
func dialFrom(t *testing.T, addr, from string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedAtAccept: the server closed c without serving it (a request gets no reply).
func closedAtAccept(t *testing.T, c net.Conn) bool {
	t.Helper()
	got, closed := readToClose(t, c)
	return closed && (got == "" || got == refusalReply)
}

// readToClose sends a PING and reads what c gets until the server closes it (closed) or 10 s
// pass: a connection refused at accept reads refusalReply and no PONG, one closed to make
// way for another reads nothing.
func readToClose(t *testing.T, c net.Conn) (got string, closed bool) {
	t.Helper()
	io.WriteString(c, cmd("PING"))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	return string(b), err == nil || !isTimeout(err)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// Connections over the bounds are closed at accept, never queued (issue 35: 1,024 idle
// connections locked every client out). With AUTH on, a newcomer over an unauthenticated
// bound takes the place of the oldest unauthenticated connection there (PerAddr from its
// address, MaxConns-Reserved in all; the rest kept for clients that authenticated), so a
// client that authenticates at once gets in beside a crowd of idle strangers on its own
// host; at most MaxConns in all, and authenticated connections are never closed for a
// newcomer.
func TestAdmissionClosesExtrasAtAccept(t *testing.T) {
	srv := &Server{Store: newMem(16), Auth: func(u, p string) bool { return p == "pw" },
		Conns: ConnLimits{MaxConns: 4, PerAddr: 2, Reserved: 1}}
	addr := serve(t, srv)
	c1, c2 := dialFrom(t, addr, "127.0.0.1"), dialFrom(t, addr, "127.0.0.1")
	exchange(t, c1, cmd("PING"), "-NOAUTH Authentication required.\r\n")
	exchange(t, c2, cmd("PING"), "-NOAUTH Authentication required.\r\n")
	// A third from the address: the oldest stranger there (c1) makes way.
	c3 := dialFrom(t, addr, "127.0.0.1")
	exchange(t, c3, cmd("AUTH", "pw"), "+OK\r\n")
	if !closedAtAccept(t, c1) {
		t.Fatal("the oldest unauthenticated connection of the address was kept for the newcomer")
	}
	c4 := dialFrom(t, addr, "127.0.0.2")
	exchange(t, c4, cmd("PING"), "-NOAUTH Authentication required.\r\n")
	c5 := dialFrom(t, addr, "127.0.0.3")
	exchange(t, c5, cmd("PING"), "-NOAUTH Authentication required.\r\n")
	// Unauthenticated room in all (MaxConns-Reserved = 3) is full (c2, c4, c5): the next
	// stranger replaces the oldest of all, c2.
	c6 := dialFrom(t, addr, "127.0.0.4")
	exchange(t, c6, cmd("AUTH", "pw"), "+OK\r\n")
	if !closedAtAccept(t, c2) {
		t.Fatal("the oldest unauthenticated connection was kept over MaxConns-Reserved")
	}
	exchange(t, c4, cmd("AUTH", "pw"), "+OK\r\n")
	exchange(t, c5, cmd("AUTH", "pw"), "+OK\r\n")
	// Four authenticated clients fill MaxConns 4: a fifth is refused, none of them closed.
	if !closedAtAccept(t, dialFrom(t, addr, "127.0.0.5")) {
		t.Fatal("a fifth connection was served over MaxConns 4")
	}
	for _, c := range []net.Conn{c3, c4, c5, c6} {
		exchange(t, c, cmd("PING"), "+PONG\r\n")
	}
	if got := srv.Stats()["resp_conns_evicted"]; got != 2 {
		t.Fatalf("resp_conns_evicted %d, want 2", got)
	}
	if got := srv.Stats()["resp_conns_refused"]; got != 1 {
		t.Fatalf("resp_conns_refused %d, want 1", got)
	}
}

// Without AUTH every connection counts against PerAddr (none ever authenticates) and
// nothing is reserved.
func TestAdmissionWithoutAuth(t *testing.T) {
	srv := &Server{Store: newMem(16), Conns: ConnLimits{MaxConns: 3, PerAddr: 2}}
	addr := serve(t, srv)
	exchange(t, dialFrom(t, addr, "127.0.0.1"), cmd("PING"), "+PONG\r\n")
	exchange(t, dialFrom(t, addr, "127.0.0.1"), cmd("PING"), "+PONG\r\n")
	if got, closed := readToClose(t, dialFrom(t, addr, "127.0.0.1")); !closed || got != refusalReply {
		t.Fatalf("a third connection from one address: read %q (closed %v), want valkey's %q and the close", got, closed, refusalReply)
	}
	exchange(t, dialFrom(t, addr, "127.0.0.2"), cmd("PING"), "+PONG\r\n")
	if !closedAtAccept(t, dialFrom(t, addr, "127.0.0.3")) {
		t.Fatal("a connection over MaxConns was served")
	}
}

// With AUTH on, a connection that does not authenticate within AuthTimeout is closed; one
// that did stays open with no idle timeout (LMCache's client never reconnects).
func TestAuthDeadline(t *testing.T) {
	srv := &Server{Store: newMem(16), Auth: func(u, p string) bool { return p == "pw" },
		Conns: ConnLimits{AuthTimeout: 100 * time.Millisecond}}
	addr := serve(t, srv)
	ok := dialFrom(t, addr, "127.0.0.1")
	exchange(t, ok, cmd("AUTH", "pw"), "+OK\r\n")
	stranger := dialFrom(t, addr, "127.0.0.1")
	exchange(t, stranger, cmd("PING"), "-NOAUTH Authentication required.\r\n")
	stranger.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := stranger.Read(make([]byte, 1)); n != 0 || err == nil || isTimeout(err) {
		t.Fatalf("unauthenticated connection after the AUTH deadline: %d %v", n, err)
	}
	time.Sleep(300 * time.Millisecond) // well past the AUTH deadline
	exchange(t, ok, cmd("PING"), "+PONG\r\n")
}

// Failed AUTHs are counted (Server.AuthFailed: the node's auth_failed), answered after
// AuthFailDelay, and the connection is closed after MaxAuthFailures of them.
func TestAuthFailuresCountedAndCut(t *testing.T) {
	var told atomic.Int64
	srv := &Server{Store: newMem(16), Auth: func(u, p string) bool { return p == "pw" },
		Conns: ConnLimits{MaxAuthFailures: 3, AuthFailDelay: time.Millisecond}, AuthFailed: func() { told.Add(1) }}
	addr := serve(t, srv)
	c := dialFrom(t, addr, "127.0.0.1")
	for range 3 {
		exchange(t, c, cmd("AUTH", "guess"), "-WRONGPASS invalid username-password pair or user is disabled.\r\n")
	}
	if !closedAtAccept(t, c) {
		t.Fatal("connection open after 3 failed AUTHs")
	}
	d := dialFrom(t, addr, "127.0.0.1")
	exchange(t, d, cmd("AUTH", "guess"), "-WRONGPASS invalid username-password pair or user is disabled.\r\n")
	exchange(t, d, cmd("HELLO", "2", "AUTH", "default", "guess"), "-WRONGPASS invalid username-password pair or user is disabled.\r\n")
	exchange(t, d, cmd("AUTH", "pw"), "+OK\r\n")
	exchange(t, d, cmd("PING"), "+PONG\r\n")
	st := srv.Stats()
	if told.Load() != 5 || st["resp_auth_failed"] != 5 || st["resp_auth_cut"] != 1 {
		t.Fatalf("told %d, stats %v", told.Load(), st)
	}
	if info := bulkReply(t, d, cmd("INFO", "stats")); !strings.Contains(info, "\r\nrbctl_resp_auth_failed:5\r\n") {
		t.Fatalf("INFO stats:\n%s", info)
	}
}

// bulkReply sends in and reads one bulk-string reply.
func bulkReply(t *testing.T, c net.Conn, in string) string {
	t.Helper()
	io.WriteString(c, in)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	head, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(head, "$") {
		t.Fatalf("reply to %q: %q %v", in, head, err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(head[1:]))
	b := make([]byte, n+2)
	if _, err := io.ReadFull(br, b); err != nil {
		t.Fatal(err)
	}
	return string(b[:n])
}

// A request followed by part of the next is answered at once: the reply does not wait for
// the rest of the next request (it did: replies were flushed only when nothing more was
// buffered, and the partial request was). A gRPC client dialled at the RESP port by mistake
// gets -ERR replies to read instead of a silence until its own timeout.
func TestReplyDoesNotWaitForTheNextRequest(t *testing.T) {
	srv := &Server{Store: newMem(16)}
	addr := serve(t, srv)
	for _, c := range []struct{ name, sent, want string }{
		{"array", cmd("PING") + "*2\r\n$3\r\nGET\r\n$1", "+PONG\r\n"},
		{"inline", "PING\r\nGE", "+PONG\r\n"},
		{"set then part of a large SET", cmd("SET", "k", "v") + "*3\r\n$3\r\nSET\r\n$1\r\nj\r\n$100000\r\nxxxx", "+OK\r\n"},
	} {
		conn := dialFrom(t, addr, "127.0.0.1")
		io.WriteString(conn, c.sent)
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, len(c.want))
		if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != c.want {
			t.Errorf("%s: read %q, %v; want %q at once", c.name, buf, err, c.want)
		}
		conn.Close()
	}
}
