package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rbctl/rbctl/internal/sys"
	"github.com/rbctl/rbctl/reports"
)

// buildRbctl builds cmd/rbctl into a temporary directory: the interruption tests signal the
// real binary, with its own signal handling.
func buildRbctl(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the rbctl binary")
	}
	bin := filepath.Join(t.TempDir(), "rbctl")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/rbctl")
	cmd.Dir = filepath.Join("..", "..", "..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func cpuTicks(pid int) int64 { return sys.CPUTicks(pid) }

// interruptRun starts bin with args, waits until ready() and the process has done some work,
// sends SIGINT and returns the exit code, stdout, stderr and how long it took to stop.
func interruptRun(t *testing.T, bin string, ready func() bool, args ...string) (int, string, string, time.Duration) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for !(ready() && cpuTicks(cmd.Process.Pid) >= 30) {
		select {
		case err := <-done:
			t.Fatalf("rbctl %s ended before it was interrupted: %v\n%s%s", strings.Join(args, " "), err, so.String(), se.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("rbctl %s: not ready after 60 s", strings.Join(args, " "))
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	select {
	case <-done:
	case <-time.After(60 * time.Second): // generous: only catches "never stops"
		cmd.Process.Kill()
		t.Fatalf("rbctl %s did not stop after SIGINT", strings.Join(args, " "))
	}
	return cmd.ProcessState.ExitCode(), so.String(), se.String(), time.Since(sent)
}

func checkSavedInterrupted(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r reports.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if !r.Interrupted || !strings.Contains(string(b), `"interrupted": true`) || r.Partial == "" || len(r.Runs) == 0 || !r.Runs[0].Interrupted {
		t.Fatalf("%s: interrupted %v, partial %q, %d runs", path, r.Interrupted, r.Partial, len(r.Runs))
	}
}

func TestSimulateSIGINT(t *testing.T) {
	bin := buildRbctl(t)
	dir := t.TempDir()
	save := filepath.Join(dir, "sim.json")
	// 16 TiB: about half a minute per policy, so the signal lands inside the first run.
	code, out, errOut, took := interruptRun(t, bin, func() bool { return true },
		"simulate", "--capacity", "16T", "--placement", "none,cache-salt", "--save", save, "--plot", filepath.Join(dir, "plots"))
	t.Logf("stopped %v after SIGINT", took)
	if code != exitInterrupted {
		t.Fatalf("exit %d, want %d\n%s%s", code, exitInterrupted, out, errOut)
	}
	if !strings.Contains(out, "interrupted: partial result (0 of 2 runs complete; none stopped at ") ||
		!strings.Contains(out, "not run: cache-salt)") || !strings.Contains(errOut, "rbctl: interrupted") {
		t.Fatalf("no partial mark:\n%s\nstderr: %s", out, errOut)
	}
	checkSavedInterrupted(t, save)
	if _, err := os.Stat(filepath.Join(dir, "plots", "waf-over-time.png")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("plots of an interrupted run were drawn: %v", err)
	}
}

func TestBenchSIGINT(t *testing.T) {
	bin := buildRbctl(t)
	dir := t.TempDir()
	img, save := filepath.Join(dir, "e.img"), filepath.Join(dir, "bench.json")
	started := func() bool { _, err := os.Stat(img); return err == nil }
	code, out, errOut, took := interruptRun(t, bin, started, "bench", "emu:"+img+"?size=256M&ru=4M&ruhs=8&op=0.15",
		"--placement", "none,cache-salt", "--duration", "2m", "--warmup", "0.5", "--quiet", "--save", save)
	t.Logf("stopped %v after SIGINT", took)
	if code != exitInterrupted {
		t.Fatalf("exit %d, want %d\n%s%s", code, exitInterrupted, out, errOut)
	}
	if !strings.Contains(out, "interrupted: partial result (0 of 2 policies complete; none stopped ") ||
		!strings.Contains(out, "not run: cache-salt)") || !strings.Contains(out, "| none ") {
		t.Fatalf("no partial result:\n%s\nstderr: %s", out, errOut)
	}
	checkSavedInterrupted(t, save)
}
