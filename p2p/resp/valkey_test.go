package resp

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startValkey runs valkey-server (Debian bookworm-backports; make setup installs it) in
// memory on a free loopback port, or skips.
func startValkey(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("valkey-server")
	if err != nil {
		t.Skip("valkey-server not installed (make setup installs it from bookworm-backports)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatal("valkey-server did not listen within 10 s")
		}
	}
}

// TestRepliesMatchValkey runs one session of redis-cli commands against valkey-server (an
// implementation no one here wrote) and against the dispatcher over an engine, and compares every reply
// byte for byte: the commands LMCache's connector and the Redis tools send, with their
// error replies. Where rbctl differs by design (a SET of a stored key keeps its value;
// RESP3 is not spoken; SET options are refused) the difference is asserted as documented.
func TestRepliesMatchValkey(t *testing.T) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli not installed (apt-get install redis-tools)")
	}
	ref := startValkey(t)
	img := filepath.Join(t.TempDir(), "c.img")
	if err := os.WriteFile(img, nil, 0o644); err != nil || os.Truncate(img, 32<<20) != nil {
		t.Fatal(err)
	}
	e := engineOn(t, img, true)
	t.Cleanup(func() { e.Close() })
	ours := serve(t, &Server{Store: EngineStore{e}})
	run := func(addr string, stdin []byte, args ...string) string {
		t.Helper()
		h, p, _ := net.SplitHostPort(addr)
		c := exec.Command(cli, append([]string{"-h", h, "-p", p}, args...)...)
		c.Stdin = bytes.NewReader(stdin)
		out, _ := c.CombinedOutput() // an error reply is output too
		return string(out)
	}
	k := "my/model@00000001@0@deadbeef@tenant"
	bin := make([]byte, 3*256)
	for i := range bin {
		bin[i] = byte(i)
	}
	same := [][]string{
		{"PING"}, {"PING", "hello"}, {"ECHO", "hi"}, {"SELECT", "0"},
		{"GET", k}, {"EXISTS", k}, {"DBSIZE"},
		{"SET", k, "v1"}, {"GET", k}, {"STRLEN", k}, {"TYPE", k}, {"TYPE", k + "x"},
		{"EXISTS", k, k, k + "x"}, {"STRLEN", k + "x"},
		{"MSET", k + "1", "a", k + "2", "b"}, {"MGET", k + "1", k + "2", k + "3"}, {"DBSIZE"},
		{"UNLINK", k + "1"}, {"DEL", k + "2", k + "9"}, {"DEL", k + "2"}, {"DBSIZE"},
		{"CLIENT", "SETNAME", "lmc"}, {"CLIENT", "GETNAME"},
		{"GET"}, {"SET", k}, {"MSET", k + "1"}, {"EXISTS"}, {"DEL"}, {"MGET"},
		{"FOO"}, {"FOO", "bar", "baz"}, {"FOO", strings.Repeat("a", 100), strings.Repeat("b", 100)},
	}
	for _, args := range same {
		if want, got := run(ref, nil, args...), run(ours, nil, args...); got != want {
			t.Errorf("%v: rbctl %q, valkey %q", args, got, want)
		}
	}
	// Every byte value, set from stdin and read back raw, on both.
	for _, addr := range []string{ref, ours} {
		run(addr, bin, "-x", "SET", k+"bin")
		if got := run(addr, nil, "--raw", "GET", k+"bin"); got != string(bin)+"\n" {
			t.Errorf("%s: binary value: %d bytes back, want %d", addr, len(got), len(bin)+1)
		}
	}
	// Documented differences (docs/resp.md): a key names one immutable chunk, so a second
	// SET keeps the first value (valkey overwrites); no SET options; RESP2 only.
	for _, addr := range []string{ref, ours} {
		run(addr, nil, "SET", k+"imm", "first")
		run(addr, nil, "SET", k+"imm", "second")
	}
	if r, o := run(ref, nil, "GET", k+"imm"), run(ours, nil, "GET", k+"imm"); r != "second\n" || o != "first\n" {
		t.Errorf("second SET: valkey %q (overwrites), rbctl %q (keeps the first)", r, o)
	}
	if r, o := run(ref, nil, "SET", k, "v", "EX", "5"), run(ours, nil, "SET", k, "v", "EX", "5"); r != "OK\n" || !strings.HasPrefix(o, "ERR SET options") {
		t.Errorf("SET EX: valkey %q, rbctl %q", r, o)
	}
}
