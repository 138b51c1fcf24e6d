package cli

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// freeAddr is a loopback address no one listened on a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// needRedisCli skips a short run or a machine without redis-cli, else returns its path.
func needRedisCli(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the binary")
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("needs redis-cli (Debian redis-tools; make setup installs it)")
	}
	return cli
}

// redisCli returns a function that runs redis-cli against addr with stdin and args, once
// addr answers PING.
func redisCli(t *testing.T, cli string) func(addr string, stdin []byte, args ...string) (string, error) {
	up := map[string]bool{}
	var redis func(addr string, stdin []byte, args ...string) (string, error)
	redis = func(addr string, stdin []byte, args ...string) (string, error) {
		h, p, _ := net.SplitHostPort(addr)
		for deadline := time.Now().Add(20 * time.Second); !up[addr]; time.Sleep(50 * time.Millisecond) {
			if out, _ := exec.Command(cli, "-h", h, "-p", p, "PING").CombinedOutput(); strings.TrimSpace(string(out)) == "PONG" {
				up[addr] = true
			} else if time.Now().After(deadline) {
				t.Fatalf("RESP on %s never answered PING", addr)
			}
		}
		cmd := exec.Command(cli, append([]string{"-h", h, "-p", p}, args...)...)
		cmd.Stdin = bytes.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	return redis
}

// TestServeRESPWithRedisCli: two nodes with --resp; redis-cli (a client no one here wrote)
// SETs a binary chunk in LMCache's native key spelling on a and GETs it byte-exact from b,
// which fetches it from a over P2P; a value over a slot's payload is answered OK, dropped
// and counted (resp_set_dropped/too_large); after the nodes stop, rbctl get --native-key
// reads the chunk from a's device.
func TestServeRESPWithRedisCli(t *testing.T) {
	cli := needRedisCli(t)
	dir := t.TempDir()
	for _, dev := range []string{"a.img", "b.img"} {
		mustRbctl(t, dir, "format", "--create", "16M", "--slot-bytes", "256K", dev)
	}
	ra, rb := freeAddr(t), freeAddr(t)
	srvA, ctlA, _ := startServe(t, dir, filepath.Join(dir, "a.img"), "--cluster", "none", "--resp", ra)
	srvB, ctlB, _ := startServe(t, dir, filepath.Join(dir, "b.img"), "--peers", ctlA, "--resp", rb)
	redis := redisCli(t, cli)
	key := "my/model@00000000@0@00ff@tenant"
	val := make([]byte, 200<<10)
	rand.Read(val)
	val[0], val[1], val[2] = 0, '\r', '\n' // binary, with what RESP frames with
	if out, err := redis(ra, val, "-x", "SET", key); err != nil || strings.TrimSpace(out) != "OK" {
		t.Fatalf("SET: %v %q", err, out)
	}
	if out, _ := redis(ra, nil, "EXISTS", key, "my/model@00000000@0@01ff@tenant"); strings.TrimSpace(out) != "1" {
		t.Errorf("EXISTS of one stored, one absent: %q", out)
	}
	// GET on b: a miss there, fetched from a. redis-cli prints the raw bulk plus a newline.
	h, p, _ := net.SplitHostPort(rb)
	got, err := exec.Command(cli, "-h", h, "-p", p, "--raw", "GET", key).Output()
	if err != nil || !bytes.Equal(bytes.TrimSuffix(got, []byte("\n")), val) {
		t.Fatalf("GET on b: %v, %d bytes, byte-exact %v", err, len(got), bytes.Equal(bytes.TrimSuffix(got, []byte("\n")), val))
	}
	code, so, _ := runRbctl(t, dir, 30*time.Second, "remote", "stats", "--server", ctlB, "--json")
	var st struct{ Counters map[string]int64 }
	if code != 0 || json.Unmarshal([]byte(so), &st) != nil || st.Counters["peer_hits"] != 1 || st.Counters["replicas_stored"] != 1 {
		t.Errorf("b's stats after the RESP GET: exit %d, %v", code, st.Counters)
	}
	// Over a slot's payload (256 KiB - 4 KiB): OK, dropped, counted.
	big := make([]byte, 253<<10)
	if out, _ := redis(ra, big, "-x", "SET", "my/model@00000000@0@02ff"); strings.TrimSpace(out) != "OK" {
		t.Errorf("SET over a slot: %q", out)
	}
	if out, _ := redis(ra, nil, "DBSIZE"); strings.TrimSpace(out) != "1" {
		t.Errorf("DBSIZE after the drop: %q", out)
	}
	code, so, _ = runRbctl(t, dir, 30*time.Second, "remote", "stats", "--server", ctlA, "--json")
	st.Counters = nil
	if code != 0 || json.Unmarshal([]byte(so), &st) != nil || st.Counters["resp_set_dropped/too_large"] != 1 {
		t.Errorf("a's stats after the dropped SET: exit %d, %v", code, st.Counters)
	}
	// Any other key: the generic namespace, read back as stored.
	if out, _ := redis(ra, nil, "SET", "plain-redis-key", "v"); strings.TrimSpace(out) != "OK" {
		t.Errorf("SET of a non-LMCache key: %q", out)
	}
	if out, _ := redis(ra, nil, "GET", "plain-redis-key"); strings.TrimSpace(out) != "v" {
		t.Errorf("GET of a non-LMCache key: %q", out)
	}
	for _, s := range []*exec.Cmd{srvA, srvB} {
		if c := interruptAndWait(t, s); c != 0 && c != exitInterrupted {
			t.Errorf("serve: exit %d after SIGINT", c)
		}
	}
	code, so, se := runRbctl(t, dir, 30*time.Second, "get", "a.img", "--native-key", key)
	if code != 0 || so != string(val) {
		t.Errorf("rbctl get --native-key after serve: exit %d, %d bytes, %s", code, len(so), se)
	}
}

// TestServeAdmission: serve --admission second-hit declines a key's first write and stores
// its second, over RESP (SET answers OK both times; the GET between misses) and over gRPC
// (rbctl remote put says it was declined, exit 1); INFO and remote stats count the
// declines; prefix-depth is refused before the device opens.
func TestServeAdmission(t *testing.T) {
	cli := needRedisCli(t)
	dir := t.TempDir()
	mustRbctl(t, dir, "format", "--create", "16M", "--slot-bytes", "64K", "a.img")
	if code, _, se := runRbctl(t, dir, 30*time.Second, "serve", "a.img", "--cluster", "none", "--admission", "prefix-depth:4"); code != 1 || !strings.Contains(se, "position") {
		t.Errorf("serve --admission prefix-depth:4: exit %d, %s", code, se)
	}
	ra := freeAddr(t)
	srv, ctl, _ := startServe(t, dir, "a.img", "--cluster", "none", "--resp", ra, "--admission", "second-hit")
	redis := redisCli(t, cli)
	key := "my/model@00000000@0@00ff@tenant"
	for i, want := range []string{"", "v1"} {
		if out, err := redis(ra, nil, "SET", key, "v1"); err != nil || strings.TrimSpace(out) != "OK" {
			t.Fatalf("SET %d: %v %q", i+1, err, out)
		}
		if out, _ := redis(ra, nil, "GET", key); strings.TrimSpace(out) != want {
			t.Errorf("GET after SET %d: %q, want %q", i+1, out, want)
		}
	}
	if out, _ := redis(ra, nil, "INFO"); !strings.Contains(out, "rbctl_admission_declined:1") {
		t.Errorf("INFO does not count one declined write:\n%s", out)
	}
	if err := os.WriteFile(filepath.Join(dir, "v.bin"), []byte("value"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{1, 0} {
		code, so, se := runRbctl(t, dir, 30*time.Second, "remote", "put", "--server", ctl, "--model", "m", "--hash", "01", "v.bin")
		if code != want || (want == 1 && !strings.Contains(se, "declined")) || (want == 0 && !strings.Contains(so, "stored 5 bytes")) {
			t.Errorf("remote put %d: exit %d, want %d; %s%s", i+1, code, want, so, se)
		}
	}
	code, so, _ := runRbctl(t, dir, 30*time.Second, "remote", "stats", "--server", ctl, "--json")
	var st struct{ Counters map[string]int64 }
	if code != 0 || json.Unmarshal([]byte(so), &st) != nil || st.Counters["admission_declined"] != 2 || st.Counters["puts"] != 2 {
		t.Errorf("stats: exit %d, %v", code, st.Counters)
	}
	if c := interruptAndWait(t, srv); c != 0 && c != exitInterrupted {
		t.Errorf("serve: exit %d after SIGINT", c)
	}
}
