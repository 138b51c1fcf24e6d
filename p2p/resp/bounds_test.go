package resp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// eventually polls cond until it holds (a state to reach, not a time to assert).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// Lengths are integers as Redis's string2ll reads them: no sign but '-', no leading zero,
// no space; "$+4" is not a bulk length.
func TestStrictIntegers(t *testing.T) {
	for _, in := range []string{"*1\r\n$+4\r\nPING\r\n", "*+1\r\n$4\r\nPING\r\n", "*1\r\n$04\r\nPING\r\n",
		"*1\r\n$ 4\r\nPING\r\n", "*1\r\n$4 \r\nPING\r\n", "*1\r\n$-0\r\n", "*1\r\n$\r\n", "*01\r\n$4\r\nPING\r\n"} {
		if _, err := NewReader(strings.NewReader(in), Limits{}).Next(); !errors.Is(err, ErrProtocol) {
			t.Errorf("%q: %v, want a protocol error", in, err)
		}
	}
	for in, want := range map[string]int{"*1\r\n$4\r\nPING\r\n": 1, "*0\r\n": 0, "*-1\r\n": 0, "*2\r\n$0\r\n\r\n$10\r\n0123456789\r\n": 2} {
		args, err := NewReader(strings.NewReader(in), Limits{}).Next()
		if err != nil || len(args) != want {
			t.Errorf("%q: %q %v", in, args, err)
		}
	}
}

// A bulk longer than MaxKeep is read and discarded, never buffered: the request holds none
// of its bytes, the argument is nil, and the next request on the connection is read as usual.
// Past MaxBulk it is a protocol error.
func TestOversizedBulkIsDiscarded(t *testing.T) {
	big := strings.Repeat("v", 1<<20)
	in := cmd("SET", key, big) + cmd("GET", key) + "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3000000\r\n"
	rd := NewReader(strings.NewReader(in), Limits{MaxKeep: 1000, MaxBulk: 1 << 21, MaxRequest: 4000})
	args, err := rd.Next()
	if err != nil || len(args) != 3 || args[2] != nil || rd.Held() != int64(3+len(key)) {
		t.Fatalf("SET of a 1 MiB value: %d args, value nil %v, held %d, %v", len(args), args[2] == nil, rd.Held(), err)
	}
	if args, err := rd.Next(); err != nil || len(args) != 2 || string(args[1]) != key {
		t.Fatalf("the request after it: %q %v", args, err)
	}
	if _, err := rd.Next(); !errors.Is(err, ErrProtocol) {
		t.Fatalf("a bulk past MaxBulk: %v", err)
	}

	// Through a server: +OK, counted as too large, connection in step.
	srv := &Server{Store: newMem(1000), Limits: Limits{MaxKeep: 1000, MaxBulk: 1 << 21}}
	c, err := net.Dial("tcp", serve(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	exchange(t, c, cmd("SET", key, big), "+OK\r\n")
	exchange(t, c, cmd("SET", key, strings.Repeat("w", 1001)), "+OK\r\n") // kept by the reader, too large for the store
	exchange(t, c, cmd("SET", key+"1", "v"), "+OK\r\n")
	exchange(t, c, cmd("GET", key), "$-1\r\n")
	exchange(t, c, cmd("GET", key, big), "-ERR argument 2 is longer than the 1000 bytes a request may keep\r\n")
	exchange(t, c, cmd("ECHO", big), "-ERR argument 1 is longer than the 1000 bytes a request may keep\r\n")
	exchange(t, c, cmd("GET", key+"1"), "$1\r\nv\r\n")
	if st := srv.Stats(); st["resp_set_dropped/too_large"] != 2 {
		t.Fatalf("drops %v", st)
	}
}

// With AUTH on, a connection that has not authenticated may send at most 10 arguments of
// at most 16 KiB each (Redis ≥ 6.2.6); more is a protocol error and the connection ends.
// After AUTH the usual bounds apply.
func TestPreAuthBounds(t *testing.T) {
	srv := &Server{Store: newMem(1 << 20), Auth: func(u, p string) bool { return p == "pw" }}
	addr := serve(t, srv)
	for in, want := range map[string]string{
		cmd("GET", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j"): "-ERR Protocol error: unauthenticated multibulk length\r\n",
		cmd("AUTH", strings.Repeat("p", 16<<10+1)):                   "-ERR Protocol error: unauthenticated bulk length\r\n",
		"AUTH " + strings.Repeat("p", 16<<10+1) + "\r\n":             "-ERR Protocol error: line longer than 16384 bytes\r\n",
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		exchange(t, c, in, want)
		if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Errorf("%.20q...: connection still open", in)
		}
		c.Close()
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	exchange(t, c, cmd("GET", "a", "b", "c", "d", "e", "f", "g", "h", "i"), "-NOAUTH Authentication required.\r\n")
	exchange(t, c, cmd("AUTH", "pw"), "+OK\r\n")
	v := strings.Repeat("x", 64<<10)
	exchange(t, c, cmd("SET", key, v), "+OK\r\n")
	exchange(t, c, cmd("MGET", key, "a", "b", "c", "d", "e", "f", "g", "h", "i", "j"), "*11\r\n$65536\r\n"+v+"\r\n"+strings.Repeat("$-1\r\n", 10))
}

// Requests are read against the server's budget: a connection whose request does not fit
// stops being read (back-pressure) until another request's bytes are released, and the
// bytes held never exceed the budget. A connection holding part of a request waits at most
// BudgetWait (two half-read requests could wait for each other) and then gets ErrBusy.
func TestRequestBudgetBackPressure(t *testing.T) {
	b := NewBudget(1 << 20)
	req := cmd("SET", key, strings.Repeat("a", 600<<10))
	r1 := NewReader(strings.NewReader(req), Limits{})
	r2 := NewReader(strings.NewReader(req), Limits{})
	r1.Budget, r2.Budget = b, b
	if _, err := r1.Next(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := r2.Next(); done <- err }()
	eventually(t, "the second request waits for the budget", func() bool { return b.waiting() == 1 })
	select {
	case err := <-done:
		t.Fatalf("read past the budget: %v", err)
	default:
	}
	r1.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_, lent := bulkClass(600 << 10) // the value's lent buffer, counted whole
	if s := b.Stats(); s.Peak > s.Limit || s.Used != r2.Held()+lent-600<<10+3*argOverhead || s.Waits != 1 {
		t.Fatalf("budget %+v, second request holds %d in 3 arguments, its value in a buffer of %d", s, r2.Held(), lent)
	}
	r2.Release()

	// Two requests each holding part and needing more than is left (a third holds 300 KB):
	// one gives up with ErrBusy.
	r0 := NewReader(strings.NewReader(cmd("SET", key, strings.Repeat("a", 300<<10))), Limits{})
	r0.Budget = b
	if _, err := r0.Next(); err != nil {
		t.Fatal(err)
	}
	two := "*3\r\n$3\r\nSET\r\n$400000\r\n" + strings.Repeat("k", 400000) + "\r\n$400000\r\n" + strings.Repeat("v", 400000) + "\r\n"
	errs := make(chan error, 2)
	for range 2 {
		rd := NewReader(strings.NewReader(two), Limits{})
		rd.Budget = b
		rd.BudgetWait = 50 * time.Millisecond
		go func() { _, err := rd.Next(); rd.Release(); errs <- err }() // released before it reports, so the budget is empty once both did
	}
	e1, e2 := <-errs, <-errs
	if !errors.Is(e1, ErrBusy) && !errors.Is(e2, ErrBusy) {
		t.Fatalf("two half-read requests: %v, %v", e1, e2)
	}
	r0.Release()
	if s := b.Stats(); s.Peak > s.Limit || s.Used != 0 || s.Timeouts < 1 {
		t.Fatalf("budget after: %+v", s)
	}
}

// A 6,000-key MGET of a 64 KiB value (a 375 MiB reply) is written one value at a time: the
// connection never holds more than its request and one value, and the reply is whole.
func TestMGETStreamsUnderBudget(t *testing.T) {
	store := newMem(64 << 10)
	val := strings.Repeat("z", 64<<10)
	store.Set(store.Key([]byte(key)), []byte(val))
	srv := &Server{Store: store, Budget: NewBudget(16 << 20)}
	c, err := net.Dial("tcp", serve(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 6000
	args := []string{"MGET"}
	for range n {
		args = append(args, key)
	}
	req := cmd(args...)
	go io.WriteString(c, req)
	br := bufio.NewReaderSize(c, 1<<20)
	head, err := br.ReadString('\n')
	if err != nil || head != "*"+strconv.Itoa(n)+"\r\n" {
		t.Fatalf("reply head %q %v", head, err)
	}
	want := "$65536\r\n" + val + "\r\n"
	got := make([]byte, len(want))
	for i := range n {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.ReadFull(br, got); err != nil || string(got) != want {
			t.Fatalf("value %d: %v", i, err)
		}
	}
	// The last value's bytes are released once the server's write returned, which can be
	// after the client read them.
	eventually(t, "the reply's bytes released", func() bool { return srv.Stats()["resp_reply_bytes"] == 0 })
	st := srv.Stats()
	reqBytes := int64(n * len(key))
	if peak := st["resp_conn_peak_bytes"]; peak > reqBytes+64<<10+4096 || peak < 64<<10 {
		t.Fatalf("connection peak %d bytes; request %d + one value %d", peak, reqBytes, 64<<10)
	}
	if st["resp_request_peak_bytes"] > 16<<20 || st["resp_reply_bytes"] != 0 {
		t.Fatalf("stats %v", st)
	}
}

// CLIENT SETNAME and HELLO SETNAME take a name of at most MaxClientName bytes of '!'..'~'.
func TestClientNameBounded(t *testing.T) {
	c, err := net.Dial("tcp", serve(t, &Server{Store: newMem(16)}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	exchange(t, c, cmd("CLIENT", "SETNAME", strings.Repeat("n", MaxClientName)), "+OK\r\n")
	exchange(t, c, cmd("CLIENT", "SETNAME", strings.Repeat("n", MaxClientName+1)), "-ERR Client names are limited to 256 bytes.\r\n")
	exchange(t, c, cmd("CLIENT", "SETNAME", strings.Repeat("n", 100<<10)), "-ERR Client names are limited to 256 bytes.\r\n")
	exchange(t, c, cmd("CLIENT", "SETNAME", "a\tb"), "-ERR Client names cannot contain spaces, newlines or special characters.\r\n")
	exchange(t, c, cmd("HELLO", "2", "SETNAME", strings.Repeat("n", MaxClientName+1)), "-ERR Client names are limited to 256 bytes.\r\n")
	exchange(t, c, cmd("HELLO", "2", "SETNAME", "a b"), "-ERR Client names cannot contain spaces, newlines or special characters.\r\n")
	exchange(t, c, cmd("CLIENT", "GETNAME"), fmt.Sprintf("$%d\r\n%s\r\n", MaxClientName, strings.Repeat("n", MaxClientName)))
}

// Keepalive on accepted connections, so a dead peer of a connection without an idle
// timeout is found.
func TestKeepAliveOnAccepted(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	al := newAdmitListener(l, ConnLimits{}.withDefaults(), false, &refused, &refused, nil)
	defer al.Close()
	go func() {
		c, err := net.Dial("tcp", l.Addr().String())
		if err == nil {
			defer c.Close()
			io.Copy(io.Discard, c)
		}
	}()
	c, err := al.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	on, idle := keepAlive(t, c.(*admitConn).Conn)
	if !on || idle != 60 {
		t.Fatalf("SO_KEEPALIVE %v, TCP_KEEPIDLE %d s", on, idle)
	}
}

// keepAlive reads SO_KEEPALIVE and TCP_KEEPIDLE (seconds) of c.
func keepAlive(t *testing.T, c net.Conn) (bool, int) {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var on, idle int
	var serr error
	if err := rc.Control(func(fd uintptr) {
		if on, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE); serr == nil {
			idle, serr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE)
		}
	}); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	return on != 0, idle
}

// The first drop of each reason is logged, later ones only counted.
func TestDropsLoggedOncePerReason(t *testing.T) {
	log := &lockedBuffer{}
	srv := &Server{Store: newMem(4), Logger: slog.New(slog.NewTextHandler(log, nil))}
	c, err := net.Dial("tcp", serve(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 3 {
		exchange(t, c, cmd("SET", key, "too long"), "+OK\r\n")
		exchange(t, c, cmd("SET", "plain", "v"), "+OK\r\n")
	}
	if n := strings.Count(log.String(), "\n"); n != 2 || !strings.Contains(log.String(), "reason=too_large") || !strings.Contains(log.String(), "reason=key") {
		t.Fatalf("%d lines logged:\n%s", n, log.String())
	}
	if st := srv.Stats(); st["resp_set_dropped/too_large"] != 3 || st["resp_set_dropped/key"] != 3 {
		t.Fatalf("stats %v", st)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// A client that sends a request and reads none of its reply is cut once a write makes no
// progress for WriteTimeout: its request's bytes go back to the budget.
func TestWriteTimeoutCutsNonReader(t *testing.T) {
	store := newMem(64 << 10)
	store.Set(store.Key([]byte(key)), []byte(strings.Repeat("z", 64<<10)))
	srv := &Server{Store: store, Budget: NewBudget(16 << 20), Conns: ConnLimits{WriteTimeout: 100 * time.Millisecond}}
	c, err := net.Dial("tcp", serve(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	args := []string{"MGET"}
	for range 4000 { // a 256 MiB reply, never read
		args = append(args, key)
	}
	if _, err := io.WriteString(c, cmd(args...)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the request is being answered", func() bool { return srv.Stats()["resp_conn_peak_bytes"] > 0 })
	eventually(t, "the connection that reads nothing is closed", func() bool { return srv.clients.Load() == 0 })
	if st := srv.Stats(); st["resp_request_bytes"] != 0 || st["resp_reply_bytes"] != 0 {
		t.Fatalf("bytes held after the cut: %v", st)
	}
}

// heapStore is a memStore whose keys a raw-block store's parser reads (parseKey: an engine
// key and its cache_salt per key, as NodeStore's) and whose Exists, at its at-th call, notes
// the live heap after a collection and the budget's bytes in use: what a request holds
// while it runs, and what the budget counts of it.
type heapStore struct {
	*memStore
	calls  atomic.Int64
	at     int64
	budget *Budget
	heap   atomic.Uint64
	used   atomic.Int64
}

func (s *heapStore) Key(raw []byte) Key { return parseKey(raw) }
func (s *heapStore) Exists(k Key) (bool, error) {
	if s.calls.Add(1) == s.at {
		s.heap.Store(liveHeap())
		s.used.Store(s.budget.Stats().Used)
	}
	return false, nil
}

func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// A request holds what the request budget counts: its arguments' bytes and a small overhead
// per argument (argOverhead), not a parsed Key per key argument: keys are parsed one at a
// time as the command comes to them. Hostile battery: 60 connections each sending one EXISTS
// of 65,535 keys of 28 bytes (2.29 MB on the wire, within bounds) took the node from 58 MB to
// 2.36 GB, every key of a request parsed (engine key, cache_salt, error: 260-580 bytes each)
// before the command ran. With one-byte keys the argument slices themselves are most of it:
// the budget counts them too.
func TestManyKeyRequestHoldsWhatTheBudgetCounts(t *testing.T) {
	for _, size := range []int{28, 1} {
		t.Run(fmt.Sprintf("%d-byte keys", size), func(t *testing.T) {
			const n = 65535
			b := NewBudget(64 << 20)
			store := &heapStore{memStore: newMem(16), at: n, budget: b}
			srv := &Server{Store: store, Budget: b}
			args := []string{"EXISTS"}
			var argBytes int64
			for i := range n {
				k := fmt.Sprintf("key:%024d", i)[28-size:] // a generic key
				args = append(args, k)
				argBytes += int64(len(k))
			}
			req := cmd(args...)
			args = nil
			c, err := net.Dial("tcp", serve(t, srv))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			exchange(t, c, cmd("PING"), "+PONG\r\n")
			base := liveHeap()
			exchange(t, c, req, ":0\r\n")
			held, used := int64(store.heap.Load())-int64(base), store.used.Load()
			t.Logf("%d keys: %d bytes on the wire, %d of arguments, %d counted by the budget, %d held on the heap while it ran (%.2f× counted)",
				n, len(req), argBytes, used, held, float64(held)/float64(used))
			if held > used*5/4+(256<<10) { // a quarter's slack, and 256 KiB for the connection's buffers
				t.Fatalf("the request held %d bytes of heap while it ran; the budget counted %d", held, used)
			}
			if size == 28 && held > 3*argBytes {
				t.Fatalf("a request of %d bytes of arguments held %d bytes of heap while it ran", argBytes, held)
			}
		})
	}
}
