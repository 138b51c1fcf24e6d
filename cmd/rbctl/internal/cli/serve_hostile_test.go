package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// TestServeSparseFileOnAFullFilesystem is issue 35's second case: a 64 MiB cache file on a
// 12 MiB tmpfs. Before, 191 puts were acknowledged, the final checkpoint failed with ENOSPC
// and a restart had 0 of them. Now format reserves the metadata region, serve warns that the
// file cannot be filled, puts past the filesystem's end are refused, and every acknowledged
// key survives SIGTERM and a restart.
func TestServeSparseFileOnAFullFilesystem(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	mnt := filepath.Join(dir, "small")
	os.Mkdir(mnt, 0o700)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=12M", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	dev := filepath.Join(mnt, "c.img")
	if code, _, se := runRbctl(t, dir, time.Minute, "format", "--create", "64M", "--slot-bytes", "64K", "--io-engine", "posix", dev); code != 0 {
		t.Fatalf("format: exit %d: %s", code, se)
	}
	srv, c, log := serveLogged(t, dir, dev, "--io-engine", "posix", "--checkpoint-interval", "1h")
	for end := time.Now().Add(30 * time.Second); !strings.Contains(log.String(), "is a sparse file"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no warning at start about the file its filesystem cannot hold; stderr:\n%s", log.String())
		}
	}
	big := func(i int) []byte { return bytes.Repeat([]byte{byte(i), byte(i >> 8), 0x5a}, 20000) } // 60 kB
	var acked []int
	refused := 0
	for i := 0; i < 400; i++ {
		if err := c.Store(context.Background(), crashKey(i), big(i)); err != nil {
			refused++
			continue
		}
		acked = append(acked, i)
	}
	if refused == 0 {
		t.Fatalf("400 puts of 60 kB all fit a 12 MiB tmpfs? acknowledged %d", len(acked))
	}
	stopServe(t, srv, syscall.SIGTERM)
	if strings.Contains(log.String(), "final checkpoint") {
		t.Fatalf("final checkpoint failed:\n%s", log.String())
	}
	_, c, _ = serveLogged(t, dir, dev, "--io-engine", "posix")
	for _, i := range acked {
		ch, err := c.Get(context.Background(), crashKey(i), true)
		if err != nil || !bytes.Equal(ch.Payload, big(i)) {
			t.Fatalf("acknowledged key %d not served byte-exact after restart (err %v)", i, err)
		}
	}
	t.Logf("acknowledged %d, refused %d (ENOSPC), all %d present after SIGTERM and restart", len(acked), refused, len(acked))
}

// TestServeRESPLongKeysLoseNothing is issue 35's first case through the binary and RESP:
// `format --create 64M --slot-bytes 260K`, 5 SETs, 12 SETs whose model part is 60,000
// letters, 5 more SETs, SIGTERM, restart. Before, all 22 were +OK, every checkpoint failed
// silently and the restart kept the first 5. Now every SET is +OK (LMCache's client reads 5
// bytes), the long ones that do not fit are dropped and counted (resp_set_dropped/index_room),
// INFO stays healthy, and every kept key is there after the restart.
func TestServeRESPLongKeysLoseNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	dir := t.TempDir()
	dev := filepath.Join(dir, "long.img")
	if code, _, se := runRbctl(t, dir, time.Minute, "format", "--create", "64M", "--slot-bytes", "260K", dev); code != 0 {
		t.Fatalf("format: exit %d: %s", code, se)
	}
	addr := freeAddr(t)
	srv, _, log := serveLogged(t, dir, dev, "--resp", addr, "--checkpoint-interval", "200ms")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	key := func(model string, i int) string { return fmt.Sprintf("%s@%08x@0@%08x@tenant%d", model, 0, i, i%2) }
	var keys []string
	for i := 0; i < 22; i++ {
		model := "org/model"
		if i >= 5 && i < 17 {
			model = strings.Repeat(string(rune('a'+i)), 60000)
		}
		k := key(model, i)
		keys = append(keys, k)
		respCmd(c, "SET", k, fmt.Sprintf("value-%d", i))
		var b [5]byte
		if _, err := io.ReadFull(r, b[:]); err != nil || string(b[:]) != "+OK\r\n" {
			t.Fatalf("SET %d: %q %v", i, b, err)
		}
	}
	respCmd(c, "INFO")
	info, _, err := readBulk(r)
	if err != nil {
		t.Fatal(err)
	}
	dropped := 0
	for _, l := range strings.Split(string(info), "\r\n") {
		if v, ok := strings.CutPrefix(l, "rbctl_resp_set_dropped_index_room:"); ok {
			dropped, _ = strconv.Atoi(v)
		}
	}
	if dropped == 0 || !strings.Contains(string(info), "rbctl_healthy:1") {
		t.Fatalf("INFO: index_room drops %d, want > 0 and healthy:\n%s", dropped, info)
	}
	c.Close()
	stopServe(t, srv, syscall.SIGTERM)
	if strings.Contains(log.String(), "final checkpoint") {
		t.Fatalf("final checkpoint failed:\n%s", log.String())
	}
	_, _, _ = serveLogged(t, dir, dev, "--resp", addr)
	c, err = net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r = bufio.NewReader(c)
	kept := 0
	for i, k := range keys {
		respCmd(c, "GET", k)
		v, ok, err := readBulk(r)
		if err != nil {
			t.Fatal(err)
		}
		long := i >= 5 && i < 17
		switch {
		case ok && string(v) != fmt.Sprintf("value-%d", i):
			t.Fatalf("key %d: wrong bytes", i)
		case !ok && !long:
			t.Fatalf("ordinary key %d lost after SIGTERM and restart", i)
		case ok:
			kept++
		}
	}
	if want := len(keys) - dropped; kept != want {
		t.Fatalf("%d keys after restart; %d SETs were +OK and %d of them dropped for index room", kept, len(keys), dropped)
	}
	t.Logf("22 SETs +OK, %d long ones dropped (index_room), %d kept and all present after SIGTERM and restart", dropped, kept)
}
