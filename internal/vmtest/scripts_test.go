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
		{[]string{"bash", "-n"}, []string{filepath.Join(scriptsDir, "run.sh"), filepath.Join(scriptsDir, "boot.sh")}},
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
