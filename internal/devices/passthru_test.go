package devices

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"testing"

	"github.com/rbctl/rbctl/internal/blockdev"
	"github.com/rbctl/rbctl/nvme"
)

func TestIsNVMeGeneric(t *testing.T) {
	for p, want := range map[string]bool{
		"/dev/ng0n1": true, "/dev/ng12n3": true, "ng1n1": true,
		"/dev/nvme0n1": false, "/dev/nvme0": false, "/dev/ng0": false, "/tmp/ng0n1x": false,
	} {
		if isNVMeGeneric(p) != want {
			t.Errorf("isNVMeGeneric(%q) = %v", p, !want)
		}
	}
	if _, err := Open("/dev/null", Options{IOEngine: "passthru"}); !errors.Is(err, nvme.ErrNotNVMe) {
		t.Errorf("passthru on /dev/null: %v", err)
	}
}

// TestPassthruNVMeDevice opens the VM's /dev/ngXnY with the default options (which route it
// to the NVMe passthrough engine) and round-trips a block. Runs inside `make vmtest`.
func TestPassthruNVMeDevice(t *testing.T) {
	ns := os.Getenv("RBCTL_TEST_NVME_NS")
	if ns == "" {
		t.Skip("RBCTL_TEST_NVME_NS not set: real NVMe tests run inside `make vmtest`")
	}
	d, err := Open(ns, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	info := d.Info()
	if info.Kind != blockdev.KindNVMeChar || !info.Direct || info.Handles != 0 || !info.Deallocate {
		t.Errorf("info %+v", info)
	}
	if want, err := strconv.ParseInt(os.Getenv("RBCTL_TEST_NVME_SIZE"), 10, 64); err == nil && info.Size != want {
		t.Errorf("size %d, want %d", info.Size, want)
	}
	buf, err := blockdev.Alloc(8192)
	if err != nil {
		t.Fatal(err)
	}
	defer blockdev.Free(buf)
	w, r := buf[:4096], buf[4096:]
	for i := range w {
		w[i] = byte(i ^ 0x5a)
	}
	off := info.Size - 40<<20 // clear of the nvme package's regions
	if err := blockdev.WriteAt(d, w, off, blockdev.NoPlacement); err != nil {
		t.Fatal(err)
	}
	if err := blockdev.ReadAt(d, r, off); err != nil || !bytes.Equal(w, r) {
		t.Fatalf("read back: %v equal %v", err, bytes.Equal(w, r))
	}
	if err := d.Deallocate([]blockdev.Range{{Off: off, Len: 4096}}); err != nil {
		t.Errorf("deallocate: %v", err)
	}
	ro, err := Open(ns, Options{IOEngine: "passthru", ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := blockdev.WriteAt(ro, w, off, blockdev.NoPlacement); !errors.Is(err, nvme.ErrReadOnly) {
		t.Errorf("write on a read-only passthrough device: %v", err)
	}
}
