package blockdev

import (
	"os"
	"path/filepath"
	"testing"
)

// discardsAt reads a block device's discard_max_bytes, a partition's from its disk's queue
// one level up, and knows nothing where neither has one or the value is not a number.
func TestDiscardsAt(t *testing.T) {
	root := t.TempDir()
	write := func(dir, v string) string {
		q := filepath.Join(root, dir, "queue")
		if err := os.MkdirAll(q, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(q, "discard_max_bytes"), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(root, dir)
	}
	yes, no, bad := write("nvme0n1", "2199023255040\n"), write("vdb", "0\n"), write("odd", "x\n")
	part := filepath.Join(yes, "nvme0n1p1")
	if err := os.MkdirAll(part, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dir       string
		ok, known bool
	}{{yes, true, true}, {no, false, true}, {part, true, true}, {bad, false, false}, {filepath.Join(root, "none"), false, false}} {
		if ok, known := discardsAt(c.dir); ok != c.ok || known != c.known {
			t.Errorf("%s: discards %v known %v, want %v %v", c.dir, ok, known, c.ok, c.known)
		}
	}
}
