package blockdev

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/internal/looptest"
)

// TestLoopDeviceOverAHeldFileIsInUse is issue 35's fourth case: `losetup` over the file a
// writer holds, then a writer (or reader) on the loop device. Before, the loop device
// opened and `format --force /dev/loop1` erased the live cache; now it is refused naming
// the holder, with both backends, and a writer on the loop device keeps writers off the file.
func TestLoopDeviceOverAHeldFileIsInUse(t *testing.T) {
	img := looptest.File(t, 8<<20)
	loop := looptest.Attach(t, img, looptest.Options{})
	opens := map[string]func(path string, ro bool) (Device, error){
		"posix": func(p string, ro bool) (Device, error) { return OpenFile(p, FileOptions{ReadOnly: ro}) },
		"uring": func(p string, ro bool) (Device, error) {
			return OpenUring(p, UringOptions{ReadOnly: ro, Buffered: true, NoWriteStreams: true})
		},
	}
	for name, open := range opens {
		t.Run(name, func(t *testing.T) {
			held, err := open(img, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, ro := range []bool{false, true} {
				d, err := open(loop, ro)
				if err == nil {
					d.Close()
					t.Fatalf("read-only %v: %s opened while %s is held", ro, loop, img)
				}
				var le *LockedError
				want := fmt.Sprintf("%s is a loop device over %s: in use by PID %d", loop, img, os.Getpid())
				if !errors.Is(err, ErrLocked) || !errors.As(err, &le) || !strings.Contains(err.Error(), want) {
					t.Fatalf("read-only %v: err = %v; want it to contain %q", ro, err, want)
				}
			}
			held.Close()
			onLoop, err := open(loop, false)
			if err != nil {
				t.Fatalf("%s after the file was let go: %v", loop, err)
			}
			if d, err := open(img, false); err == nil {
				d.Close()
				t.Fatalf("%s opened for writing while a writer holds %s over it", img, loop)
			} else if !errors.Is(err, ErrLocked) {
				t.Fatalf("file under a held loop device: %v", err)
			}
			onLoop.Close()
			d, err := open(img, false)
			if err != nil {
				t.Fatalf("file after the loop device was let go: %v", err)
			}
			d.Close()
		})
	}
}
