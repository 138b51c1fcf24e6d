// Package looptest attaches loop devices for the tests that need a real block device. A
// test that cannot have one (not root, no losetup from util-linux, no free loop device) is
// skipped with the reason; the device is detached when the test ends. It imports nothing
// of ours, so any package's tests may use it.
package looptest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Options choose how the file is attached.
type Options struct {
	// DirectIO attaches with --direct-io=on (the loop driver bypasses the page cache of the
	// backing file); where the backing filesystem refuses it, the file is attached without.
	DirectIO bool
}

// Attach attaches the existing file img to a free loop device and returns its path.
func Attach(t testing.TB, img string, o Options) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to attach a loop device")
	}
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Skip("losetup not installed (util-linux)")
	}
	var out []byte
	var err error
	if o.DirectIO {
		out, err = exec.Command("losetup", "--find", "--show", "--direct-io=on", img).CombinedOutput()
	}
	if !o.DirectIO || err != nil {
		out, err = exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	}
	if err != nil {
		t.Skipf("cannot attach a loop device here: %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Logf("losetup -d %s: %v: %s", dev, err, out)
		}
	})
	return dev
}

// New attaches a new sparse file of size bytes (in t.TempDir()) and returns the loop
// device's path.
func New(t testing.TB, size int64, o Options) string {
	t.Helper()
	img := File(t, size)
	return Attach(t, img, o)
}

// File creates a sparse file of size bytes in t.TempDir() and returns its path.
func File(t testing.TB, size int64) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "loop.img")
	f, err := os.OpenFile(img, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return img
}
