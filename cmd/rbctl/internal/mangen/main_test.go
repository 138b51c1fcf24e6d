package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A page per command, each with its flags and examples as --help has them.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	if err := write(dir); err != nil {
		t.Fatal(err)
	}
	for page, want := range map[string]string{
		"rbctl.1": "rbctl-bench(1)", "rbctl-bench.1": `\fB--placement\fP`, "rbctl-remote-ls.1": `\fB--server\fP`,
		"rbctl-simulate.1": "EXAMPLE", "rbctl-fdp-status.1": `\fB--watch\fP`,
	} {
		b, err := os.ReadFile(filepath.Join(dir, page))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %q", page, want)
		}
	}
}
