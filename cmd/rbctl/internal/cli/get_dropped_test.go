package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGetSaysWhyAListedKeyIsNotServed: a key the checkpoint lists whose slot header no longer
// verifies is not "not in the cache": get says the checkpoint lists it and why it is not
// served, and ls warns that keys were left out (third hostile battery, doubt).
func TestGetSaysWhyAListedKeyIsNotServed(t *testing.T) {
	dir := t.TempDir()
	dev := filepath.Join(dir, "c.img")
	mustRbctl(t, dir, "format", "--create", "16M", "--slot-bytes", "64K", dev)
	mustRbctl(t, dir, "put", dev, "--key", "m@0x00000000@01", "-")
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Slot 0 starts at data_base, 1 MiB on 16 MiB with 64 KiB slots; byte 8 is its identity.
	if _, err := f.WriteAt([]byte{0x5a}, 1<<20+8); err != nil {
		t.Fatal(err)
	}
	f.Close()
	code, _, errOut := runRbctl(t, dir, time.Minute, "get", dev, "--key", "m@0x00000000@01")
	if code != 3 || !strings.Contains(errOut, "m@0x00000000@01 is not served: the checkpoint lists it in slot 0, but stale slot header: identity") {
		t.Fatalf("get: exit %d, %s", code, errOut)
	}
	code, _, errOut = runRbctl(t, dir, time.Minute, "ls", dev)
	if code != 0 || !strings.Contains(errOut, "keys the checkpoint lists are left out") || !strings.Contains(errOut, "dropped=1") {
		t.Fatalf("ls: exit %d, %s", code, errOut)
	}
}
