package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rbctl/rbctl/internal/testnet"
	"github.com/rbctl/rbctl/p2p/p2ptest"
)

// startServe runs `rbctl serve` in a child process and returns it with its control address.
func startServe(t *testing.T, dir string, args ...string) (*exec.Cmd, string, string) {
	t.Helper()
	return startServeCmd(t, dir, exec.Command(os.Args[0], append([]string{"serve", "--listen", "127.0.0.1:0", "--json"}, args...)...))
}

// startServeCmd starts a prepared `rbctl serve --json` command and waits for its ready line.
func startServeCmd(t *testing.T, dir string, cmd *exec.Cmd) (*exec.Cmd, string, string) {
	t.Helper()
	args := cmd.Args
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), envAsMain+"=1", "TMPDIR="+dir, "XDG_RUNTIME_DIR="+dir, "XDG_STATE_HOME="+dir) // the cluster registry stays the test's
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	if cmd.Stderr == nil { // a caller that reads the log brings its own writer
		cmd.Stderr = &stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var ready struct{ Control, Data string }
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		var b strings.Builder
		for s.Scan() { // the JSON object spans lines; it ends with "}"
			b.WriteString(s.Text())
			if s.Text() == "}" {
				line <- b.String()
				return
			}
		}
		close(line)
	}()
	select {
	case l, ok := <-line:
		if !ok || json.Unmarshal([]byte(l), &ready) != nil || ready.Control == "" {
			t.Fatalf("rbctl serve %v: no ready line (%q), stderr %q", args, l, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("rbctl serve %v: not ready after 30s; stderr %q", args, stderr.String())
	}
	return cmd, ready.Control, ready.Data
}

// freeAddr is a loopback address for a server about to be started (testnet.Addr: below the
// ephemeral range, so no other test's bind to :0 takes it meanwhile).
func freeAddr(t *testing.T) string { return testnet.Addr(t) }

func TestServeRemoteAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")
	for _, dev := range []string{a, b} {
		if code, _, se := runRbctl(t, dir, time.Minute, "format", "--create", "16M", "--slot-bytes", "64K", dev); code != 0 {
			t.Fatalf("format: exit %d: %s", code, se)
		}
	}
	srvA, ctlA, dataA := startServe(t, dir, a)
	// b reaches a's data plane through a proxy that slows it to 16 KiB/s, so that a can be
	// killed while a chunk is on the wire.
	proxy, err := p2ptest.NewProxy(dataA)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	srvB, ctlB, _ := startServe(t, dir, b, "--peers", ctlA+"/"+proxy.Addr(), "--peer-timeout", "1s", "--fetch-timeout", "20s")
	key := []string{"--model", "m", "--hash", "00ff", "--salt", "t"}
	remote := func(args ...string) (int, string, string) {
		return runRbctl(t, dir, 30*time.Second, append([]string{"remote"}, args...)...)
	}
	var stored []string
	for _, h := range []string{"00ff", "01ff"} {
		// The confirmation is the command's output: stdout, nothing on stderr; it names the
		// key as the node lists it, as a local put does.
		code, so, se := remote(append([]string{"put", "--server", ctlA, "-"}, "--model", "m", "--hash", h, "--salt", "t")...)
		name, ok := strings.CutPrefix(strings.TrimSuffix(so, "\n"), "stored 8 bytes under ")
		if code != 0 || !ok || !strings.Contains(name, h) || se != "" {
			t.Fatalf("remote put: exit %d, stdout %q, stderr %q", code, so, se)
		}
		stored = append(stored, name)
	}
	if code, so, se := remote("ls", "--server", ctlA); code != 0 || !strings.Contains(so, stored[0]) || !strings.Contains(so, stored[1]) {
		t.Fatalf("remote ls does not list what put named %q: exit %d, stdout %q, stderr %q", stored, code, so, se)
	}
	var doc struct {
		Stored string
		Size   int `json:"size_bytes"`
	}
	if code, so, se := remote("put", "--server", ctlA, "--json", "-", "--model", "m", "--hash", "04ff", "--salt", "t"); code != 0 || json.Unmarshal([]byte(so), &doc) != nil ||
		strings.Replace(doc.Stored, "04ff", "00ff", 1) != stored[0] || doc.Size != 8 {
		t.Fatalf("remote put --json: exit %d, stdout %q (want the key of %q with hash 04ff, size_bytes 8), stderr %q", code, so, stored[0], se)
	}
	if code, so, se := remote(append([]string{"get", "--server", ctlB}, key...)...); code != 0 || so != "payload\n" {
		t.Fatalf("remote get on b: exit %d, stdout %q, stderr %q", code, so, se)
	}
	if code, _, se := remote("get", "--server", ctlB, "--model", "m", "--hash", "02ff"); code != exitNotFound {
		t.Fatalf("remote get of an absent key: exit %d (%s), want %d", code, se, exitNotFound)
	}
	code, so, _ := remote("stats", "--server", ctlB, "--json")
	var st struct{ Counters map[string]int64 }
	if code != 0 || json.Unmarshal([]byte(so), &st) != nil || st.Counters["peer_hits"] != 1 {
		t.Fatalf("remote stats on b: exit %d, %s", code, so)
	}
	// a dies mid-transfer: b's get of a chunk only a had is a miss (exit 3), not an error.
	big := filepath.Join(dir, "big.bin")
	if err := os.WriteFile(big, make([]byte, 60<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, se := remote("put", "--server", ctlA, "--model", "m", "--hash", "02ff", big); code != 0 {
		t.Fatalf("remote put big: exit %d: %s", code, se)
	}
	// One byte over the node's announced max_payload_bytes: refused, nothing stored.
	over := filepath.Join(dir, "over.bin")
	if err := os.WriteFile(over, make([]byte, 60<<10+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, se := remote("put", "--server", ctlA, "--model", "m", "--hash", "03ff", over); code == 0 || !strings.Contains(se, "larger than") {
		t.Fatalf("remote put over the node's limit: exit %d: %s", code, se)
	}
	proxy.SetBandwidth(16 << 10)
	got := make(chan int, 1)
	go func() {
		code, _, _ := remote("get", "--server", ctlB, "--model", "m", "--hash", "02ff")
		got <- code
	}()
	for end := time.Now().Add(20 * time.Second); proxy.Stats().BytesDown < 8<<10; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the transfer never started")
		}
	}
	srvA.Process.Signal(syscall.SIGKILL)
	srvA.Wait()
	// What a's kernel had already accepted would still arrive after the kill (a close sends
	// the queued bytes); the connection dying with the host is the proxy's reset.
	proxy.ResetAll()
	if s := proxy.Stats(); s.BytesDown >= 60<<10 {
		t.Fatalf("the whole chunk passed (%d bytes) before the kill", s.BytesDown)
	}
	if code := <-got; code != exitNotFound {
		t.Fatalf("get with the peer killed mid-transfer: exit %d, want %d", code, exitNotFound)
	}
	if code, so, _ := remote("get", "--server", ctlB, "--local-only", "--model", "m", "--hash", "02ff"); code != exitNotFound || so != "" {
		t.Fatalf("b kept part of a killed transfer: exit %d, %d bytes", code, len(so))
	}
	// Ctrl-C: b exits 130 and its checkpoint keeps the replicated chunk.
	srvB.Process.Signal(os.Interrupt)
	err = srvB.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted {
		t.Fatalf("serve after SIGINT: %v, want exit %d", err, exitInterrupted)
	}
	if code, so, se := runRbctl(t, dir, time.Minute, "ls", b); code != 0 || !strings.Contains(so, "00ff") {
		t.Fatalf("ls b after serve: exit %d: %s %s", code, so, se)
	}
}

// TestServeAcrossNamespaces runs two nodes in network namespaces of their own (root only):
// with the holder's link down a get through the other node is a miss (exit 3) within its
// timeouts; with the link back up the holder is used again.
func TestServeAcrossNamespaces(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	nt := p2ptest.NewNet(t, 2) // skips unless root with ip(8)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")
	for _, dev := range []string{a, b} {
		if code, _, se := runRbctl(t, dir, time.Minute, "format", "--create", "16M", "--slot-bytes", "64K", dev); code != 0 {
			t.Fatalf("format: exit %d: %s", code, se)
		}
	}
	ctx := context.Background()
	ctlA, ctlB := nt.Nodes[0].IP+":7470", nt.Nodes[1].IP+":7470"
	startServeCmd(t, dir, nt.Command(ctx, 0, os.Args[0], "serve", a, "--listen", ctlA, "--json"))
	startServeCmd(t, dir, nt.Command(ctx, 1, os.Args[0], "serve", b, "--listen", ctlB, "--json",
		"--peers", ctlA, "--peer-timeout", "500ms", "--fetch-timeout", "1s"))
	remote := func(ns int, args ...string) (int, string) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		cmd := nt.Command(ctx, ns, os.Args[0], append([]string{"remote"}, args...)...)
		cmd.Env = append(os.Environ(), envAsMain+"=1")
		cmd.Stdin = strings.NewReader("payload\n")
		out, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatalf("remote %v: %v", args, err)
		}
		return 0, string(out)
	}
	for _, h := range []string{"0a", "0b"} {
		if code, _ := remote(0, "put", "--server", ctlA, "--model", "m", "--hash", h, "-"); code != 0 {
			t.Fatalf("remote put %s: exit %d", h, code)
		}
	}
	if code, out := remote(1, "get", "--server", ctlB, "--model", "m", "--hash", "0a"); code != 0 || out != "payload\n" {
		t.Fatalf("get through b: exit %d, %q", code, out)
	}
	if err := nt.LinkDown(0); err != nil {
		t.Fatal(err)
	}
	if code, _ := remote(1, "get", "--server", ctlB, "--model", "m", "--hash", "0b"); code != exitNotFound {
		t.Fatalf("get with the holder's link down: exit %d, want %d", code, exitNotFound)
	}
	if err := nt.LinkUp(0); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		code, out := remote(1, "get", "--server", ctlB, "--model", "m", "--hash", "0b")
		if code == 0 && out == "payload\n" {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the holder is not used again 30s after its link came back (exit %d)", code)
		}
	}
}

// serve's result is its output (docs/cli.md, "Logs"): on stdout, in plain words or --json,
// with the bound addresses of every listener it was asked for, port 0 included, so that a
// script learns them; the log on stderr does not carry it.
func TestServeResultOnStdout(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	dir := t.TempDir()
	dev := filepath.Join(dir, "a.img")
	mustRbctl(t, dir, "format", "--create", "16M", "--slot-bytes", "64K", dev)
	listeners := []string{"serve", dev, "--cluster", "none", "--listen", "127.0.0.1:0", "--resp", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}
	run := func(json bool) (stdout, stderr string) {
		t.Helper()
		args := listeners
		if json {
			args = append(slices.Clone(args), "--json")
		}
		cmd := exec.Command(os.Args[0], args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), envAsMain+"=1", "TMPDIR="+dir, "XDG_STATE_HOME="+dir)
		var so, se lockedBuf // the child writes them while the test reads
		cmd.Stdout, cmd.Stderr = &so, &se
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		last := "metrics on http://" // the result's last line
		if json {
			last = "}"
		}
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(so.String(), last) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Wait()
		return so.String(), se.String()
	}
	so, se := run(false)
	for _, want := range []string{"serving " + dev + ": control 127.0.0.1:", "RESP (Redis protocol) on 127.0.0.1:", "metrics on http://127.0.0.1:"} {
		if !strings.Contains(so, want) {
			t.Errorf("stdout %q lacks %q (stderr %q)", so, want, se)
		}
	}
	if strings.Contains(se, "serving "+dev) || strings.Contains(se, "RESP (Redis protocol) on") {
		t.Errorf("the result is on stderr too: %q", se)
	}
	so, se = run(true)
	var ready struct{ Control, Data, RESP, Metrics string }
	if i := strings.IndexByte(so, '{'); i < 0 || json.Unmarshal([]byte(so[i:strings.LastIndexByte(so, '}')+1]), &ready) != nil {
		t.Fatalf("--json: stdout %q, stderr %q", so, se)
	}
	for name, a := range map[string]string{"control": ready.Control, "data": ready.Data, "resp": ready.RESP, "metrics": ready.Metrics} {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "0" {
			t.Errorf("--json %s %q: not a bound address (stdout %q)", name, a, so)
		}
	}
}
