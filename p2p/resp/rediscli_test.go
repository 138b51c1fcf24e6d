package resp

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// redis-cli (Debian redis-tools), a client no one here wrote, against the dispatcher over
// an in-memory Store: every command it needs, and a binary value byte for byte. Skipped
// when redis-cli is not installed.
func TestRedisCLI(t *testing.T) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli not installed (apt-get install redis-tools)")
	}
	addr := serve(t, &Server{Store: newMem(1 << 20), Auth: func(u, p string) bool { return p == "secret" }})
	host, port, _ := strings.Cut(addr, ":")
	run := func(stdin []byte, args ...string) string {
		t.Helper()
		c := exec.Command(cli, append([]string{"-h", host, "-p", port, "-a", "secret", "--no-auth-warning"}, args...)...)
		c.Stdin = bytes.NewReader(stdin)
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	k := "my/model@00000001@0@deadbeef@tenant"
	// (redis-cli prints an error reply followed by an empty line.)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"PING"}, "PONG\n"},
		{[]string{"ECHO", "hi"}, "hi\n"},
		{[]string{"SELECT", "0"}, "OK\n"},
		{[]string{"SET", k, "v1"}, "OK\n"},
		{[]string{"GET", k}, "v1\n"},
		{[]string{"STRLEN", k}, "2\n"},
		{[]string{"TYPE", k}, "string\n"},
		{[]string{"EXISTS", k, k, k + "x"}, "2\n"},
		{[]string{"MSET", k + "1", "a", k + "2", "b"}, "OK\n"},
		{[]string{"MGET", k + "1", k + "2", k + "3"}, "a\nb\n\n"},
		{[]string{"DBSIZE"}, "3\n"},
		{[]string{"SCAN", "0", "MATCH", "*@tenant", "COUNT", "100"}, "0\n" + k + "\n"},
		{[]string{"UNLINK", k + "1"}, "1\n"},
		{[]string{"DEL", k + "2", k + "9"}, "1\n"},
		{[]string{"CLIENT", "SETNAME", "lmc"}, "OK\n"},
		{[]string{"HELLO", "3"}, "NOPROTO unsupported protocol version\n\n"},
		{[]string{"SET", k, "v", "EX", "5"}, "ERR SET options (EX) are not supported; plain SET key value only\n\n"},
		{[]string{"SET", "plain", "v"}, "OK\n"}, // a key the store does not take: dropped, counted
		{[]string{"GET", "plain"}, "\n"},
	} {
		if got := run(nil, c.args...); got != c.want {
			t.Errorf("redis-cli %v: %q, want %q", c.args, got, c.want)
		}
	}
	if got := run(nil, "INFO", "keyspace"); !strings.Contains(got, "db0:keys=1") {
		t.Errorf("INFO keyspace: %q", got)
	}
	// A binary value (every byte value) through -x, read back raw.
	val := make([]byte, 256*3)
	for i := range val {
		val[i] = byte(i)
	}
	run(val, "-x", "SET", k)
	c := exec.Command(cli, "-h", host, "-p", port, "-a", "secret", "--no-auth-warning", "--raw", "GET", k)
	out, err := c.Output()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSuffix(out, []byte("\n")), val) {
		t.Errorf("binary value: %d bytes back, want %d", len(out), len(val))
	}
}

// anyKey is memStore without the key check (redis-benchmark's keys are plain).
type anyKey struct{ *memStore }

func (a anyKey) Key(raw []byte) Key { return Key{Raw: raw} }
func (a anyKey) Get(k Key) ([]byte, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.m[string(k.Raw)]
	return v, ok, nil
}
func (a anyKey) Set(k Key, v []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.m[string(k.Raw)] = append([]byte(nil), v...)
	return nil
}

// redis-benchmark (issue 29's shape: 256 KiB values, 16 clients, pipeline 4) runs through
// the protocol layer with no error. A protocol check only: the store is a Go map, so its
// rates say nothing about a cache on a device and are logged, not asserted.
func TestRedisBenchmark(t *testing.T) {
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil || testing.Short() {
		t.Skip("redis-benchmark not installed, or -short")
	}
	addr := serve(t, &Server{Store: anyKey{newMem(1 << 20)}})
	host, port, _ := strings.Cut(addr, ":")
	out, err := exec.Command(bin, "-h", host, "-p", port, "-t", "set,get", "-d", "262144", "-c", "16", "-P", "4", "-n", "400", "-q").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SET:") || !strings.Contains(string(out), "GET:") || strings.Contains(strings.ToLower(string(out)), "error") {
		t.Fatalf("redis-benchmark: %v\n%s", err, out)
	}
	t.Logf("redis-benchmark over an in-memory map (protocol check, not a cache figure):\n%s", out)
}

// A connection over the limits reads valkey's refusal before the close, so redis-cli says
// why instead of "Server closed the connection".
func TestRedisCLIOverTheConnectionLimit(t *testing.T) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli not installed (apt-get install redis-tools)")
	}
	addr := serve(t, &Server{Store: newMem(1 << 20), Conns: ConnLimits{MaxConns: 1, PerAddr: 1}})
	held := dialFrom(t, addr, "127.0.0.1")
	exchange(t, held, cmd("PING"), "+PONG\r\n")
	host, port, _ := strings.Cut(addr, ":")
	out, _ := exec.Command(cli, "-h", host, "-p", port, "PING").CombinedOutput()
	if !strings.Contains(string(out), "max number of clients reached") {
		t.Fatalf("redis-cli over the limit printed %q", out)
	}
	exchange(t, held, cmd("PING"), "+PONG\r\n")
}
