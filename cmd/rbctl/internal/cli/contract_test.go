package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/buildinfo"
	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagcheck"
	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
)

// envAsMain makes the test binary behave as the rbctl binary, so the contract tests run the
// real command line (flag parsing, exit codes, stderr) in a child process.
const envAsMain = "RBCTL_CLI_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envAsMain) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Execute(ctx, os.Args[1:])
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// runRbctl runs the test binary as rbctl in dir and returns exit code, stdout and stderr.
func runRbctl(t *testing.T, dir string, timeout time.Duration, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), envAsMain+"=1", "TMPDIR="+dir, "XDG_STATE_HOME="+dir) // serve keeps its node name there
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	cmd.Stdin = strings.NewReader("payload\n")
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("rbctl %s: still running after %v (a bad value must be refused, not run)", strings.Join(args, " "), timeout)
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("rbctl %s: %v", strings.Join(args, " "), err)
	}
	return code, so.String(), se.String()
}

// snapshot maps every file under dir to its mode and sha256.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		v := info.Mode().String()
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s := sha256.Sum256(b)
			v += " " + hex.EncodeToString(s[:])
		}
		out[p] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffSnapshots(a, b map[string]string) []string {
	var d []string
	for k, v := range a {
		if w, ok := b[k]; !ok {
			d = append(d, "removed "+k)
		} else if w != v {
			d = append(d, "changed "+k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			d = append(d, "created "+k)
		}
	}
	sort.Strings(d)
	return d
}

// leafCommands lists every runnable, visible command.
func leafCommands(c *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	if c.Runnable() && !c.Hidden && !c.HasSubCommands() {
		out = append(out, c)
	}
	for _, s := range c.Commands() {
		out = append(out, leafCommands(s)...)
	}
	return out
}

func TestEveryNumericFlagHasARule(t *testing.T) {
	for _, c := range leafCommands(NewRoot()) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if _, ok := ruleFor(c, f); !ok && flagcheck.Numeric(f) {
				t.Errorf("%s --%s (%s) has no range in flagRules (contract.go)", c.CommandPath(), f.Name, f.Value.Type())
			}
		})
	}
}

func TestEveryDefaultPassesItsRule(t *testing.T) {
	for _, c := range leafCommands(NewRoot()) {
		if err := validateFlags(c); err != nil {
			t.Errorf("%s: a default value breaks the contract: %v", c.CommandPath(), err)
		}
	}
}

func TestEveryCommandHasExamples(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !c.Hidden && c.Name() != "__complete" && c.Name() != "__completeNoDesc" && strings.TrimSpace(c.Example) == "" {
			t.Errorf("%s has no Examples section (examples.go)", c.CommandPath())
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(NewRoot())
}

func TestRuleRangesInMessages(t *testing.T) {
	for _, tc := range []struct {
		rule flagRule
		val  string
		want string // substring of the error; "" = accepted
	}{
		{intRule(1, 4096), "0", "[1, 4096]"},
		{intRule(1, 4096), "4097", "[1, 4096]"},
		{intRule(1, 4096), "7", ""},
		{flagRules["util"], "0", "(0, 1]"},
		{flagRules["util"], "1", ""},
		{flagRules["util"], "1.5", "(0, 1]"},
		{flagRules["util"], "NaN", "(0, 1]"},
		{flagRules["requests"], "0", ""},
		{flagRules["requests"], "-1", "or 0: no limit"},
		{flagRules["duration"], "-5s", "> 0"},
		{flagRules["duration"], "0s", ""}, // with --requests; validateFlags checks the pair
		{flagRules["warmup-timeout"], "0s", "> 0"},
		{flagRules["watch"], "0s", ""},
		{flagRules["block-align"], "3000", "power of two"},
		{flagRules["ru"], "auto", ""},
		{flagRules["ru"], "1K", "at least 4 KiB"},
		{flagRules["ru"], "-3M", "at least 4 KiB"},
		{flagRules["unit"], "3000", "a multiple of 512"},
		{flagRules["unit"], "1536", ""},
		{flagRules["unit"], "auto", ""},
		{flagRules["chunk-size"], "5000", "a multiple of 4096"},
	} {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		switch tc.rule.Kind {
		case ruleDuration:
			fs.Duration("x", 0, "")
		case ruleSize:
			fs.String("x", "", "")
		case ruleInt:
			fs.Int64("x", 0, "")
		default:
			fs.Float64("x", 0, "")
		}
		if err := fs.Set("x", tc.val); err != nil {
			t.Fatal(err)
		}
		err := tc.rule.Check(fs.Lookup("x"))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.val, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error naming %q", tc.val, err, tc.want)
		}
	}
}

// badValues returns values outside r for a flag of type typ.
func badValues(r flagRule, typ string) []string {
	num := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	var vals []string
	switch r.Kind {
	case ruleInt:
		if r.Min > 0 && !(r.Zero != "" && r.Min == 1) {
			vals = append(vals, num(r.Min-1))
		}
		switch {
		case strings.HasPrefix(typ, "uint"):
		case r.Min < 0: // -1 has a meaning (e.g. --replica-handle -1: the policy decides)
			vals = append(vals, num(r.Min-1))
		default:
			vals = append(vals, "-1")
		}
		if r.Max < math.MaxInt32 {
			vals = append(vals, num(r.Max+1))
		}
		if r.Pow2 {
			vals = append(vals, num(r.Min*3))
		}
		vals = append(vals, "abc")
	case ruleFloat, ruleFraction:
		vals = append(vals, "-1", num(r.Max*2+1), "NaN", "abc")
		if r.OpenMin && r.Zero == "" {
			vals = append(vals, num(r.Min))
		}
	case ruleDuration:
		vals = append(vals, "-5s", "abc")
		if r.OpenMin && r.Zero == "" {
			vals = append(vals, "0s")
		}
	case ruleSize:
		vals = append(vals, "-1", "abc", "1.5.5G")
		if r.Min > 1 {
			vals = append(vals, num(r.Min-1))
		}
	}
	if (r.Kind == ruleInt || r.Kind == ruleSize) && r.MultipleOf > 1 {
		vals = append(vals, num(r.Min+1)) // in range, not a multiple
	}
	return vals
}

// TestBadFlagValuesRefusedWithoutSideEffects runs the real command line with a value outside
// the range of every flag of every command, and checks the contract: exit status 1, a one-line
// message naming the flag, no panic, no hang, and no file created or changed.
func TestBadFlagValuesRefusedWithoutSideEffects(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary a few hundred times")
	}
	dir := t.TempDir()
	dev := filepath.Join(dir, "cache.img")
	if code, _, se := runRbctl(t, dir, time.Minute, "format", "--create", "16M", "--slot-bytes", "64K", dev); code != 0 {
		t.Fatalf("format: exit %d: %s", code, se)
	}
	before := snapshot(t, dir)
	cases := 0
	for _, c := range leafCommands(NewRoot()) {
		path := strings.Fields(c.CommandPath())[1:]
		var args []string
		if strings.Contains(c.Use, "DEV") {
			args = []string{dev}
		}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			r, ok := ruleFor(c, f)
			if !ok || r.Kind == ruleAny {
				return
			}
			for _, v := range badValues(r, f.Value.Type()) {
				argv := append(append(append([]string{}, path...), args...), "--"+f.Name+"="+v)
				cases++
				code, _, se := runRbctl(t, dir, 30*time.Second, argv...)
				se = strings.TrimRight(se, "\n")
				switch {
				case code != exitError:
					t.Errorf("rbctl %s: exit %d, want %d (stderr %q)", strings.Join(argv, " "), code, exitError, se)
				case strings.Contains(se, "panic") || strings.Contains(se, "goroutine "):
					t.Errorf("rbctl %s: panicked: %s", strings.Join(argv, " "), se)
				case strings.Count(se, "\n") > 0 || !strings.HasPrefix(se, "rbctl: ") || !strings.Contains(se, "--"+f.Name):
					t.Errorf("rbctl %s: want one line 'rbctl: ... --%s ...', got %q", strings.Join(argv, " "), f.Name, se)
				}
				if d := diffSnapshots(before, snapshot(t, dir)); len(d) > 0 {
					t.Fatalf("rbctl %s touched files: %v", strings.Join(argv, " "), d)
				}
			}
		})
	}
	t.Logf("%d bad flag values refused", cases)
	if cases < 150 {
		t.Errorf("only %d cases: the generator lost flags", cases)
	}
}

// TestMisuseExitCodes covers bad input that is not a flag range: unknown commands, missing
// arguments, malformed keys, absent keys and devices.
func TestMisuseExitCodes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	dir := t.TempDir()
	dev := filepath.Join(dir, "cache.img")
	if code, _, se := runRbctl(t, dir, time.Minute, "format", "--create", "16M", "--slot-bytes", "64K", dev); code != 0 {
		t.Fatalf("format: exit %d: %s", code, se)
	}
	missing := filepath.Join(dir, "no-such.img")
	before := snapshot(t, dir)
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"nope"}, exitError, "unknown command"},
		{[]string{"fdp", "nope", dev}, exitError, "unknown command"},
		{[]string{"nvme", "nope"}, exitError, "unknown command"},
		{[]string{"emu", "nope"}, exitError, "unknown command"},
		{[]string{"inspect"}, exitError, "arg"},
		{[]string{"inspect", dev, dev}, exitError, "given twice"}, // several DEVs are shards; one twice is refused
		{[]string{"bench", "--no-such-flag", dev}, exitError, "unknown flag"},
		{[]string{"inspect", missing}, exitNotFound, "no-such.img"},
		{[]string{"ls", missing}, exitNotFound, "no-such.img"},
		{[]string{"get", dev, "--key", "m@0x00000000@00"}, exitNotFound, "not in the cache"},
		{[]string{"get", dev, "--key", "m@0x00000000@00", "--out", filepath.Join(dir, "no-dir", "x")}, exitError, "no-dir does not exist"}, // a missing output directory is no missing key
		{[]string{"fdp-status", "--count", "3", "emu:mem?size=32M&ru=1M"}, exitError, "give --watch DUR too"},
		{[]string{"inspect", "--max-keys", "2", "x.img"}, exitError, "give --list-keys too"},
		{[]string{"serve", "--checkpoint-interval", "1ns", "x.img"}, exitError, "--checkpoint-interval"},
		{[]string{"serve", "--lease", "10m", "x.img"}, exitError, "--lease"},
		{[]string{"serve", "--gossip", "127.0.0.1:0", "x.img"}, exitError, "joins no cluster"},
		{[]string{"serve", "--gossip", "127.0.0.1:0", "--peers", "127.0.0.1:1", "x.img"}, exitError, "joins no cluster"},
		{[]string{"recover", "--slot-bytes", "64K", "x.img"}, exitError, "give --scan too"},
		{[]string{"nvme", "log", "emu:mem?size=32M&ru=1M", "--lid", "2", "--raw", "--json"}, exitError, "exclude each other"},
		{[]string{"rm", dev, "--key", "m@0x00000000@00"}, exitNotFound, "not in the cache"},
		{[]string{"put", dev, "--key", "garbage", "-"}, exitError, "--key"},
		{[]string{"put", dev, "--key", "m@0x0@00\x1b[2J", "-"}, exitError, "control character"},
		{[]string{"put", dev, "--model", "m", "--hash", "xyz", "-"}, exitError, "--hash"},
		{[]string{"put", dev, "--model", "m", "--hash", "00", "--salt", "a@b", "-"}, exitError, "'@'"},
		{[]string{"put", dev, "--model", "m", "--hash", "00", "--salt", "a\nb", "-"}, exitError, "control character"},
		{[]string{"put", dev, "--key", "m@0x00000000@00", "--model", "m", "-"}, exitError, "not both"},
		{[]string{"put", dev, "-"}, exitError, "no key"},
		{[]string{"bench", dev, "--placement", "bogus"}, exitError, "bogus"},
		{[]string{"simulate", "--placement", "bogus"}, exitError, "bogus"},
		{[]string{"fdp-status", "--events", "-1", dev}, exitError, "--events"},
		{[]string{"bench", "--duration", "-5s", dev}, exitError, "--duration"},
		{[]string{"bench", "--duration", "0", dev}, exitError, "--requests"},
		{[]string{"simulate", "--measure", "-1"}, exitError, "--measure"},
		// Enumerated and shaped values are refused when the flags are parsed, before any
		// device is made, any output is printed or any run starts (hostile battery 3).
		{[]string{"bench", dev, "--precondition", "bogus"}, exitError, `"--precondition" flag: unknown precondition "bogus"; want trim or fill`},
		{[]string{"simulate", "--unit", "3000"}, exitError, "--unit 3000: out of range; want a size of at least 512 B (e.g. 4096, 64K, 1MiB, 2G), a multiple of 512 or \"auto\""},
		{[]string{"simulate", "--sweep", "util=0.5:2:0.5"}, exitError, `"--sweep" flag: util=1.5 is out of range; want (0, 1], as --util takes`},
		{[]string{"simulate", "--sweep", "op=0:1:0.25"}, exitError, "op=1 is out of range; want [0, 0.9], as --op takes"},
		{[]string{"simulate", "--sweep", "ru=1K,8M"}, exitError, "ru=1 KiB is out of range; want a size of at least 4 KiB"},
		{[]string{"simulate", "--sweep", "size=512K,1G"}, exitError, "as --device-size takes"},
		{[]string{"cluster-bench", "--placement", "bogus"}, exitError, "--placement: "},
		{[]string{"cluster-bench", "--salt-by", "bogus"}, exitError, "--salt-by: "},
		{[]string{"cluster-bench", "--workload", "bogus"}, exitError, "--workload"},
		{[]string{"cluster-bench", "--handles", "1"}, exitError, "--handles 1: out of range; want [2, 65535]"},
		{[]string{"cluster-bench", "--chunk-size", "5000"}, exitError, "a multiple of 4096"},
		{[]string{"cluster-bench", "--op", "0.01"}, exitError, "use --op"},
		{[]string{"identify", "--transport", "bogus", "emu:mem?size=32M&ru=1M"}, exitError, `"--transport" flag: nvme: unknown transport "bogus" (want uring or ioctl)`},
		{[]string{"nvme", "log", "emu:mem?size=32M&ru=1M", "--lid", "2", "--transport", "bogus"}, exitError, `"--transport" flag`},
		// A memory device is gone when the process exits: a cache on it cannot be used later.
		{[]string{"format", "mem:64M"}, exitError, "mem:64M is a memory device: it lives only inside one rbctl process"},
		{[]string{"format", "--slot-bytes", "64K", "emu:mem?size=64M&ru=1M"}, exitError, "so format cannot use it"},
		{[]string{"put", "mem:64M", "--model-name", "m", "--hash", "00", "-"}, exitError, "so put cannot use it"},
		{[]string{"rm", "emu:mem?size=64M&ru=1M", "--model-name", "m", "--hash", "00"}, exitError, "so rm cannot use it"},
		{[]string{"recover", "mem:64M"}, exitError, "bench, identify, fdp-status"},
		{[]string{"ls", "mem:64M"}, exitError, "so ls cannot use it"},
		{[]string{"get", "mem:64M", "--model-name", "m", "--hash", "00"}, exitError, "so get cannot use it"},
		{[]string{"inspect", dev, "mem:64M"}, exitError, "so inspect cannot use it"},
		{[]string{"serve", "--listen", "127.0.0.1:0", "mem:64M"}, exitError, "so serve cannot use it"},
		// Hostile battery 16's doubts: the key flags' current names, numbers that do not parse,
		// a directory given to --create, a long key repeated in full.
		{[]string{"put", dev, "-"}, exitError, "pass --key, --native-key, or --model-name and --hash"},
		{[]string{"get", dev, "--model-name", "m", "--hash", "00", "--rank", "-1"}, exitError, `--rank "-1": want a whole number in [0, 18446744073709551615]`},
		{[]string{"format", "--create", "16M", dir}, exitError, dir + ": a directory, not a regular file"},
		{[]string{"get", dev, "--key", "m@0x00000000@" + strings.Repeat("ab", 3000)}, exitNotFound, "m@0x00000000@" + strings.Repeat("ab", 25) + "a... (6013 bytes) is not in the cache"},
	} {
		code, so, se := runRbctl(t, dir, 30*time.Second, tc.args...)
		se = strings.TrimRight(se, "\n")
		if code != tc.code || !strings.Contains(se, tc.msg) || strings.Contains(se, "panic") {
			t.Errorf("rbctl %q: exit %d, stderr %q; want exit %d and %q", tc.args, code, se, tc.code, tc.msg)
		}
		if so != "" {
			t.Errorf("rbctl %q: refused, yet printed %q first", tc.args, so)
		}
		if strings.Contains(se, "\x1b") || strings.Count(se, "\n") > 0 {
			t.Errorf("rbctl %q: stderr is not one escaped line: %q", tc.args, se)
		}
		if d := diffSnapshots(before, snapshot(t, dir)); len(d) > 0 {
			t.Fatalf("rbctl %q touched files: %v", tc.args, d)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, so, se := runRbctl(t, t.TempDir(), 30*time.Second, args...)
		if code != 0 || !strings.HasPrefix(so, "rbctl ") || !strings.Contains(so, "commit ") || !strings.Contains(so, "built ") {
			t.Errorf("rbctl %v: exit %d, %q %q", args, code, so, se)
		}
	}
	code, so, se := runRbctl(t, t.TempDir(), 30*time.Second, "version", "--json")
	var b buildinfo.Info
	if err := json.Unmarshal([]byte(so), &b); code != 0 || err != nil || b.Version == "" || b.Commit == "" || b.Go == "" {
		t.Errorf("rbctl version --json: exit %d, %v, %q %q", code, err, so, se)
	}
}

// --force means one thing everywhere: do what the safety checks refused (forceHelp).
func TestForceHasOneMeaning(t *testing.T) {
	flagcheck.Walk(NewRoot(), func(c *cobra.Command) {
		if f := c.LocalFlags().Lookup("force"); f != nil && !strings.HasPrefix(f.Usage, flagsets.ForceHelp("")) {
			t.Errorf("%s --force: %q does not start %q", c.CommandPath(), f.Usage, flagsets.ForceHelp(""))
		}
	})
}

// JSON output is --json on every command that prints something (docs/cli.md, "One name per
// concept"); help and completion print text for people and shells only.
func TestEveryCommandHasJSON(t *testing.T) {
	var missing []string
	flagcheck.Walk(NewRoot(), func(c *cobra.Command) {
		p := c.CommandPath()
		if !c.Runnable() || c.HasSubCommands() || c.Hidden || strings.HasPrefix(p, "rbctl completion") || p == "rbctl help" || c.Flags().Lookup("json") != nil {
			return
		}
		missing = append(missing, p)
	})
	if len(missing) > 0 {
		t.Errorf("commands without --json: %s", strings.Join(missing, ", "))
	}
}

func TestTortureStopsOnSIGINT(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the torture")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "torture", "--kills", "100000", "--dir", dir)
	cmd.Env = append(os.Environ(), envAsMain+"=1")
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if code := interruptAndWait(t, cmd); code != exitInterrupted {
		t.Errorf("exit %d, want %d; stderr %q", code, exitInterrupted, se.String())
	}
	if !strings.Contains(so.String(), "interrupted: partial result") || !strings.Contains(so.String(), "violations") {
		t.Errorf("no marked partial summary:\n%s", so.String())
	}
}

// interruptAndWait sends SIGINT to a started command and returns its exit code; a command
// that has not stopped a minute later fails the test (generous: only "never stops" counts).
func interruptAndWait(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatalf("%s did not stop after SIGINT", strings.Join(cmd.Args, " "))
	}
	return cmd.ProcessState.ExitCode()
}

var updateDocs = os.Getenv("RBCTL_UPDATE_DOCS") == "1"

// TestCLIDocFlagTable keeps docs/cli.md's generated tables equal to the command tree and
// the rules the CLI enforces (RBCTL_UPDATE_DOCS=1 rewrites them).
func TestCLIDocFlagTable(t *testing.T) {
	path := filepath.Join("..", "..", "..", "..", "docs", "cli.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	for _, sec := range []struct{ name, want string }{
		{"flag-rules", rulesMarkdown(NewRoot())},
		{"flags", flagsMarkdown(NewRoot())},
	} {
		begin, end := "<!-- "+sec.name+":begin -->\n", "<!-- "+sec.name+":end -->"
		i, j := strings.Index(s, begin), strings.Index(s, end)
		if i < 0 || j < i {
			t.Fatalf("%s has no %q ... %q section", path, begin, end)
		}
		if s[i+len(begin):j] != sec.want {
			if !updateDocs {
				t.Errorf("docs/cli.md's %s table is out of date; run RBCTL_UPDATE_DOCS=1 go test -run TestCLIDocFlagTable ./cmd/rbctl/internal/cli/", sec.name)
				continue
			}
			s = s[:i+len(begin)] + sec.want + s[j:]
		}
	}
	if updateDocs && s != string(doc) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The full flag table lists every visible flag once per command, with its default and rule.
func TestFlagsMarkdownCoversTheTree(t *testing.T) {
	md := flagsMarkdown(NewRoot())
	for _, row := range []string{
		"| rbctl rm | `--deallocate` |  | string | `all` |",
		"| rbctl format | `--create` |  | string |  | a size of at least 4 KiB",
		"| rbctl get | `--out` | `-o` | string |",
		"| rbctl inspect | `--queue-depth` |  | int | `32` | [1, 4096] |",
	} {
		if !strings.Contains(md, row) {
			t.Errorf("flag table lacks %q", row)
		}
	}
	if strings.Contains(md, "rbctl torture writer") {
		t.Error("flag table lists the hidden torture writer")
	}
	n := 0
	flagcheck.Walk(NewRoot(), func(c *cobra.Command) {
		for p := c; p != nil; p = p.Parent() {
			if p.Hidden {
				return
			}
		}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden && f.Name != "help" {
				n++
			}
		})
	})
	if rows := strings.Count(md, "\n") - 2; rows != n {
		t.Errorf("flag table has %d rows, the tree %d visible flags", rows, n)
	}
}
