package resp

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// memStore is a Store in memory that takes keys of LMCache's native shape only
// ("model@rank@group@hash..."): enough to check that refusals change nothing.
type memStore struct {
	mu  sync.Mutex
	m   map[string][]byte
	max int64
}

func newMem(max int64) *memStore { return &memStore{m: map[string][]byte{}, max: max} }

func (s *memStore) check(k []byte) error {
	if bytes.Count(k, []byte("@")) < 3 {
		return fmt.Errorf("%w: %q is not model@RANK@GROUP@HASH", ErrKey, k)
	}
	return nil
}

// Key: the memory store's keys are the bytes; their salt is the one a raw-block store would
// give them (so the access tests see the same tenants).
func (s *memStore) Key(raw []byte) Key {
	k := Key{Raw: raw, Err: s.check(raw)}
	if ek, err := storeKey(raw); err == nil {
		k.Salt = ek.CacheSalt()
	}
	return k
}
func (s *memStore) Get(k Key) ([]byte, bool, error) {
	if k.Err != nil {
		return nil, false, k.Err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[string(k.Raw)]
	return v, ok, nil
}
func (s *memStore) Set(k Key, v []byte) error {
	if k.Err != nil {
		return k.Err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[string(k.Raw)] = append([]byte(nil), v...)
	return nil
}
func (s *memStore) Exists(k Key) (bool, error) { _, ok, err := s.Get(k); return ok, err }
func (s *memStore) Delete(k Key) (bool, error) {
	if k.Err != nil {
		return false, k.Err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[string(k.Raw)]
	delete(s.m, string(k.Raw))
	return ok, nil
}
func (s *memStore) Len() int64 { s.mu.Lock(); defer s.mu.Unlock(); return int64(len(s.m)) }
func (s *memStore) Scan(cur uint64, count, maxBytes int) ([]string, uint64) {
	s.mu.Lock()
	var all []string
	for k := range s.m {
		all = append(all, k)
	}
	s.mu.Unlock()
	sort.Strings(all)
	if cur >= uint64(len(all)) {
		return nil, 0
	}
	end := min(cur+uint64(count), uint64(len(all)))
	listed := 0
	for i := cur; i < end; i++ {
		if listed > 0 && listed >= maxBytes {
			end = i
			break
		}
		listed += len(all[i])
	}
	next := end
	if end == uint64(len(all)) {
		next = 0
	}
	return all[cur:end], next
}
func (s *memStore) MaxValue() int64 { return s.max }
func (s *memStore) Info() map[string]string {
	return map[string]string{"used_slots": fmt.Sprint(s.Len())}
}

// serve starts a server on a loopback listener and returns its address.
func serve(t *testing.T, srv *Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx, l, 5*time.Second); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return l.Addr().String()
}

func cmd(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// exchange writes in and reads exactly len(want) bytes back.
func exchange(t *testing.T, c net.Conn, in, want string) {
	t.Helper()
	if _, err := io.WriteString(c, in); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("reply to %q: %v (got %q)", in, err, got)
	}
	if string(got) != want {
		t.Fatalf("reply to %q: %q, want %q", in, got, want)
	}
}

const key = "my/model@00000001@0@deadbeef@tenant" // LMCache's native spelling

// The byte-for-byte exchanges LMCache's resp connector checks (issue 29): AUTH, SET, GET of
// a binary value and of a missing key, EXISTS, DEL.
func TestLMCacheConnectorExchanges(t *testing.T) {
	srv := &Server{Store: newMem(1 << 20), Auth: func(u, p string) bool { return u == "default" && p == "pw" }}
	c, err := net.Dial("tcp", serve(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	val := string([]byte{0, 1, '\r', '\n', 0xff, '$', '*'})
	exchange(t, c, cmd("GET", key), "-NOAUTH Authentication required.\r\n")
	exchange(t, c, cmd("AUTH", "wrong"), "-WRONGPASS invalid username-password pair or user is disabled.\r\n")
	exchange(t, c, cmd("AUTH", "pw"), "+OK\r\n")
	exchange(t, c, cmd("AUTH", "default", "pw"), "+OK\r\n")
	exchange(t, c, cmd("SET", key, val), "+OK\r\n")
	exchange(t, c, cmd("GET", key), fmt.Sprintf("$%d\r\n%s\r\n", len(val), val))
	exchange(t, c, cmd("GET", key+"x"), "$-1\r\n")
	exchange(t, c, cmd("EXISTS", key), ":1\r\n")
	exchange(t, c, cmd("EXISTS", key, key, key+"x"), ":2\r\n")
	exchange(t, c, cmd("DEL", key), ":1\r\n")
	exchange(t, c, cmd("DEL", key), ":0\r\n")
	exchange(t, c, cmd("EXISTS", key), ":0\r\n")
}

func TestCommands(t *testing.T) {
	store := newMem(16)
	srv := &Server{Store: store, Version: "test"}
	c, err := net.Dial("tcp", serve(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	exchange(t, c, cmd("PING"), "+PONG\r\n")
	exchange(t, c, "PING\r\n", "+PONG\r\n") // inline, as from a terminal
	exchange(t, c, cmd("ECHO", "a\r\nb"), "$4\r\na\r\nb\r\n")
	exchange(t, c, cmd("SELECT", "0"), "+OK\r\n")
	exchange(t, c, cmd("SELECT", "1"), "-ERR DB index is out of range\r\n")
	exchange(t, c, cmd("HELLO", "3"), "-NOPROTO unsupported protocol version\r\n")
	exchange(t, c, cmd("SET", key, "v", "EX", "10"), "-ERR SET options (EX) are not supported; plain SET key value only\r\n")
	// A value larger than a slot's payload is answered +OK and dropped (counted): a
	// 5-byte reader stays in step. MSET keeps what it can.
	exchange(t, c, cmd("SET", key, strings.Repeat("x", 17)), "+OK\r\n")
	exchange(t, c, cmd("EXISTS", key), ":0\r\n")
	exchange(t, c, cmd("MSET", key+"1", "a", key+"2", strings.Repeat("y", 17)), "+OK\r\n")
	exchange(t, c, cmd("EXISTS", key+"1", key+"2"), ":1\r\n")
	// A key the store does not take: +OK, nothing stored, counted.
	exchange(t, c, cmd("SET", "plain", "v"), "+OK\r\n")
	exchange(t, c, cmd("GET", "plain"), "$-1\r\n")
	exchange(t, c, cmd("DBSIZE"), ":1\r\n")
	if st := srv.Stats(); st["resp_set_dropped/too_large"] != 2 || st["resp_set_dropped/key"] != 1 {
		t.Fatalf("drop counts %v", st)
	}
	exchange(t, c, cmd("MSET", key+"1", "a", key+"2", "bb"), "+OK\r\n")
	exchange(t, c, cmd("MGET", key+"1", key+"3", key+"2"), "*3\r\n$1\r\na\r\n$-1\r\n$2\r\nbb\r\n")
	exchange(t, c, cmd("STRLEN", key+"2"), ":2\r\n")
	exchange(t, c, cmd("TYPE", key+"2"), "+string\r\n")
	exchange(t, c, cmd("TYPE", key+"9"), "+none\r\n")
	exchange(t, c, cmd("DBSIZE"), ":2\r\n")
	exchange(t, c, cmd("UNLINK", key+"1", key+"9"), ":1\r\n")
	exchange(t, c, cmd("CLIENT", "SETNAME", "lmc"), "+OK\r\n")
	exchange(t, c, cmd("CLIENT", "GETNAME"), "$3\r\nlmc\r\n")
	exchange(t, c, cmd("COMMAND", "DOCS"), "*0\r\n")
	exchange(t, c, cmd("NOPE", "x"), "-ERR unknown command 'NOPE', with args beginning with: 'x' \r\n")
	exchange(t, c, cmd("QUIT"), "+OK\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("connection open after QUIT: %d %v", n, err)
	}
}

func TestScanMatchCount(t *testing.T) {
	store := newMem(16)
	for i := range 25 {
		store.Set(store.Key([]byte(fmt.Sprintf("m/x@00000000@0@%04x", i))), []byte("v"))
	}
	store.Set(store.Key([]byte("other@00000000@0@00")), []byte("v"))
	srv := &Server{Store: store}
	c, err := net.Dial("tcp", serve(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	var got []string
	cur := "0"
	for rounds := 0; ; rounds++ {
		io.WriteString(c, cmd("SCAN", cur, "MATCH", "m/x@*", "COUNT", "7"))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		// The reply nests an array in an array, which the request reader does not read;
		// read it line by line (keys hold no CR or LF).
		line := func() string { s, _ := br.ReadString('\n'); return strings.TrimSuffix(s, "\r\n") }
		if h := line(); h != "*2" {
			t.Fatalf("SCAN reply starts %q", h)
		}
		line()
		cur = line()
		var n int
		fmt.Sscanf(line(), "*%d", &n)
		for range n {
			line()
			got = append(got, line())
		}
		if cur == "0" || rounds > 10 {
			break
		}
	}
	if len(got) != 25 {
		t.Fatalf("SCAN MATCH m/x@* found %d keys, want 25: %v", len(got), got)
	}
}

// Pipelining: many requests in one write, the replies in order (one flush for the batch).
func TestPipelining(t *testing.T) {
	srv := &Server{Store: newMem(1 << 10)}
	c, err := net.Dial("tcp", serve(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var in, want strings.Builder
	for i := range 200 {
		k := fmt.Sprintf("m@00000000@0@%04x", i)
		in.WriteString(cmd("SET", k, fmt.Sprint(i)))
		in.WriteString(cmd("GET", k))
		want.WriteString("+OK\r\n")
		fmt.Fprintf(&want, "$%d\r\n%d\r\n", len(fmt.Sprint(i)), i)
	}
	exchange(t, c, in.String(), want.String())
}

// A malformed or oversized request gets a protocol error and the connection is closed.
func TestProtocolErrors(t *testing.T) {
	srv := &Server{Store: newMem(16), Limits: Limits{MaxBulk: 32, MaxArgs: 4}}
	addr := serve(t, srv)
	for in, want := range map[string]string{
		"*1\r\n$40\r\n":              "-ERR Protocol error: invalid bulk length\r\n",
		"*9\r\n":                     "-ERR Protocol error: invalid multibulk length\r\n",
		"*1\r\n:3\r\n":               "-ERR Protocol error: expected '$', got ':'\r\n",
		"*x\r\n":                     "-ERR Protocol error: invalid multibulk length\r\n",
		"*1\r\n$3\r\nabcde\r\n":      "-ERR Protocol error: bulk string not terminated by CRLF\r\n",
		"SET \"unbalanced v\r\n":     "-ERR Protocol error: unbalanced quotes in request\r\n",
		"*2\r\n$3\r\nGET\r\n$-1\r\n": "-ERR Protocol error: invalid bulk length\r\n",
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		exchange(t, c, in, want)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Errorf("%q: connection still open", in)
		}
		c.Close()
	}
}

// An idle connection is closed after the idle timeout.
func TestIdleTimeout(t *testing.T) {
	srv := &Server{Store: newMem(16)}
	a, b := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- srv.ServeConn(context.Background(), a, 20*time.Millisecond) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("idle connection not closed")
	}
	b.Close()
}

func TestInlineQuoting(t *testing.T) {
	args, err := splitInline([]byte(`SET "a b\x41\n" 'it\'s' plain`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"SET", "a bA\n", "it's", "plain"}
	if len(args) != len(want) {
		t.Fatalf("args %q", args)
	}
	for i := range want {
		if string(args[i]) != want[i] {
			t.Fatalf("arg %d = %q, want %q", i, args[i], want[i])
		}
	}
}

// FuzzReader: the request parser never panics, and what it reads, written back as a RESP
// array, reads back the same.
func FuzzReader(f *testing.F) {
	for _, s := range []string{cmd("SET", key, "v"), "PING\r\n", "*0\r\n", "*1\r\n$-1\r\n", "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", `SET "a\x41" 'b'` + "\n", "*-1\r\n*1\r\n$1\r\n\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		rd := NewReader(bytes.NewReader(in), Limits{MaxBulk: 1 << 16, MaxArgs: 64})
		for range 16 {
			args, err := rd.Next()
			if err != nil {
				return
			}
			var b strings.Builder
			ss := make([]string, len(args))
			for i, a := range args {
				ss[i] = string(a)
			}
			if len(args) == 0 {
				continue
			}
			b.WriteString(cmd(ss...))
			again, err := NewReader(strings.NewReader(b.String()), Limits{MaxBulk: 1 << 16, MaxArgs: 64}).Next()
			if err != nil || len(again) != len(args) {
				t.Fatalf("%q re-reads as %q %v", args, again, err)
			}
			for i := range args {
				if !bytes.Equal(again[i], args[i]) {
					t.Fatalf("arg %d: %q re-reads as %q", i, args[i], again[i])
				}
			}
		}
	})
}

// FuzzServe: any input to a connection gets well-formed replies (each a RESP type byte and
// CRLF-terminated) and never a panic.
func FuzzServe(f *testing.F) {
	f.Add([]byte(cmd("SET", key, "v") + cmd("GET", key) + "PING\r\n" + cmd("SCAN", "0", "MATCH", "[", "COUNT", "1")))
	f.Add([]byte(cmd("HELLO", "2", "SETNAME", "x") + cmd("INFO") + cmd("CLIENT", "INFO")))
	f.Add([]byte(cmd("MSET", key, "a", key+"1", "bb") + cmd("MGET", key, key+"1", "x") + cmd("STRLEN", key) + cmd("GET", key)))
	f.Fuzz(func(t *testing.T, in []byte) {
		// Each input twice: against a plain Store, and against a ValueLoader whose GET,
		// MGET and STRLEN load into buffers a one-buffer value pool lends, every one of
		// which must be back once the connection is done.
		pool, err := NewValuePool(64, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		for _, srv := range []*Server{
			{Store: newMem(64), Limits: Limits{MaxBulk: 1 << 12, MaxArgs: 32}},
			{Store: memInto{newMem(64)}, Limits: Limits{MaxBulk: 1 << 12, MaxArgs: 32}, Values: pool, Budget: NewBudget(1 << 16)},
		} {
			a, b := net.Pipe()
			go func() { b.Write(in); b.Close() }()
			var out bytes.Buffer
			done := make(chan struct{})
			rdA, wrA := io.Pipe()
			go func() { io.Copy(&out, rdA); close(done) }()
			srv.ServeConn(context.Background(), pipeConn{a, wrA}, time.Second)
			wrA.Close()
			<-done
			if out.Len() > 0 && !strings.ContainsRune("+-:$*", rune(out.Bytes()[0])) {
				t.Fatalf("reply starts with %q", out.Bytes()[0])
			}
			if out.Len() > 0 && !bytes.HasSuffix(out.Bytes(), []byte("\r\n")) {
				t.Fatalf("reply not CRLF-terminated: %q", out.Bytes())
			}
			if srv.Values != nil {
				if st := srv.Stats(); st["resp_value_lent"] != 0 || st["resp_value_spares"] != 0 {
					t.Fatalf("value buffers still lent after the connection: %v", st)
				}
			}
		}
	})
}

// memInto is the memory store as a ValueLoader: a hit is copied into a buffer from alloc.
type memInto struct{ *memStore }

func (s memInto) GetInto(k Key, alloc func(size int) []byte) ([]byte, bool, error) {
	v, ok, err := s.Get(k)
	if err != nil || !ok {
		return nil, ok, err
	}
	b := alloc(len(v))[:len(v)]
	copy(b, v)
	return b, true, nil
}

// pipeConn reads from a net.Pipe end and writes to w (so the test collects the replies
// while the writer side closes).
type pipeConn struct {
	net.Conn
	w io.Writer
}

func (p pipeConn) Write(b []byte) (int, error) { return p.w.Write(b) }
