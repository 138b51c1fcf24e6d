package cli

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A run larger than the process's limits is a clean error (exit 1) naming the limit, never
// the Go runtime's "fatal error: out of memory" and goroutine dump (exit 2): under ulimit -v
// (RLIMIT_AS) and under GOMEMLIMIT, in a child process that runs the test binary as rbctl.
func TestSimulateHonoursProcessLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes")
	}
	for _, tc := range []struct {
		name  string
		shell string // runs "$0" "$@" (the test binary as rbctl) under a limit
		env   string
		args  []string
		limit string
	}{
		{"ulimit -v", `ulimit -v 3000000 && exec "$0" "$@"`, "", []string{"simulate", "--device-size", "1000T"}, "limit: RLIMIT_AS (ulimit -v)"},
		{"GOMEMLIMIT", `exec "$0" "$@"`, "GOMEMLIMIT=50MiB", []string{"simulate", "--device-size", "1T", "--warmup", "0.1", "--measure", "0.1"}, "limit: GOMEMLIMIT"},
	} {
		cmd := exec.Command("sh", append([]string{"-c", tc.shell, os.Args[0]}, tc.args...)...)
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), envAsMain+"=1")
		if tc.env != "" {
			cmd.Env = append(cmd.Env, tc.env)
		}
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitError {
			t.Fatalf("%s: %v, want exit %d; stderr:\n%s", tc.name, err, exitError, se.String())
		}
		msg := strings.Join(strings.Fields(se.String()), " ") // the message may be wrapped
		if strings.Contains(msg, "fatal error") || strings.Contains(msg, "goroutine ") || !strings.Contains(msg, tc.limit) ||
			!strings.Contains(msg, "needs about") {
			t.Fatalf("%s: stderr does not name the limit cleanly:\n%s", tc.name, se.String())
		}
	}
}
