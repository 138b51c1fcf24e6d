package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rbctl/rbctl/devices/safety"
)

// A bench reruns on the file (or emulated SSD) it left without the force override; once
// anything else has written the file, or a file it never made holds a cache, the gate
// refuses again.
func TestBenchRerunsOnItsOwnCache(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Setxattr(dir, "user.probe", []byte("1"), 0); err != nil {
		t.Skipf("no user extended attributes on %s: %v", dir, err)
	}
	for _, dev := range []string{filepath.Join(dir, "b.img"), "emu:" + filepath.Join(dir, "e.img") + "?size=64M&ru=1M&ruhs=4&op=0.15"} {
		o := fixedOptions()
		o.Policies, o.Workload.Requests, o.Path = []string{"none"}, 300, dev
		o.Create = 64 << 20
		file := markFile(dev)
		if file != "" {
			t.Fatalf("%s: marked file %q before it exists", dev, file)
		}
		for i := range 2 {
			if _, err := Run(context.Background(), o); err != nil {
				t.Fatalf("%s: run %d: %v", dev, i+1, err)
			}
		}
		file = markFile(dev)
		if !isOwn(dev) {
			t.Fatalf("%s: not recognised as bench's own after two runs", dev)
		}
		// Another writer: the mark no longer matches, the cache needs the override.
		later := time.Now().Add(time.Second)
		if err := os.Chtimes(file, later, later); err != nil {
			t.Fatal(err)
		}
		_, err := Run(context.Background(), o)
		if !errors.Is(err, safety.ErrHasData) {
			t.Fatalf("%s: after another write: %v, want ErrHasData", dev, err)
		}
		o.Force = true
		if _, err := Run(context.Background(), o); err != nil {
			t.Fatalf("%s: with force: %v", dev, err)
		}
		if !isOwn(dev) {
			t.Fatalf("%s: a forced run does not mark its result", dev)
		}
	}
}
