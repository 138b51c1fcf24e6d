package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// End to end: the hint reaches the user's message, and the error still wraps the sentinel.
func TestFlagHintsThroughCommands(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.img")
	if err := os.WriteFile(small, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := rbRun(t, "", "format", "--slot-bytes", "1M", "--meta-bytes", "1M", small)
	if err == nil || !strings.Contains(err.Error(), "meta_total_bytes is --meta-bytes") || exitCode(t.Context(), err) != exitError {
		t.Fatalf("format on a too small device: %v", err)
	}
	empty := filepath.Join(dir, "empty.img")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := rbRun(t, "", "format", empty); err == nil || !strings.Contains(err.Error(), "--create SIZE makes it") {
		t.Fatalf("format of an empty file: %v", err)
	}
	if _, err := rbRun(t, "", "get", empty, "--key", "m@0x00000000@00"); err == nil || !strings.Contains(err.Error(), "rbctl format --create SIZE") {
		t.Fatalf("get of an empty file: %v", err)
	}
}
