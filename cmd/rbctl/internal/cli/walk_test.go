package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The walk of `rbctl put` to a file, from a real run (docs/architecture.md, "Three walks"):
// the command runs in this process while a sampler snapshots every goroutine's stack until
// one is inside the device's Submit with the command's frames below it. A file has no
// device to wrap (the write is an io_uring submission), so the stack is sampled, not hooked;
// the put is repeated until a sample lands in it.

const modulePrefix = "github.com/rbctl/rbctl/"

var frameFunc = regexp.MustCompile(`^(github\.com/rbctl/rbctl/[^\s(]*?)\.([^\s/]*\(.*)$`)

// walkSteps maps a goroutine's stack text to module packages, outermost first, each once.
func walkSteps(stack string) [][2]string {
	var rev [][2]string
	lines := strings.Split(stack, "\n")
	for k, line := range lines {
		m := frameFunc.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(line, "created by") || (k+1 < len(lines) && strings.Contains(lines[k+1], "_test.go:")) {
			continue // not the module's, or the test's own frames
		}
		pkg := strings.TrimPrefix(m[1], modulePrefix)
		fn := m[2][:strings.LastIndex(m[2], "(")]
		if len(rev) > 0 && rev[len(rev)-1][0] == pkg {
			rev[len(rev)-1][1] = fn + " → " + rev[len(rev)-1][1]
		} else {
			rev = append(rev, [2]string{pkg, fn})
		}
	}
	var out [][2]string
	seen := map[string]bool{}
	for i := len(rev) - 1; i >= 0; i-- {
		if !seen[rev[i][0]] {
			seen[rev[i][0]] = true
			out = append(out, rev[i])
		}
	}
	return out
}

// samplePut runs rbctl put of a large value until a stack snapshot shows the putting
// goroutine inside blockdev with cli frames below it, and returns that goroutine's stack.
func samplePut(t *testing.T, dev string, value string) string {
	var found atomic.Value
	stop := make(chan struct{})
	go func() {
		buf := make([]byte, 1<<20)
		for {
			select {
			case <-stop:
				return
			default:
			}
			n := runtime.Stack(buf, true)
			for _, g := range strings.Split(string(buf[:n]), "\n\n") {
				if strings.Contains(g, modulePrefix+"blockdev.") && strings.Contains(g, modulePrefix+"cmd/rbctl/internal/cli.") && strings.Contains(g, "PutMany") {
					found.Store(g)
					return
				}
			}
			time.Sleep(20 * time.Microsecond)
		}
	}()
	defer close(stop)
	for i := range 400 {
		if _, err := rbRun(t, value, "put", dev, "--model", "org/m", "--rank", "0", "--hash", fmt.Sprintf("%04x", i), "--salt", "t1", "-"); err != nil {
			t.Fatal(err)
		}
		if g, ok := found.Load().(string); ok {
			return g
		}
	}
	t.Skip("no stack sample landed inside a put's device write in 400 puts")
	return ""
}

func TestWalkPut(t *testing.T) {
	dev := filepath.Join(t.TempDir(), "cache.img")
	if _, err := rbRun(t, "", "format", "--create", "1G", "--slot-bytes", "4M", dev); err != nil {
		t.Fatal(err)
	}
	steps := walkSteps(samplePut(t, dev, strings.Repeat("kv", 2<<20-2048)))
	got := ""
	for _, s := range steps {
		got += " " + s[0]
	}
	got += " "
	for _, w := range [][2]string{{"cmd/rbctl/internal/cli", "engine"}, {"engine", "blockdev"}} {
		i, j := strings.Index(got, " "+w[0]+" "), strings.Index(got, " "+w[1]+" ")
		if i < 0 || j < 0 || i > j {
			t.Errorf("put walk %q: want %s before %s", got, w[0], w[1])
		}
	}
	if os.Getenv("RBCTL_ARCHDOC_TRACE") != "1" {
		return
	}
	var b strings.Builder
	b.WriteString("| # | package | functions on the path (outermost first) |\n|---|---|---|\n")
	for i, s := range steps {
		fns := strings.Split(s[1], " → ")
		if len(fns) > 4 {
			fns = append(append(fns[:2:2], "…"), fns[len(fns)-2:]...)
		}
		fmt.Fprintf(&b, "| %d | `%s` | %s |\n", i+1, s[0], strings.Join(fns, " → "))
	}
	file := filepath.Join("..", "..", "..", "..", "docs", "architecture.md")
	doc, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := "<!-- archdoc:walk-put:begin -->\n", "<!-- archdoc:walk-put:end -->"
	i, j := strings.Index(string(doc), begin), strings.Index(string(doc), end)
	if i < 0 || j < i {
		t.Fatal("docs/architecture.md has no archdoc:walk-put section")
	}
	out := string(doc[:i+len(begin)]) + b.String() + string(doc[j:])
	if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
}
