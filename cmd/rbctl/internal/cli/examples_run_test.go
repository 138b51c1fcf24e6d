package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rbctl/rbctl/emu"
)

// exampleOrder runs the help examples so that each finds what an earlier one made: caches
// are formatted before keys are put, read and removed; bench makes the files serve uses;
// the nodes run while the remote examples talk to them.
var exampleOrder = []string{
	"rbctl version", "rbctl help", "rbctl completion", "rbctl completion bash", "rbctl completion zsh",
	"rbctl completion fish", "rbctl completion powershell",
	"rbctl", "rbctl format", "rbctl put", "rbctl get", "rbctl ls", "rbctl rm", "rbctl inspect", "rbctl recover",
	"rbctl identify", "rbctl nvme", "rbctl nvme log", "rbctl fdp", "rbctl fdp configs", "rbctl fdp usage",
	"rbctl fdp stats", "rbctl fdp events", "rbctl fdp status", "rbctl fdp set-events", "rbctl fdp feature",
	"rbctl fdp update", "rbctl fdp-status",
	"rbctl bench", "rbctl simulate",
	"rbctl serve", "rbctl remote put", "rbctl remote get", "rbctl remote ls", "rbctl remote stats", "rbctl remote",
	"rbctl emu", "rbctl emu serve", "rbctl torture", "rbctl cluster-bench",
}

// exampleEdits make an example runnable in a test: the NVMe devices of the examples are one
// emulated FDP SSD (the same NVMe command code as a drive), /var/tmp is the scratch
// directory, completion scripts are written there, and the long knobs are cut short
// (durations, refreshes, kill counts). Everything else runs as printed.
func exampleEdits(dir string) []func(string) string {
	nvmeDev := fmt.Sprintf("'emu:%s/nvme.img?size=2G&ru=8M&ruhs=8'", dir)
	re := func(pat, repl string) func(string) string {
		r := regexp.MustCompile(pat)
		return func(s string) string { return r.ReplaceAllString(s, repl) }
	}
	return []func(string) string{
		re(`/dev/(ng0n1|nvme0n1|nvme0)\b`, nvmeDev),
		re(`/var/tmp/`, dir+"/"),
		re(`/etc/bash_completion\.d/rbctl|"\$\{fpath\[1\]\}/_rbctl"|~/\.config/fish/completions/rbctl\.fish`, dir+"/completion"),
		re(`\| Out-String \| Invoke-Expression`, "> /dev/null"),
		re(`--duration \S+`, "--duration 1s --warmup 0"),
		re(`--watch \S+ --count \d+`, "--watch 10ms --count 2"),
		re(`--kills \d+`, "--kills 2"),
		re(`--requests 4000`, "--requests 200"),
		re(`^(rbctl cluster-bench)$`, "$1 --requests 200"),
		func(s string) string { // a bench without --duration runs its default 20 s per policy
			if strings.HasPrefix(s, "rbctl bench ") && !strings.Contains(s, "--duration") {
				return s + " --duration 1s --warmup 0"
			}
			return s
		},
	}
}

// TestEveryExampleRuns runs every help example (examples.go) through bash in a scratch
// directory, with an rbctl on PATH that is this test binary: each must exit 0 (a server,
// after it listened and was sent SIGINT: 0 or 130). Lines that do not run rbctl (nvme
// connect) are skipped.
func TestEveryExampleRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every example")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	shim := fmt.Sprintf("#!/bin/sh\n%s=1 exec %q \"$@\"\n", envAsMain, os.Args[0])
	if err := os.WriteFile(filepath.Join(bin, "rbctl"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	// The files the examples name as input.
	for name, size := range map[string]int{"data.bin": 4096, "doc.bin": 1000, "lm.img": 0} {
		if err := os.WriteFile(filepath.Join(dir, name), bytes.Repeat([]byte("x"), size), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Truncate(filepath.Join(dir, "lm.img"), 64<<20); err != nil {
		t.Fatal(err)
	}
	lm := fmt.Sprintf(`{"type":"raw_block","device_path":%q,"slot_bytes":69632,"meta_total_bytes":2097152}`, filepath.Join(dir, "lm.img"))
	if err := os.WriteFile(filepath.Join(dir, "lmcache.json"), []byte(lm), 0o600); err != nil {
		t.Fatal(err)
	}
	// The examples' NVMe drive: an emulated FDP SSD that exists before they run.
	if _, err := emu.Create(strings.Trim(exampleEdits(dir)[0]("/dev/ng0n1"), "'")); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "TMPDIR="+dir, "HOME="+dir)
	edits := exampleEdits(dir)
	var servers []*exec.Cmd
	stopServers := func() {
		for _, c := range servers {
			if code := interruptAndWait(t, c); code != 0 && code != exitInterrupted {
				t.Errorf("%s: exit %d after SIGINT", strings.Join(c.Args, " "), code)
			}
		}
		servers = nil
	}
	defer stopServers()

	ran, done := map[string]bool{}, map[string]bool{}
	for _, path := range exampleOrder {
		ex, ok := examples[path]
		if !ok {
			t.Fatalf("exampleOrder names %q, which has no examples", path)
		}
		ran[path] = true
		if path == "rbctl emu" || path == "rbctl torture" {
			stopServers() // the remote examples are done; emu serve takes its own port
		}
		for _, line := range ex {
			if !strings.HasPrefix(line, "rbctl ") && !strings.Contains(line, "| rbctl ") && !strings.Contains(line, "<(rbctl ") {
				continue // a comment, or another tool's command (nvme connect)
			}
			if done[line] {
				continue // the same example under the root command and its own
			}
			done[line] = true
			for _, e := range edits {
				line = e(line)
			}
			if addr, ok := serverListen(line); ok {
				if slices.ContainsFunc(servers, func(c *exec.Cmd) bool { return strings.Contains(strings.Join(c.Args, " "), addr) }) {
					continue // the same server, shown again under its parent command
				}
				servers = append(servers, startExampleServer(t, dir, env, line, addr))
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", line)
			cmd.Dir, cmd.Env = dir, env
			start := time.Now()
			out, err := cmd.CombinedOutput()
			cancel()
			t.Logf("%5.1fs %s", time.Since(start).Seconds(), line)
			if err != nil {
				t.Errorf("example of %s:\n  %s\n%v\n%s", path, line, err, out)
			}
		}
	}
	for path := range examples {
		if !ran[path] {
			t.Errorf("the examples of %q are not run: add it to exampleOrder", path)
		}
	}
}

// serverListen says whether line starts a server (rbctl serve, rbctl emu serve) and where.
func serverListen(line string) (string, bool) {
	if !strings.HasPrefix(line, "rbctl serve ") && !strings.HasPrefix(line, "rbctl emu serve ") {
		return "", false
	}
	m := regexp.MustCompile(`--listen (\S+)`).FindStringSubmatch(line)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// startExampleServer starts line in the background and waits until addr accepts.
func startExampleServer(t *testing.T, dir string, env []string, line, addr string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("bash", "-c", "exec "+line)
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return cmd
		}
		if cmd.ProcessState != nil || time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("example server %s never listened on %s:\n%s", line, addr, out.String())
		}
	}
}

// TestREADMEOracleFigures runs the README's oracle command exactly as printed and checks
// the figures the README quotes from it: cache-salt's WAF → oracle:salt-lifetime's, and
// oracle:salt-frequency's (model output, rounded to 3 decimals as printed).
func TestREADMEOracleFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates 1 TiB three times")
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(readme), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "rbctl simulate ") && strings.Contains(l, "oracle:salt-lifetime") {
			line = strings.TrimSpace(strings.SplitN(l, "#", 2)[0])
		}
	}
	if line == "" {
		t.Fatal("README has no simulate command with oracle:salt-lifetime")
	}
	out, err := runCLI(t, append(strings.Fields(line)[1:], "--json")...)
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	var rep struct {
		Runs []struct {
			Policy  string `json:"policy"`
			HostWAF struct {
				Value float64 `json:"value"`
			} `json:"host_waf"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	waf := map[string]string{}
	for _, r := range rep.Runs {
		waf[r.Policy] = fmt.Sprintf("%.3f", r.HostWAF.Value)
	}
	text := strings.Join(strings.Fields(string(readme)), " ")
	for _, want := range []string{
		waf["cache-salt"] + " → " + waf["oracle:salt-lifetime"] + " at util 0.95",
		"does not (" + waf["oracle:salt-frequency"] + ")",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("README does not say %q, which %q prints", want, line)
		}
	}
}
