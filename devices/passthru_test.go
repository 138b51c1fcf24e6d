package devices

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/internal/looptest"
	"github.com/rbctl/rbctl/nvme"
	"github.com/rbctl/rbctl/placement"
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
	if _, err := Open("/dev/null", Options{IOPath: "passthru"}); !errors.Is(err, nvme.ErrNotNVMe) {
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
	open := true
	defer func() {
		if open {
			d.Close()
		}
	}()
	info := d.Info()
	// Placement handles: none without FDP; with FDP one per placement identifier the
	// namespace has (nrg × nruh on QEMU's device).
	wantHandles := 0
	if os.Getenv("RBCTL_TEST_FDP") == "on" {
		nrg, _ := strconv.Atoi(os.Getenv("RBCTL_TEST_FDP_NRG"))
		nruh, _ := strconv.Atoi(os.Getenv("RBCTL_TEST_FDP_NRUH"))
		wantHandles = nrg * nruh
	}
	if info.Kind != blockdev.KindNVMeChar || !info.Direct || info.Handles != wantHandles || !info.Deallocate {
		t.Errorf("info %+v, want an O_DIRECT nvme-char device with deallocate and %d handles", info, wantHandles)
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
	if err := blockdev.WriteAt(d, w, off, placement.None); err != nil {
		t.Fatal(err)
	}
	if err := blockdev.ReadAt(d, r, off); err != nil || !bytes.Equal(w, r) {
		t.Fatalf("read back: %v equal %v", err, bytes.Equal(w, r))
	}
	if err := d.Deallocate([]blockdev.Range{{Off: off, Len: 4096}}); err != nil {
		t.Errorf("deallocate: %v", err)
	}
	// A reader beside the writer is refused (single writer: readers share only with readers);
	// once the writer is gone it opens.
	if _, err := Open(ns, Options{IOPath: "passthru", ReadOnly: true}); err == nil || !strings.Contains(err.Error(), "in use by PID") {
		t.Errorf("read-only open beside the writer: %v, want it refused as in use", err)
	}
	open = false
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(ns, Options{IOPath: "passthru", ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := blockdev.WriteAt(ro, w, off, placement.None); !errors.Is(err, nvme.ErrReadOnly) {
		t.Errorf("write on a read-only passthrough device: %v", err)
	}
}

// TestClaimNamespaceOnABlockDevice: a passthrough writer holds its namespace's block device
// O_EXCL for as long as it is open (here a loop device stands in for /dev/nvmeXnY), so a
// second writer — through any engine — and a mount are refused; readers only share a lock.
func TestClaimNamespaceOnABlockDevice(t *testing.T) {
	loop := looptest.New(t, 16<<20, looptest.Options{})

	claims, err := claimNamespace(loop, Options{Exclusive: true})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: %v (%d claims)", err, len(claims))
	}
	if d, err := blockdev.OpenFile(loop, blockdev.FileOptions{Exclusive: true, QueueDepth: 1}); err == nil {
		d.Close()
		t.Fatal("an exclusive open beside the claim succeeded")
	}
	if _, err := claimNamespace(loop, Options{Exclusive: true}); err == nil || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("second claim: %v", err)
	}
	if ro, err := claimNamespace(loop, Options{ReadOnly: true}); err != nil || len(ro) != 0 {
		t.Fatalf("a reader beside the claim: %v %d", err, len(ro))
	}
	for _, f := range claims {
		f.Close()
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", loop).CombinedOutput(); err != nil {
		t.Skipf("mkfs.ext4: %v: %s", err, out)
	}
	if out, err := exec.Command("mount", loop, mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount here: %v: %s", err, out)
	}
	defer exec.Command("umount", mnt).Run()
	_, err = claimNamespace(loop, Options{Exclusive: true})
	if err == nil || !strings.Contains(err.Error(), "mounted at "+mnt) {
		t.Fatalf("claim of a mounted device: %v, want it named as mounted at %s", err, mnt)
	}
}

// TestOpenMissingEmuCreatesNothing: devices.Open never creates an emulated device.
func TestOpenMissingEmuCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	for _, ro := range []bool{true, false} {
		_, err := Open("emu:"+filepath.Join(dir, "e.img")+"?size=16M&ru=1M", Options{ReadOnly: ro})
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("read-only %v: %v, want fs.ErrNotExist", ro, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("created %v", ents)
	}
}

// TestPassthruOpenDevice: the VM's /dev/ngXnY opens through OpenDevice with its FDP view
// (when the device has FDP) and through OpenAdmin for Identify. Runs inside `make vmtest`.
func TestPassthruOpenDevice(t *testing.T) {
	ns := os.Getenv("RBCTL_TEST_NVME_NS")
	if ns == "" {
		t.Skip("RBCTL_TEST_NVME_NS not set: real NVMe tests run inside `make vmtest`")
	}
	o, err := OpenDevice(ns, Options{ReadOnly: true, Direct: true})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if o.IOPath != PathPassthru || o.Info().Kind != blockdev.KindNVMeChar {
		t.Errorf("engine %s kind %s", o.IOPath, o.Info().Kind)
	}
	if os.Getenv("RBCTL_TEST_FDP") == "on" {
		if o.FDP == nil {
			t.Fatalf("no FDP view: %v", o.NoFDP)
		}
		nrg, _ := strconv.Atoi(os.Getenv("RBCTL_TEST_FDP_NRG"))
		nruh, _ := strconv.Atoi(os.Getenv("RBCTL_TEST_FDP_NRUH"))
		if len(o.FDP.PIDs()) != nrg*nruh || o.FDP.ReclaimGroups() != nrg {
			t.Errorf("PIDs %v, %d groups; want %d x %d", o.FDP.PIDs(), o.FDP.ReclaimGroups(), nrg, nruh)
		}
		if _, err := o.FDP.Stats(); err != nil {
			t.Errorf("stats: %v", err)
		}
	} else if o.FDP != nil || !errors.Is(o.NoFDP, fdp.ErrFDPNotSupported) {
		t.Errorf("FDP view %v, NoFDP %v on a device without FDP", o.FDP, o.NoFDP)
	}
	a, err := OpenAdmin(ns, AdminOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	id, err := a.Identify()
	if err != nil || id.CapacityBytes != o.Info().Size {
		t.Errorf("identify %+v %v, device size %d", id, err, o.Info().Size)
	}
}
