package blockdev

import (
	"os"
	"path/filepath"
	"testing"
)

// discardsAt follows /sys/dev/block/MAJ:MIN's link as sysfs lays it out, reads a disk's
// discard_max_bytes and a partition's from its disk's queue, and knows nothing where there
// is no queue or the value is not a number.
func TestDiscardsAt(t *testing.T) {
	root := t.TempDir()
	mk := func(rel string, files map[string]string) {
		for name, v := range files {
			p := filepath.Join(root, "devices", rel, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("nvme0n1", map[string]string{"queue/discard_max_bytes": "2199023255040\n"})
	mk("nvme0n1/nvme0n1p1", map[string]string{"partition": "1\n"})
	mk("vdb", map[string]string{"queue/discard_max_bytes": "0\n"})
	mk("vdb/vdb1", map[string]string{"partition": "1\n"})
	mk("odd", map[string]string{"queue/discard_max_bytes": "x\n"})
	mk("noqueue", map[string]string{"dev": "7:9\n"})
	links := filepath.Join(root, "dev", "block")
	if err := os.MkdirAll(links, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"259:0": "nvme0n1", "259:1": "nvme0n1/nvme0n1p1", "254:16": "vdb", "254:17": "vdb/vdb1", "1:1": "odd", "7:9": "noqueue"} {
		if err := os.Symlink(filepath.Join("..", "..", "devices", target), filepath.Join(links, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		dev       string
		ok, known bool
	}{{"259:0", true, true}, {"259:1", true, true}, {"254:16", false, true}, {"254:17", false, true}, {"1:1", false, false}, {"7:9", false, false}, {"8:0", false, false}} {
		if ok, known := discardsAt(filepath.Join(links, c.dev)); ok != c.ok || known != c.known {
			t.Errorf("%s: discards %v known %v, want %v %v", c.dev, ok, known, c.ok, c.known)
		}
	}
}
