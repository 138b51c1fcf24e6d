package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// docCmd is one rbctl command shown in a code block of README.md or docs/*.md.
type docCmd struct {
	file  string // relative to the module root
	line  int
	block int    // the code block it is in (numbered from 1 in the file)
	text  string // the command, continuation lines joined
	want  string // for a "$ rbctl ..." line, the output printed under it
}

// docSkips are the commands of the documents that this test does not run, and why. Every
// command either runs or matches one of these: a new command in a document is run unless
// it is added here with its reason.
var docSkips = []struct {
	re     *regexp.Regexp
	reason string
}{
	{regexp.MustCompile(`/dev/(ng|nvme)\d`), "needs a real NVMe device or one the kernel attached (the help examples run the same commands against the emulator: TestEveryExampleRuns)"},
	{regexp.MustCompile(`\bDEV\b|\s(U|P)\s|=U\b|-U-|-U\.`), "a template with placeholders (DEV, U, P), not a command"},
	{regexp.MustCompile(`10\.0\.0\.|0\.0\.0\.0`), "spans several machines"},
	{regexp.MustCompile(`^rbctl … `), "a diagram of the call path (docs/emulator.md), not a command"},
	{regexp.MustCompile(`\s(img)\s`), "reads a device Python LMCache wrote (docs/compat.md, step 3)"},
	{regexp.MustCompile(`--auth-file tokens|--token-file a\.tok|ops\.tok`), "needs the token files a reader makes first (docs/p2p.md, Access control)"},
}

// docEdits make a document's command runnable in a test. Each is a change of scale or
// place, never of meaning: /var/tmp is the scratch directory and bench windows are one
// second without warm-up (a policy's default window is 20 s).
func docEdits(base string) []func(string) string {
	re := func(pat, repl string) func(string) string {
		r := regexp.MustCompile(pat)
		return func(s string) string { return r.ReplaceAllString(s, repl) }
	}
	return []func(string) string{
		re(`/var/tmp/`, base+"/var/"),
		re(`--duration \d+s`, "--duration 1s --warmup 0"),
	}
}

// docFiles are the documents whose commands run: the README and every docs/*.md.
func docFiles(t *testing.T, root string) []string {
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	for i, f := range files {
		files[i], _ = filepath.Rel(root, f)
	}
	return files
}

var rbctlInLine = regexp.MustCompile(`^(?:[A-Z_]+=\S+ )*rbctl |\| rbctl `)

// docCommands lists the rbctl commands in the code blocks (fenced, or indented four spaces
// after a blank line) of file.
func docCommands(t *testing.T, root, file string) []docCmd {
	src, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(src), "\n")
	var out []docCmd
	fence, indented, prevBlank, block := false, false, true, 0
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		trim := strings.TrimSpace(l)
		if strings.HasPrefix(trim, "```") {
			fence = !fence
			prevBlank = false
			if fence {
				block++
			}
			continue
		}
		wasIndented := indented
		indented = !fence && strings.HasPrefix(l, "    ") && (indented || prevBlank)
		if indented && !wasIndented {
			block++
		}
		prevBlank = trim == ""
		if !fence && !indented {
			continue
		}
		s, prompt := strings.CutPrefix(trim, "$ ")
		if !rbctlInLine.MatchString(s) {
			continue
		}
		c := docCmd{file: file, line: i + 1, block: block}
		for strings.HasSuffix(s, `\`) && i+1 < len(lines) {
			i++
			s = strings.TrimSuffix(s, `\`) + " " + strings.TrimSpace(lines[i])
		}
		c.text = s
		if prompt {
			var want []string
			for i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" && !strings.HasPrefix(strings.TrimSpace(lines[i+1]), "$ ") {
				i++
				want = append(want, strings.TrimSpace(lines[i]))
			}
			c.want = strings.Join(want, " ")
		}
		out = append(out, c)
	}
	return out
}

// rbctlPart is the rbctl command of a line (after "| " or "VAR=... "), comment and shell
// redirections or background marks cut off, quoted text blanked so that a quoted "--" is
// no flag.
func rbctlPart(s string) string {
	if i := strings.Index(s, "rbctl "); i >= 0 {
		s = s[i:]
	}
	s = regexp.MustCompile(`'[^']*'|"[^"]*"`).ReplaceAllString(s, "Q")
	s, _, _ = strings.Cut(s, " #")
	for _, sep := range []string{" | ", " > ", " <<< ", " &"} {
		s, _, _ = strings.Cut(s, sep)
	}
	return s
}

// checkDocFlags says what is wrong with the flags of a document's command: a flag the
// command does not have, or a hidden old spelling (the documents teach the current names).
func checkDocFlags(s string) []string {
	words := strings.Fields(rbctlPart(s))[1:]
	c, _, err := NewRoot().Find(words)
	if err != nil {
		return []string{err.Error()}
	}
	var bad []string
	for _, m := range regexp.MustCompile(`(?:^|\s)--([a-z][a-z0-9-]*)`).FindAllStringSubmatch(strings.Join(words, " "), -1) {
		switch f := c.Flag(m[1]); {
		case f == nil && m[1] != "help":
			bad = append(bad, fmt.Sprintf("%s has no flag --%s", c.CommandPath(), m[1]))
		case f != nil && (f.Hidden || f.Deprecated != "" || f.Name != m[1]):
			bad = append(bad, fmt.Sprintf("--%s is an old spelling on %s (now --%s)", m[1], c.CommandPath(), f.Name))
		}
	}
	return bad
}

// TestDocsUseCurrentFlags: every rbctl command in README.md and docs/*.md, run here or
// not, names a command that exists and only its current, visible flags.
func TestDocsUseCurrentFlags(t *testing.T) {
	root := filepath.Join("..", "..", "..", "..")
	n := 0
	for _, f := range docFiles(t, root) {
		for _, c := range docCommands(t, root, f) {
			n++
			for _, b := range checkDocFlags(c.text) {
				t.Errorf("%s:%d: %s\n  %s", c.file, c.line, b, c.text)
			}
		}
	}
	if n < 40 {
		t.Fatalf("found only %d commands in the documents; is the extraction broken?", n)
	}
}

// TestDocsCommandsRun runs every rbctl command of README.md and docs/*.md that needs no
// real NVMe device, other machine or VM, as written (docEdits: places and bench windows),
// each code block's commands in order in a scratch directory of their own (a block is one
// scenario: the next may name the same files afresh), laid out as the repository is:
// docs/examples/ is there, and ../shared is the data the documents name when this machine
// has it. A command exits 0, a "$ rbctl ..." example prints what the document shows under
// it (and fails), and a command ending in "&" is a server, started in the background and
// stopped after the block's last command.
func TestDocsCommandsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the documents' commands")
	}
	root, err := filepath.Abs(filepath.Join("..", "..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	shim := fmt.Sprintf("#!/bin/sh\n%s=1 exec %q \"$@\"\n", envAsMain, os.Args[0])
	if err := os.WriteFile(filepath.Join(bin, "rbctl"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(root, "..", "shared")
	ran, skipped := 0, map[string]int{}
	var blocks [][]docCmd
	for _, file := range docFiles(t, root) {
		for _, c := range docCommands(t, root, file) {
			if n := len(blocks); n > 0 && blocks[n-1][0].file == c.file && blocks[n-1][0].block == c.block {
				blocks[n-1] = append(blocks[n-1], c)
			} else {
				blocks = append(blocks, []docCmd{c})
			}
		}
	}
	for _, cmds := range blocks {
		base := t.TempDir()
		work := filepath.Join(base, "repo")
		for _, d := range []string{filepath.Join(work, "docs", "examples"), filepath.Join(base, "var")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.CopyFS(filepath.Join(work, "docs", "examples"), os.DirFS(filepath.Join(root, "docs", "examples"))); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
		if _, err := os.Stat(shared); err == nil {
			if err := os.Symlink(shared, filepath.Join(base, "shared")); err != nil {
				t.Fatal(err)
			}
		}
		env := append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "TMPDIR="+base, "HOME="+base,
			"XDG_STATE_HOME="+base, "XDG_RUNTIME_DIR="+base)
		var servers []*exec.Cmd
		for _, c := range cmds {
			if i := slices.IndexFunc(docSkips, func(s struct {
				re     *regexp.Regexp
				reason string
			}) bool {
				return s.re.MatchString(c.text)
			}); i >= 0 {
				skipped[docSkips[i].reason]++
				continue
			}
			if m := regexp.MustCompile(`\.\./shared/\S+`).FindString(c.text); m != "" {
				if _, err := os.Stat(filepath.Join(work, m)); err != nil {
					skipped["the data it names is not on this machine ("+m+")"]++
					continue
				}
			}
			line := c.text
			for _, e := range docEdits(base) {
				line = e(line)
			}
			if bg, ok := strings.CutSuffix(line, " &"); ok {
				addr, _ := serverListen(bg)
				if addr == "" {
					addr = "127.0.0.1:7470" // serve's default --listen
				}
				servers = append(servers, startExampleServer(t, work, env, bg, addr))
				t.Logf("  bg  %s:%d %s", c.file, c.line, line)
				ran++
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", line)
			cmd.Dir, cmd.Env = work, env
			start := time.Now()
			out, err := cmd.CombinedOutput()
			cancel()
			ran++
			t.Logf("%5.1fs %s:%d %s", time.Since(start).Seconds(), c.file, c.line, line)
			switch {
			case c.want != "" && err == nil:
				t.Errorf("%s:%d: %s\nsucceeded; the document shows it failing with\n%s", c.file, c.line, line, c.want)
			case c.want != "" && !strings.Contains(strings.Join(strings.Fields(string(bytes.ReplaceAll(out, []byte(work+"/"), nil))), " "), c.want):
				t.Errorf("%s:%d: %s\nprinted\n%s\nthe document shows\n%s", c.file, c.line, line, out, c.want)
			case c.want == "" && err != nil:
				t.Errorf("%s:%d: %s\n%v\n%s", c.file, c.line, line, err, out)
			}
		}
		for _, s := range servers {
			if code := interruptAndWait(t, s); code != 0 && code != exitInterrupted {
				t.Errorf("%s:%d: %s: exit %d after SIGINT", cmds[0].file, cmds[0].line, strings.Join(s.Args, " "), code)
			}
		}
	}
	for reason, n := range skipped {
		t.Logf("not run (%d): %s", n, reason)
	}
	if ran < 20 {
		t.Fatalf("ran only %d commands of the documents", ran)
	}
}
