package cli

// Output that cannot be written, output nobody reads, and devices that cannot outlive the
// process, through the real command line in child processes (hostile battery 16).

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runRbctlStdout runs the test binary as rbctl in dir with stdout going to out, and returns
// the exit code and stderr.
func runRbctlStdout(t *testing.T, dir string, out *os.File, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), envAsMain+"=1", "TMPDIR="+dir, "XDG_STATE_HOME="+dir)
	var se bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &se
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("rbctl %s: %v", strings.Join(args, " "), err)
	}
	return cmd.ProcessState.ExitCode(), se.String()
}

// TestStdoutWriteFailureFails: every command whose output could not be written (stdout is
// /dev/full) fails with the write error, tables and cobra's help included, as --json did.
func TestStdoutWriteFailureFails(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full:", err)
	}
	defer full.Close()
	dir := t.TempDir()
	mustRbctl(t, dir, "format", "--create", "16M", "--slot-bytes", "64K", "c.img")
	mustRbctl(t, dir, "put", "c.img", "--model-name", "m", "--hash", "00", "-")
	mustRbctl(t, dir, "format", "--create", "16M", "--slot-bytes", "64K", "s.img")
	_, ctl, _ := startServe(t, dir, "s.img")
	for _, args := range [][]string{
		{"ls", "c.img"}, {"ls", "--json", "c.img"}, {"inspect", "c.img"}, {"get", "c.img", "--model-name", "m", "--hash", "00"},
		{"--help"}, {"help"}, {"ls", "--help"}, {"version"}, {"--version"},
		{"identify", "emu:mem?size=32M&ru=1M"}, {"fdp-status", "emu:mem?size=32M&ru=1M"},
		{"remote", "ls", "--server", ctl}, {"remote", "stats", "--server", ctl},
	} {
		code, errOut := runRbctlStdout(t, dir, full, args...)
		if code == 0 || !strings.Contains(errOut, "no space left on device") {
			t.Errorf("rbctl %s > /dev/full: exit %d, stderr %q; want a failure naming the write error", strings.Join(args, " "), code, errOut)
		}
	}
}

// TestFailedEmuFormatLeavesNoFile: a format whose emu: geometry is refused leaves no data
// file behind, and an empty data file (what such a failure used to leave) is no device:
// format makes one there.
func TestFailedEmuFormatLeavesNoFile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	dir := t.TempDir()
	refused(t, dir, "over-provisioning", "format", "emu:"+filepath.Join(dir, "e3.img")+"?size=64M&ru=3M&ruhs=4")
	if err := os.WriteFile(filepath.Join(dir, "e3.img"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out := mustRbctl(t, dir, "format", "emu:"+filepath.Join(dir, "e3.img")+"?size=64M&ru=1M&ruhs=4")
	if !strings.HasPrefix(out, "formatted ") {
		t.Fatalf("format on an empty data file: %q", out)
	}
}

// TestGetStopsOnCtrlCWhileOutputBlocks: get (and remote get) writing to a FIFO nobody opens,
// or to a stdout pipe nobody drains, stops on SIGINT with exit 130 at once; meanwhile the
// local get has let go of the device, so a writer is not refused.
func TestGetStopsOnCtrlCWhileOutputBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	dir := t.TempDir()
	mustRbctl(t, dir, "format", "--create", "32M", "--slot-bytes", "512K", "c.img")
	payload := make([]byte, 252<<10) // more than a pipe holds
	rand.Read(payload)
	in := filepath.Join(dir, "in")
	if err := os.WriteFile(in, payload, 0o600); err != nil {
		t.Fatal(err)
	}
	mustRbctl(t, dir, "put", "c.img", "--model-name", "m", "--hash", "00", in)
	mustRbctl(t, dir, "format", "--create", "32M", "--slot-bytes", "512K", "s.img")
	_, ctl, _ := startServe(t, dir, "s.img")
	mustRbctl(t, dir, "remote", "put", "--server", ctl, "--model-name", "m", "--hash", "00", in)
	fifo := filepath.Join(dir, "out.fifo")
	if err := syscallMkfifo(fifo); err != nil {
		t.Skip("mkfifo:", err)
	}
	pr, pw, err := os.Pipe() // stdout nobody reads
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	i := 0
	for _, tc := range []struct {
		args   []string
		stdout *os.File
	}{
		{[]string{"get", "c.img", "--model-name", "m", "--hash", "00", "-o", fifo}, nil},
		{[]string{"get", "c.img", "--model-name", "m", "--hash", "00"}, pw},
		{[]string{"remote", "get", "--server", ctl, "--model-name", "m", "--hash", "00", "-o", fifo}, nil},
		{[]string{"remote", "get", "--server", ctl, "--model-name", "m", "--hash", "00"}, pw},
	} {
		i++
		cmd := exec.Command(os.Args[0], tc.args...)
		var se bytes.Buffer
		cmd.Dir, cmd.Env, cmd.Stderr = dir, append(os.Environ(), envAsMain+"=1", "TMPDIR="+dir), &se
		if tc.stdout != nil {
			cmd.Stdout = tc.stdout
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		if tc.args[0] == "get" { // blocked on its output, not on the device
			if code, _, errOut := runRbctl(t, dir, time.Minute, "put", "c.img", "--model-name", "m", "--hash", fmt.Sprintf("%02x", i), "-"); code != 0 {
				t.Errorf("rbctl %s holds the device while it waits on its output: put exit %d, %q", strings.Join(tc.args, " "), code, errOut)
			}
		}
		sent := time.Now()
		code := interruptAndWait(t, cmd)
		if took := time.Since(sent); code != exitInterrupted || took > 2*time.Second {
			t.Errorf("rbctl %s: exit %d %v after SIGINT, stderr %q; want %d at once", strings.Join(tc.args, " "), code, took, se.String(), exitInterrupted)
		}
		if !strings.Contains(se.String(), "interrupted") {
			t.Errorf("rbctl %s: stderr %q does not say interrupted", strings.Join(tc.args, " "), se.String())
		}
	}
}
