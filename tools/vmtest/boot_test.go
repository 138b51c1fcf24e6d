package vmtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Tests of scripts/vmtest/boot.sh, the harness's QEMU watchdog and KVM probe, against fake
// QEMUs (shell scripts that print a console and then hang or exit), and of the whole harness
// against a QEMU wrapper that hangs under KVM.

const bootScript = scriptsDir + "/boot.sh"

// fakeQEMU writes an executable script that prints console (CRLF line ends, like a serial
// console), records the pid of the process that then hangs in PIDFILE, and hangs in a child
// process (so only a kill of QEMU's whole process group ends it) — or, with exit >= 0,
// exits with that status instead.
func fakeQEMU(t *testing.T, dir, console string, exit int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	if exit < 0 {
		// The hang starts before the console is printed: a probe may stop QEMU at once.
		b.WriteString("sleep 3600 &\necho $! >\"$PIDFILE\"\n")
	}
	fmt.Fprintf(&b, "printf '%%b' '%s'\n", strings.ReplaceAll(strings.ReplaceAll(console, "'", `'\''`), "\n", `\r\n`))
	if exit >= 0 {
		fmt.Fprintf(&b, "exit %d\n", exit)
	} else {
		b.WriteString("wait\n")
	}
	p := filepath.Join(dir, "qemu")
	if err := os.WriteFile(p, []byte(b.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// runBoot sources boot.sh and runs one of its functions with env (VMTEST_* limits) and
// returns its output and the VM_* results it printed.
func runBoot(t *testing.T, env []string, script string, args ...string) (string, map[string]string) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	src, err := filepath.Abs(bootScript)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	body := `set -euo pipefail; . "$0"; vm_limits; ` + script + `
printf 'VM_%s=%s\n' END "$VM_END" PHASE "$VM_PHASE" QRC "$VM_QRC" RESULT "$VM_RESULT" LAST "$VM_LAST" PROBE_OK "${VM_PROBE_OK:-}" PROBE_WHY "${VM_PROBE_WHY:-}"`
	cmd := exec.CommandContext(ctx, "bash", append([]string{"-c", body, src}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("boot.sh still running after 2 minutes: the watchdog did not end the boot\n%s", out)
	}
	if err != nil {
		t.Fatalf("boot.sh: %v\n%s", err, out)
	}
	vars := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && strings.HasPrefix(k, "VM_") {
			vars[k] = v
		}
	}
	return string(out), vars
}

// dead reports whether pid has exited (gone, or a zombie nobody has reaped yet).
func dead(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}

// assertKilled checks that the hanging child of a fake QEMU, named in pidFile, is gone.
func assertKilled(t *testing.T, pidFile string) {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("fake QEMU never reached its hang: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %s: %v", pidFile, err)
	}
	// SIGTERM and SIGKILL go to the group before boot.sh returns; allow the kernel a moment
	// to finish the exit (this bounds a wait, it asserts no timing).
	for i := 0; i < 50 && !dead(pid); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if !dead(pid) {
		t.Errorf("the fake QEMU's child %d is still running: the watchdog did not kill QEMU's process group", pid)
	}
}

const (
	firmware = "\x1bc\x1b[?7l\x1b[2JSeaBIOS (version 1.16.2)\nBooting from ROM...\n"
	kernel   = "Probing EDD (edd=off to disable)... o\x1bc\x1b[?7l\x1b[2J[    0.000000] Linux version 6.1.0-fake (gcc)\n[    0.000000] Command line: console=ttyS0\n"
	initLine = "VMTEST guest: kernel 6.1.0-fake, 2 cpus, 1964 MiB, up 3.49 s\nVMTEST PASS modules (1.96 s)\n"
	testRun  = "=== VMTEST RUN tools-vmtest-probe.test (tools/vmtest/probe) -test.v -test.short\n=== RUN   TestVMIdentify\n"
	testDone = "--- PASS: TestVMIdentify (0.01s)\nVMTEST PASS tools-vmtest-probe.test: 1 passed, 0 failed, 0 skipped (0.55 s)\n"
	hookRun  = "=== VMTEST STEP hook 50-nvmet-tcp.sh\nnvmet-tcp hook: connecting\n"
	result   = "VMTEST PASS hook 50-nvmet-tcp.sh (0.70 s)\nVMTEST steps: 5, failed: 0, guest uptime 7.9 s\nRBCTL-VMTEST-RESULT: 0\n"
)

// TestWatchdogNamesStalledPhase feeds boot.sh's watchdog fake consoles that stop at each
// boot phase and checks that the stall is found in that phase, reported by name with the
// last console lines, and that QEMU (with everything it started) is killed. No QEMU needed.
func TestWatchdogNamesStalledPhase(t *testing.T) {
	tests := []struct {
		name    string
		accel   string
		console string
		exit    int    // >= 0: the fake exits with it instead of hanging
		end     string // VM_END
		phase   string // VM_PHASE
		report  string // in the stall report
		result  string // VM_RESULT
		last    string // VM_LAST
	}{
		{"kvm guest silent after the ROM", "kvm", firmware, -1, "stall", "firmware",
			"QEMU start -> first kernel console line ('Linux version') took over 3 s (VMTEST_PROBE_TIMEOUT)", "", "Booting from ROM..."},
		{"kernel never starts init", "tcg", firmware + kernel, -1, "stall", "kernel",
			"STALL in phase kernel: kernel -> init started ('VMTEST guest:' line) took over 1 s (VMTEST_INIT_TIMEOUT)", "", "[    0.000000] Command line: console=ttyS0"},
		{"init stuck before the first step", "tcg", firmware + kernel + "VMTEST guest: kernel 6.1.0-fake\n", -1, "stall", "setup",
			"init -> first step (modules, scratch /tmp, devices) took over 1 s (VMTEST_SETUP_TIMEOUT)", "", "VMTEST guest: kernel 6.1.0-fake"},
		{"test binary hangs", "tcg", firmware + kernel + initLine + testRun, -1, "stall", "test:tools-vmtest-probe.test",
			"test binary tools-vmtest-probe.test (start -> finish) took over 1 s (VMTEST_TESTBIN_TIMEOUT)", "", "=== RUN   TestVMIdentify"},
		{"hook hangs", "tcg", firmware + kernel + initLine + testRun + testDone + hookRun, -1, "stall", "step:hook 50-nvmet-tcp.sh",
			"step hook 50-nvmet-tcp.sh (start -> finish) took over 1 s (VMTEST_STEP_TIMEOUT)", "", "nvmet-tcp hook: connecting"},
		{"nothing after a step", "tcg", firmware + kernel + initLine + testRun + testDone, -1, "stall", "between",
			"after step 'tools-vmtest-probe.test' -> next step took over 1 s (VMTEST_STEP_TIMEOUT)", "",
			"VMTEST PASS tools-vmtest-probe.test: 1 passed, 0 failed, 0 skipped (0.55 s)"},
		{"guest does not power off", "tcg", firmware + kernel + initLine + testRun + testDone + hookRun + result, -1, "stall", "poweroff",
			"result marker -> QEMU exit (poweroff) took over 1 s (VMTEST_POWEROFF_TIMEOUT)", "0", "RBCTL-VMTEST-RESULT: 0"},
		{"clean run", "tcg", firmware + kernel + initLine + testRun + testDone + hookRun + result + "[    7.97] reboot: Power down\n", 0, "exit", "poweroff",
			"", "0", "[    7.97] reboot: Power down"},
		{"failed steps", "tcg", firmware + kernel + initLine + "VMTEST FAIL devices: missing /dev/nullb0\nRBCTL-VMTEST-RESULT: 2\n", 0, "exit", "poweroff",
			"", "2", "RBCTL-VMTEST-RESULT: 2"},
		{"kvm aborts at once", "kvm", "qemu-system-x86_64: error: failed to set MSR 0x10a to 0x2000000ef\n", 134, "exit", "firmware",
			"", "", "qemu-system-x86_64: error: failed to set MSR 0x10a to 0x2000000ef"},
		{"guest panics in the kernel", "tcg", firmware + kernel + "[    2.02] Kernel panic - not syncing: VFS: Unable to mount root fs\n", 0, "exit", "kernel",
			"", "", "[    2.02] Kernel panic - not syncing: VFS: Unable to mount root fs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "pid")
			qemu := fakeQEMU(t, dir, tt.console, tt.exit)
			log := filepath.Join(dir, "console.log")
			// 1 s for each phase after the kernel's first line: the fake prints its whole
			// console in one write, so every phase before the one it stops in ends at once.
			// The firmware phase also covers the fake's start-up on a loaded machine, so it
			// gets 3 s under KVM and 60 s under TCG.
			env := []string{"PIDFILE=" + pidFile, "VMTEST_PROBE_TIMEOUT=3", "VMTEST_KERNEL_TIMEOUT=60",
				"VMTEST_INIT_TIMEOUT=1", "VMTEST_SETUP_TIMEOUT=1", "VMTEST_TESTBIN_TIMEOUT=1",
				"VMTEST_STEP_TIMEOUT=1", "VMTEST_POWEROFF_TIMEOUT=1", "VMTEST_TIMEOUT=120"}
			out, vars := runBoot(t, env,
				`vm_boot boot "$1" "$2" "$3"; if [ "$VM_END" = stall ]; then vm_stall_report "$2"; fi`,
				tt.accel, log, qemu)
			for k, want := range map[string]string{"VM_END": tt.end, "VM_PHASE": tt.phase, "VM_RESULT": tt.result} {
				if vars[k] != want {
					t.Errorf("%s = %q, want %q\n%s", k, vars[k], want, out)
				}
			}
			if tt.last != "" && vars["VM_LAST"] != tt.last {
				t.Errorf("VM_LAST = %q, want %q", vars["VM_LAST"], tt.last)
			}
			if tt.exit >= 0 && vars["VM_QRC"] != strconv.Itoa(tt.exit) {
				t.Errorf("VM_QRC = %q, want %d", vars["VM_QRC"], tt.exit)
			}
			if tt.report != "" && !strings.Contains(out, tt.report) {
				t.Errorf("stall report lacks %q:\n%s", tt.report, out)
			}
			logged, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.ContainsAny(logged, "\r\x1b") {
				t.Errorf("console log keeps CRs or escape sequences: %q", logged)
			}
			if tt.end == "stall" {
				// The stall report ends with the console's last lines, the fake's last one among them.
				if want := "vmtest: | " + tt.last; tt.last != "" && !strings.Contains(out, want) {
					t.Errorf("stall report does not show the last console line %q:\n%s", want, out)
				}
				assertKilled(t, pidFile)
			}
		})
	}
}

// TestProbeKVM checks the KVM probe's verdict and its one-line reason for a guest that hangs
// under KVM, one whose kernel prints, and a QEMU that refuses to start.
func TestProbeKVM(t *testing.T) {
	tests := []struct {
		name    string
		console string
		exit    int
		ok      string
		why     *regexp.Regexp
	}{
		{"hangs after the ROM", firmware, -1, "0",
			regexp.MustCompile(`^KVM probe boot: no kernel console line within 3 s \(VMTEST_PROBE_TIMEOUT; last line: Booting from ROM\.\.\.\)$`)},
		{"kernel prints", firmware + kernel, -1, "1",
			regexp.MustCompile(`^KVM probe boot printed the kernel's first console line after [0-9]+\.[0-9] s$`)},
		{"qemu refuses", "qemu-system-x86_64: -accel kvm: Could not access KVM kernel module: No such file or directory\n", 1, "0",
			regexp.MustCompile(`^KVM probe boot: QEMU exited 1 after [0-9.]+ s before the kernel printed anything \(qemu-system-x86_64: -accel kvm: Could not access KVM kernel module`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "pid")
			qemu := fakeQEMU(t, dir, tt.console, tt.exit)
			out, vars := runBoot(t, []string{"PIDFILE=" + pidFile, "VMTEST_PROBE_TIMEOUT=3"},
				`vm_probe_kvm "$1" /boot/vmlinuz-none "$2"`, qemu, filepath.Join(dir, "probe.log"))
			if vars["VM_PROBE_OK"] != tt.ok {
				t.Errorf("VM_PROBE_OK = %q, want %s\n%s", vars["VM_PROBE_OK"], tt.ok, out)
			}
			if !tt.why.MatchString(vars["VM_PROBE_WHY"]) {
				t.Errorf("VM_PROBE_WHY = %q, want it to match %s", vars["VM_PROBE_WHY"], tt.why)
			}
			if strings.Contains(out, "SeaBIOS") {
				t.Errorf("the probe's console reached stdout; it belongs in its log only:\n%s", out)
			}
			if tt.exit < 0 {
				assertKilled(t, pidFile) // stopped once it had its answer, or at the limit
			}
		})
	}
}

// TestHarnessFallsBackToTCG runs the real harness (scripts/vmtest/run.sh) on one small
// package with a QEMU wrapper that hangs forever when given -accel kvm, as nested KVM does on
// some hosts: the probe must catch it within VMTEST_PROBE_TIMEOUT, say so, and the suite must
// pass under TCG. Needs qemu-system-x86_64 and a kernel; skips without them unless root (CI),
// where `make setup` installs them and a missing one fails the harness.
func TestHarnessFallsBackToTCG(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a QEMU guest under TCG (about a minute); not with -short")
	}
	root := os.Geteuid() == 0
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil && !root {
		t.Skip("qemu-system-x86_64 not installed and not root (make setup installs it)")
	}
	if k, _ := filepath.Glob("/boot/vmlinuz-*"); len(k) == 0 && !root {
		t.Skip("no /boot/vmlinuz-* and not root (make setup installs linux-image-amd64)")
	}
	if err != nil {
		t.Fatalf("root, but qemu-system-x86_64 is not installed: run make setup: %v", err)
	}
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "kvm-pid")
	wrapper := filepath.Join(dir, "qemu-hangs-on-kvm")
	script := fmt.Sprintf(`#!/bin/sh
# Hangs forever under KVM, like nested KVM that opens but never runs a guest.
for a in "$@"; do
	if [ "$a" = kvm ]; then
		echo $$ >%q
		exec sleep 3600
	fi
done
exec %q "$@"
`, pidFile, qemu)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	run, err := filepath.Abs(filepath.Join(scriptsDir, "run.sh"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", run)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "VMTEST_") || strings.HasPrefix(e, "VMTEST_KERNEL=") || strings.HasPrefix(e, "VMTEST_LOCK=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, "VMTEST_QEMU="+wrapper, "VMTEST_PKGS=./tools/vmtest/probe", "VMTEST_SCENARIOS=qemu-nofdp", "VMTEST_NO_SMOKE=1",
		"VMTEST_WORK="+filepath.Join(dir, "work"), "VMTEST_PROBE_TIMEOUT=3", "VMTEST_TIMEOUT=300")
	outb, err := cmd.CombinedOutput()
	out := string(outb)
	if m := regexp.MustCompile(`(?m)^vmtest: SKIP: .*$`).FindString(out); m != "" {
		t.Skip(m)
	}
	if err != nil {
		t.Fatalf("harness failed (%v):\n%s", err, tail(out, 60))
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "vmtest: accelerator: ") || strings.HasPrefix(l, "vmtest: PASS") {
			t.Log(l)
		}
	}
	const why = "tcg (KVM probe boot: no kernel console line within 3 s (VMTEST_PROBE_TIMEOUT"
	for _, want := range []string{
		"\nvmtest: accelerator: " + why,   // when it is chosen
		"\nvmtest:   accelerator: " + why, // and in the summary
		"\nvmtest:   VMTEST PASS tools-vmtest-probe.test: ",
		"\nvmtest: PASS host-plain (boot-to-result ",
		"\nvmtest:   qemu-nofdp     host-plain ", // the matrix row
	} {
		if !strings.Contains(out, want) {
			t.Errorf("harness output lacks %q:\n%s", strings.TrimPrefix(want, "\n"), tail(out, 60))
		}
	}
	if !regexp.MustCompile(`(?m)^vmtest: PASS: 1 scenario\(s\) in 1 boot\(s\) \(tcg, .*\)$`).MatchString(out) {
		t.Errorf("the final line does not name tcg:\n%s", tail(out, 5))
	}
	assertKilled(t, pidFile)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestLimitKnobsChecked: a limit knob that is not whole seconds above 0 stops the harness
// with a message naming it, before anything is built (bash arithmetic would read "15s" as
// a variable, 0, and stall at once).
func TestLimitKnobsChecked(t *testing.T) {
	src, err := filepath.Abs(bootScript)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		env, want string // want "" = accepted
	}{
		{"VMTEST_PROBE_TIMEOUT=15", ""},
		{"VMTEST_TESTBIN_TIMEOUT=1", ""},
		{"VMTEST_PROBE_TIMEOUT=15s", "vmtest: FAIL: VMTEST_PROBE_TIMEOUT=15s: want whole seconds above 0"},
		{"VMTEST_INIT_TIMEOUT=0", "vmtest: FAIL: VMTEST_INIT_TIMEOUT=0: want whole seconds above 0"},
		{"VMTEST_TIMEOUT=0600", "vmtest: FAIL: VMTEST_TIMEOUT=0600: want whole seconds above 0"},
		{"VMTEST_TEST_TIMEOUT=-1", "vmtest: FAIL: VMTEST_TEST_TIMEOUT=-1: want whole seconds above 0"},
		{"VMTEST_TEST_TIMEOUT=5m", "vmtest: FAIL: VMTEST_TEST_TIMEOUT=5m: want whole seconds above 0"},
	}
	for _, tt := range tests {
		cmd := exec.Command("bash", "-c", `. "$0" && vm_limits`, src)
		cmd.Env = append(os.Environ(), tt.env)
		out, err := cmd.CombinedOutput()
		got := strings.TrimSpace(string(out))
		if tt.want == "" {
			if err != nil || got != "" {
				t.Errorf("%s: rejected (%v): %s", tt.env, err, got)
			}
			continue
		}
		if err == nil || got != tt.want {
			t.Errorf("%s: got %q (%v), want %q and a failure", tt.env, got, err, tt.want)
		}
	}
}

// TestFailDigest checks the lines run.sh repeats after the matrix for a failed boot: a
// stalled guest's last console lines, or a finished guest's failure lines and none of its
// passes (CI shows only the end of a run).
func TestFailDigest(t *testing.T) {
	var console strings.Builder
	console.WriteString("=== VMTEST STEP hook 70-remote-bench.sh\n")
	console.WriteString("remote-bench hook: FAIL: the bench (b1) did not end in time; what it is doing:\n")
	console.WriteString("VMTEST FAIL hook 70-remote-bench.sh (exit 1)\n")
	for i := range 30 {
		fmt.Fprintf(&console, "VMTEST PASS step %d\n", i)
	}
	console.WriteString("panic: runtime error: index out of range\n")
	console.WriteString(strings.Repeat("x", 300) + "\n")
	log := filepath.Join(t.TempDir(), "console.log")
	if err := os.WriteFile(log, []byte(console.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	digest := func(end, result string) []string {
		out, _ := runBoot(t, nil, `VM_END=$2 VM_RESULT=$3 VM_PHASE= VM_QRC= VM_LAST=; vm_fail_digest host-plain "$1"`, log, end, result)
		var lines []string
		for _, l := range strings.Split(out, "\n") {
			if !strings.HasPrefix(l, "VM_") && l != "" {
				lines = append(lines, l)
			}
		}
		return lines
	}

	failed := digest("exit", "1")
	want := []string{"host-plain: the console's failure lines:",
		"  | remote-bench hook: FAIL: the bench (b1) did not end in time; what it is doing:",
		"  | VMTEST FAIL hook 70-remote-bench.sh (exit 1)",
		"  | panic: runtime error: index out of range"}
	if strings.Join(failed, "\n") != strings.Join(want, "\n") {
		t.Errorf("a guest with failed steps: digest\n%s\nwant\n%s", strings.Join(failed, "\n"), strings.Join(want, "\n"))
	}

	stalled := digest("stall", "")
	if len(stalled) != 13 || stalled[0] != "host-plain: the console's last lines:" {
		t.Fatalf("a stalled guest: digest of %d lines, want a heading and 12:\n%s", len(stalled), strings.Join(stalled, "\n"))
	}
	if last := stalled[12]; last != "  | "+strings.Repeat("x", 240) {
		t.Errorf("the last line is not the console's last, cut to 240 characters: %q", last)
	}
	if stalled[10] != "  | VMTEST PASS step 29" {
		t.Errorf("a stalled guest's digest is not the console's end: line 10 is %q", stalled[10])
	}
}
