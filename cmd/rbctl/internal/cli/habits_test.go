package cli

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A mistyped command or flag gets the nearest one; an unknown one with nothing near gets
// where to look.
func TestSuggestions(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"benhc"}, `unknown command "benhc" for "rbctl"; did you mean bench?`},
		{[]string{"fdp", "stauts"}, "did you mean stats or status?"},
		{[]string{"bench", "--plcement", "none", "x.img"}, "unknown flag: --plcement; did you mean --placement?"},
		{[]string{"simulate", "--devce-size", "1T"}, "did you mean --device-size?"},
		{[]string{"simulate", "--zzzzzzzz"}, "unknown flag: --zzzzzzzz (rbctl simulate --help lists the flags)"},
	} {
		_, err := runCLI(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("rbctl %s: %v; want %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}

// The enumerated flags complete their values, the last element of a list too.
func TestFlagValueCompletion(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
		not  string
	}{
		{[]string{"bench", "--placement", "none,cache-salt:h"}, []string{"none,cache-salt:hash"}, "none\n"},
		{[]string{"simulate", "--placement", "oracle:salt-l"}, []string{"oracle:salt-lifetime"}, ""},
		{[]string{"simulate", "--model", "llama3"}, []string{"llama3-8b", "llama3-70b"}, "tiny"},
		{[]string{"bench", "--eviction", "reg"}, []string{"region", "region-fifo"}, "lru"},
		{[]string{"simulate", "--workload", "moon"}, []string{"mooncake:"}, ""},
		{[]string{"simulate", "--admission", "all,t"}, []string{"all,tinylfu"}, ""},
		{[]string{"serve", "--eviction", ""}, []string{"lru", "none"}, ""},
		{[]string{"serve", "--deallocate", ""}, []string{"devices", "all", "none"}, ""},
		{[]string{"bench", "--deallocate", ""}, []string{"all", "none"}, "devices"},
		{[]string{"rm", "--deallocate", "n"}, []string{"none"}, "devices"},
	} {
		out, err := runCLI(t, append([]string{"__complete"}, c.args...)...)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w+"\n") {
				t.Errorf("complete %v: %q lacks %q", c.args, out, w)
			}
		}
		if c.not != "" && strings.Contains(out, c.not) {
			t.Errorf("complete %v: %q offers %q", c.args, out, c.not)
		}
	}
}

// Help lists commands under headings and a long flag list in groups, with no internal tags.
func TestHelpGroups(t *testing.T) {
	out, err := runCLI(t, "--help")
	if err != nil || !strings.Contains(out, "A cache on a device:\n  format") || !strings.Contains(out, "Measuring placement:") {
		t.Fatalf("rbctl --help: %v\n%s", err, out)
	}
	for _, cmd := range []string{"bench", "simulate"} {
		out, err := runCLI(t, cmd, "--help")
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range []string{"Device and layout flags:", "Drive model (FTL) flags:", "Placement, eviction, admission flags:", "Workload and window flags:", "Output flags:"} {
			if cmd == "simulate" && h == "Device and layout flags:" {
				continue
			}
			if !strings.Contains(out, "\n"+h+"\n") {
				t.Errorf("%s --help has no %q", cmd, h)
			}
		}
		if strings.Contains(out, "(H4)") || strings.Contains(out, "(H6)") {
			t.Errorf("%s --help carries an internal tag", cmd)
		}
	}
}

// A read-only command on a device a node serves points to the node; a missing DEV is named
// as such, not as an I/O engine's; a count of one reads "1 entry".
func TestServedMissingAndOne(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	dir := t.TempDir()
	img := dir + "/a.img"
	if code, _, se := runRbctl(t, dir, time.Minute, "format", "--create", "16M", "--slot-bytes", "64K", img); code != 0 {
		t.Fatalf("format: exit %d: %s", code, se)
	}
	if err := os.WriteFile(dir+"/v", []byte("value"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, se := runRbctl(t, dir, time.Minute, "put", img, "--key", "m@0x00000000@aa", dir+"/v"); code != 0 {
		t.Fatalf("put: exit %d: %s", code, se)
	}
	if out, err := runCLI(t, "recover", "--dry-run", img); err != nil || !strings.Contains(out, ": 1 entry, kept 1") {
		t.Errorf("recover: %v\n%s", err, out)
	}
	code, _, se := runRbctl(t, dir, time.Minute, "inspect", dir+"/no-such.img")
	if code != exitNotFound || strings.Contains(se, "uring") || !strings.Contains(se, "no-such.img: no such file or directory") {
		t.Errorf("inspect of a missing file: exit %d, %q", code, se)
	}
	srv, _, _ := startServe(t, dir, img, "--cluster", "none")
	defer srv.Process.Kill()
	for _, c := range []string{"inspect", "ls"} {
		code, _, se := runRbctl(t, dir, time.Minute, c, img)
		if code == 0 || !strings.Contains(se, "serve); a node serves it: rbctl remote ls --server HOST:PORT lists its keys") {
			t.Errorf("%s on a served device: exit %d, %q", c, code, se)
		}
	}
}

// simulate says before a long run what it will take, on stderr even when that is no
// terminal (and draws no progress line there).
func TestSimulateWarnsOfALongRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	cmd := exec.Command(os.Args[0], "simulate", "--device-size", "16T", "--placement", "none,cache-salt")
	cmd.Env = append(os.Environ(), envAsMain+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(line, "simulate: 2 runs, estimated ") || !strings.Contains(line, "of memory at most") || strings.Contains(line, "ETA") {
		t.Fatalf("first stderr line %q", line)
	}
}
