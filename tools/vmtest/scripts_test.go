package vmtest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const scriptsDir = "../../scripts/vmtest"

// TestScriptsParse catches syntax errors in the harness before a CI boot does: run.sh and the
// boot.sh it sources with bash, the guest's init and hooks with busybox sh (the shell they
// run under).
func TestScriptsParse(t *testing.T) {
	hooks, _ := filepath.Glob(filepath.Join(scriptsDir, "guest.d", "*.sh"))
	tests := []struct {
		shell []string
		files []string
	}{
		{[]string{"bash", "-n"}, []string{filepath.Join(scriptsDir, "run.sh"), filepath.Join(scriptsDir, "boot.sh"),
			filepath.Join(scriptsDir, "guest-apt.sh"), "../../scripts/setup.sh"}},
		{[]string{"busybox", "sh", "-n"}, append([]string{filepath.Join(scriptsDir, "init.sh")}, hooks...)},
	}
	for _, tt := range tests {
		if _, err := exec.LookPath(tt.shell[0]); err != nil {
			t.Logf("%s not installed: not checking %v", tt.shell[0], tt.files)
			continue
		}
		for _, f := range tt.files {
			args := append(tt.shell[1:], f)
			if out, err := exec.Command(tt.shell[0], args...).CombinedOutput(); err != nil {
				t.Errorf("%s %s: %v\n%s", strings.Join(tt.shell, " "), f, err, out)
			}
		}
	}
}

// TestPackagesFile checks scripts/vmtest/packages: every listed package exists in the
// module tree, and every filter is a regexp `go test -run` accepts.
func TestPackagesFile(t *testing.T) {
	f, err := os.Open(filepath.Join(scriptsDir, "packages"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) > 2 {
			t.Errorf("%q: want <package> [<regex>] (no spaces in the regex)", line)
			continue
		}
		if st, err := os.Stat(filepath.Join("../..", fields[0])); err != nil || !st.IsDir() {
			t.Logf("%s: not in the tree (yet); the harness ignores it", fields[0])
		}
		if len(fields) == 2 {
			if _, err := regexp.Compile(fields[1]); err != nil {
				t.Errorf("%s: bad -test.run regex: %v", fields[0], err)
			}
		}
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no packages listed")
	}
}

// TestScenariosFile checks scripts/vmtest/scenarios: every line names a scenario run.sh
// knows, a package that exists (or an @include of a scenario that has lines), and a regexp
// `go test -run` accepts; every scenario but qemu-nofdp (which runs the packages file) has
// tests.
func TestScenariosFile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(scriptsDir, "run.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ALL_SCENARIOS="([^"]+)"`).FindSubmatch(b)
	if m == nil {
		t.Fatal("run.sh has no ALL_SCENARIOS line")
	}
	known := map[string]int{}
	for _, s := range strings.Fields(string(m[1])) {
		known[s] = 0
	}
	f, err := os.Open(filepath.Join(scriptsDir, "scenarios"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var includes [][2]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 || len(fields) > 3 {
			t.Errorf("%q: want <scenario> <package> [<regex>] or <scenario> @<scenario>", line)
			continue
		}
		n, ok := known[fields[0]]
		if !ok {
			t.Errorf("%q: scenario %q is not in run.sh's ALL_SCENARIOS", line, fields[0])
			continue
		}
		known[fields[0]] = n + 1
		if strings.HasPrefix(fields[1], "@") {
			includes = append(includes, [2]string{fields[0], fields[1][1:]})
			continue
		}
		if st, err := os.Stat(filepath.Join("../..", fields[1])); err != nil || !st.IsDir() {
			t.Errorf("%q: package %s is not in the tree", line, fields[1])
		}
		if len(fields) == 3 {
			if _, err := regexp.Compile(fields[2]); err != nil {
				t.Errorf("%q: bad -test.run regex: %v", line, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, inc := range includes {
		if known[inc[1]] == 0 || inc[0] == inc[1] {
			t.Errorf("%s includes @%s, which has no lines of its own", inc[0], inc[1])
		}
	}
	for s, n := range known {
		if n == 0 && s != "qemu-nofdp" {
			t.Errorf("scenario %s has no tests in scripts/vmtest/scenarios", s)
		}
	}
}
