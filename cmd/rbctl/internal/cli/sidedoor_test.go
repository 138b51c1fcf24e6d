package cli

// Side doors (issue 26): every path a command writes goes through the safety gate, --force
// never lifts "in use", input is read under the contract. Each refusal runs the real
// command line in a child process and checks that no file in the directory changed.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rbctl/rbctl/internal/looptest"
	"golang.org/x/sys/unix"
)

// sideDoorDir holds a cache with one key (c.img), a second cache (other.img), an ext4
// image, a symlink to c.img and an ordinary file.
func sideDoorDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, c := range []string{"c.img", "other.img"} {
		mustRbctl(t, dir, "format", "--create", "16M", "--slot-bytes", "64K", c)
	}
	code, _, errOut := runRbctl(t, dir, time.Minute, "put", "c.img", "--model", "m", "--hash", "00ff", "-")
	if code != 0 {
		t.Fatalf("put: %s", errOut)
	}
	ext4Image(t, filepath.Join(dir, "e4.img"), 8<<20)
	if err := os.Symlink("c.img", filepath.Join(dir, "link.img")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestOutputPathsGoThroughTheGate(t *testing.T) {
	dir := sideDoorDir(t)
	get := []string{"get", "c.img", "--model", "m", "--hash", "00ff"}
	for _, c := range []struct {
		want string
		args []string
	}{
		{"own input (c.img)", append(get, "-o", "c.img")},
		{"own input (c.img)", append(get, "-o", "link.img")},
		{"raw-block cache", append(get, "-o", "other.img")},
		{"ext4 filesystem", append(get, "-o", "e4.img")},
		{"raw-block cache", []string{"remote", "get", "--server", "127.0.0.1:1", "--model", "m", "--hash", "00ff", "-o", "other.img"}},
		{"raw-block cache", []string{"simulate", "--device-size", "16G", "--save", "other.img"}},
		{"own input (c.img)", []string{"bench", "c.img", "--write-trace", "c.img", "--requests", "10"}},
		{"raw-block cache", []string{"bench", "c.img", "--write-trace", "other.img", "--requests", "10"}},
		{"ext4 filesystem", []string{"simulate", "--requests", "10", "--write-trace", "e4.img"}},
		{"own input (c.img)", []string{"bench", "c.img", "--force", "--duration", "1s", "--save", "link.img"}},
	} {
		refused(t, dir, c.want, c.args...)
		// No flag lifts it: the message offers none.
		if code, _, errOut := runRbctl(t, dir, time.Minute, c.args...); code == 0 || strings.Contains(errOut, "--force") {
			t.Errorf("rbctl %s: exit %d, %q: suggests --force", strings.Join(c.args, " "), code, errOut)
		}
	}
	// A figure is written over a file of the same name in --plot's directory.
	plots := filepath.Join(dir, "plots")
	if err := os.Mkdir(plots, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "other.img"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plots, "waf-over-time.png"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	refused(t, dir, "--plot to "+filepath.Join("plots", "waf-over-time.png"), "simulate", "--device-size", "16G", "--plot", "plots")

	// What is allowed still works: a new file, an ordinary file, stdout.
	mustRbctl(t, dir, append(get, "-o", "new.bin")...)
	mustRbctl(t, dir, append(get, "-o", "notes.txt")...)
	for _, f := range []string{"new.bin", "notes.txt"} {
		if got, _ := os.ReadFile(filepath.Join(dir, f)); string(got) != "payload\n" {
			t.Errorf("%s holds %q", f, got)
		}
	}
}

// TestPutReadsAtMostOneSlot: input larger than the slot's payload is refused after
// payload+1 bytes, before it is all read, and nothing is stored.
func TestPutReadsAtMostOneSlot(t *testing.T) {
	dir := sideDoorDir(t)
	before := snapshot(t, dir)
	cmd := exec.Command(os.Args[0], "put", "c.img", "--model", "m", "--hash", "01", "-")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), envAsMain+"=1")
	src := &countingZeros{left: 1 << 30}
	var se bytes.Buffer
	cmd.Stdin, cmd.Stderr = src, &se
	err := cmd.Run()
	if err == nil || !strings.Contains(se.String(), "larger than") {
		t.Fatalf("put of 1 GiB into 64 KiB slots: %v, %s", err, se.String())
	}
	// The pipe holds up to 64 KiB more than the child read, and exec copies in 32 KiB pieces.
	if src.read > 64<<10+256<<10 {
		t.Errorf("%d bytes taken from stdin; the slot holds 64 KiB", src.read)
	}
	if d := diffSnapshots(before, snapshot(t, dir)); len(d) > 0 {
		t.Errorf("a refused put changed %v", d)
	}
}

type countingZeros struct{ left, read int64 }

func (r *countingZeros) Read(p []byte) (int, error) {
	n := min(int64(len(p)), r.left)
	if n == 0 {
		return 0, os.ErrClosed
	}
	clear(p[:n])
	r.left -= n
	r.read += n
	return int(n), nil
}

// TestPutStopsOnCtrlCWhileWaitingForInput: put from a FIFO no one writes stops on SIGINT
// with exit 130 and stores nothing; remote put asks the node before it opens its input, so
// an unreachable node fails at once instead of waiting on the FIFO.
func TestPutStopsOnCtrlCWhileWaitingForInput(t *testing.T) {
	dir := sideDoorDir(t)
	fifo := filepath.Join(dir, "in.fifo")
	if err := syscallMkfifo(fifo); err != nil {
		t.Skip("mkfifo:", err)
	}
	before := snapshot(t, dir)
	cmd := exec.Command(os.Args[0], "put", "c.img", "--model", "m", "--hash", "02", fifo)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), envAsMain+"=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the open of the FIFO blocks
	if code := interruptAndWait(t, cmd); code != exitInterrupted {
		t.Errorf("exit %d, want %d", code, exitInterrupted)
	}
	if d := diffSnapshots(before, snapshot(t, dir)); len(d) > 0 {
		t.Errorf("an interrupted put changed %v", d)
	}
	if code, out, _ := runRbctl(t, dir, time.Minute, "get", "c.img", "--model", "m", "--hash", "02"); code != exitNotFound {
		t.Errorf("the interrupted put's key: exit %d, %q", code, out)
	}
	// remote put to no node: refused before the FIFO is opened (the timeout would fire).
	if code, _, errOut := runRbctl(t, dir, 30*time.Second, "remote", "put", "--server", "127.0.0.1:1", "--model", "m", "--hash", "03", fifo); code == 0 || !strings.Contains(errOut, "127.0.0.1:1") {
		t.Errorf("remote put to no node: exit %d, %q", code, errOut)
	}
}

func syscallMkfifo(path string) error { return unix.Mkfifo(path, 0o600) }

// TestLoopBackingFileRefusedEvenWithForce: a file backing a loop device (mounted through
// it when the kernel lets us) is refused like the loop device itself, --force or not, by
// every command that would write it.
func TestLoopBackingFileRefusedEvenWithForce(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for loop devices (CI runs as root)")
	}
	dir := sideDoorDir(t)
	loop := looptest.Attach(t, filepath.Join(dir, "e4.img"), looptest.Options{})
	want, mounted := "it backs "+loop, false
	if mnt := t.TempDir(); exec.Command("mount", "-t", "ext4", loop, mnt).Run() == nil {
		defer exec.Command("umount", mnt).Run()
		want, mounted = "it backs "+loop+" (mounted at "+mnt, true
	} else {
		t.Log("cannot mount the ext4 image here; testing the attached, unmounted case")
	}
	for _, args := range [][]string{
		{"format", "--force", "e4.img"},
		{"format", "--force", "emu:e4.img?size=8M&ru=1M&ruhs=2"},
		{"bench", "--force", "--duration", "1s", "e4.img"},
		{"recover", "--force", "e4.img"},
		{"get", "c.img", "--model", "m", "--hash", "00ff", "-o", "e4.img"},
	} {
		refused(t, dir, want, args...)
		if code, _, errOut := runRbctl(t, dir, time.Minute, args...); code == 0 || strings.Contains(errOut, "pass --force") {
			t.Errorf("rbctl %s: exit %d, %q: suggests --force", strings.Join(args, " "), code, errOut)
		}
	}
	// The mounted loop device itself: refused, and no --force is offered.
	if mounted {
		if code, _, errOut := runRbctl(t, dir, time.Minute, "format", "--force", loop); code == 0 || strings.Contains(errOut, "--force") {
			t.Errorf("format --force %s: exit %d, %q", loop, code, errOut)
		}
	}
}
