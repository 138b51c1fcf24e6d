package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rbctl/rbctl/internal/looptest"
	"github.com/rbctl/rbctl/p2p/client"
)

func serveLogged(t *testing.T, dir string, args ...string) (*exec.Cmd, *client.Client, *lockedBuf) {
	t.Helper()
	var log lockedBuf
	cmd := exec.Command(os.Args[0], append([]string{"serve", "--listen", "127.0.0.1:0", "--json", "--cluster", "none"}, args...)...)
	cmd.Stderr = &log
	srv, ctl, _ := startServeCmd(t, dir, cmd)
	c, err := client.Dial(ctl, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return srv, c, &log
}

func stopServe(t *testing.T, srv *exec.Cmd, sig syscall.Signal) {
	t.Helper()
	srv.Process.Signal(sig)
	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not stop within 60 s")
	}
}

// TestServeSIGHUPKeepsAPlainNode is issue 35's third case: SIGHUP used to kill a node
// without TLS (no final checkpoint; a key stored a second before was gone). Now it is logged
// and the node goes on serving; a key stored before it is kept through SIGTERM.
func TestServeSIGHUPKeepsAPlainNode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	dir := t.TempDir()
	dev := filepath.Join(dir, "h.img")
	if code, _, se := runRbctl(t, dir, time.Minute, "format", "--create", "16M", "--slot-bytes", "64K", dev); code != 0 {
		t.Fatalf("format: exit %d: %s", code, se)
	}
	srv, c, log := serveLogged(t, dir, dev, "--checkpoint-interval", "1h")
	if err := c.Store(context.Background(), crashKey(1), crashPayload(1)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		srv.Process.Signal(syscall.SIGHUP)
	}
	for end := time.Now().Add(30 * time.Second); !strings.Contains(log.String(), "SIGHUP: nothing to reload"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no SIGHUP line; stderr:\n%s", log.String())
		}
	}
	if err := c.Store(context.Background(), crashKey(2), crashPayload(2)); err != nil {
		t.Fatalf("after SIGHUP the node no longer serves: %v", err)
	}
	stopServe(t, srv, syscall.SIGTERM)
	_, c, _ = serveLogged(t, dir, dev)
	if n := present(t, c, 1, 3); n != 2 {
		t.Fatalf("%d of 2 keys after SIGHUP and SIGTERM", n)
	}
}

// TestServeLoopDeviceOverItsFileIsRefused is issue 35's fourth case: a loop device attached
// over the file a node serves. `rbctl put` and `rbctl format --force` on it used to succeed
// and erase the live cache; both are refused naming the node, and its keys stay.
func TestServeLoopDeviceOverItsFileIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	dir := t.TempDir()
	dev := filepath.Join(dir, "d9.img")
	if code, _, se := runRbctl(t, dir, time.Minute, "format", "--create", "16M", "--slot-bytes", "64K", dev); code != 0 {
		t.Fatalf("format: exit %d: %s", code, se)
	}
	srv, c, _ := serveLogged(t, dir, dev)
	if err := c.Store(context.Background(), crashKey(1), crashPayload(1)); err != nil {
		t.Fatal(err)
	}
	loop := looptest.Attach(t, dev, looptest.Options{})
	src := filepath.Join(dir, "payload")
	os.WriteFile(src, []byte("x"), 0o600)
	want := fmt.Sprintf("%s is a loop device over %s: in use by PID %d (", loop, dev, srv.Process.Pid)
	for _, args := range [][]string{
		{"put", loop, "--model-name", "m", "--hash", "00ff", src},
		{"format", "--force", "--slot-bytes", "64K", loop},
	} {
		code, _, se := runRbctl(t, dir, time.Minute, args...)
		if code == 0 || !strings.Contains(se, want) || !strings.Contains(se, " serve") {
			t.Fatalf("rbctl %v on the loop device: exit %d, stderr %q; want it refused with %q", args, code, se, want)
		}
	}
	if n := present(t, c, 1, 2); n != 1 {
		t.Fatal("the served key is gone")
	}
}
