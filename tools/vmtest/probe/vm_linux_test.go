package probe

// Tests against the real kernel devices of `make vmtest`. Each skips, naming the variable,
// when the harness's environment is absent; inside the VM they must all run and pass.

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func envOrSkip(t *testing.T, names ...string) []string {
	t.Helper()
	vals := make([]string, len(names))
	for i, n := range names {
		vals[i] = os.Getenv(n)
		if vals[i] == "" {
			t.Skipf("%s not set: runs inside `make vmtest` only", n)
		}
	}
	return vals
}

func open(t *testing.T, path string, flag int) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func blockSize64(t *testing.T, f *os.File) uint64 {
	t.Helper()
	var n uint64
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.BLKGETSIZE64, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatalf("BLKGETSIZE64 on %s: %v", f.Name(), e)
	}
	return n
}

func identifyCtrl(t *testing.T, path string) Controller {
	t.Helper()
	b, err := IdentifyController(open(t, path, os.O_RDONLY))
	if err != nil {
		t.Fatal(err)
	}
	c, err := DecodeController(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestVMIdentifyController(t *testing.T) {
	env := envOrSkip(t, "RBCTL_TEST_NVME_CTRL", "RBCTL_TEST_NVME_SERIAL")
	c := identifyCtrl(t, env[0])
	t.Logf("%s: vid %#04x sn %q mn %q fr %q mdts %d ctratt %#x oncs %#x nn %d", env[0], c.VID, c.Serial, c.Model, c.Firmware, c.MDTS, c.CTRATT, c.ONCS, c.NN)
	if c.Serial != env[1] {
		t.Errorf("serial %q, QEMU was given %q", c.Serial, env[1])
	}
	if c.NN == 0 || c.Model == "" {
		t.Errorf("implausible controller: nn %d model %q", c.NN, c.Model)
	}
}

func TestVMIdentifyNamespace(t *testing.T) {
	env := envOrSkip(t, "RBCTL_TEST_NVME_NS", "RBCTL_TEST_NVME_SIZE")
	want, err := strconv.ParseUint(env[1], 10, 64)
	if err != nil {
		t.Fatalf("RBCTL_TEST_NVME_SIZE: %v", err)
	}
	f := open(t, env[0], os.O_RDONLY)
	nsid, err := NamespaceID(f)
	if err != nil {
		t.Fatal(err)
	}
	// Admin ioctls on a namespace char device are routed to its controller.
	b, err := IdentifyNamespace(f, nsid)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := DecodeNamespace(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: nsid %d nsze %d lba %d ms %d => %d bytes", env[0], nsid, ns.NSZE, ns.LBADataSize, ns.MetadataSize, ns.Bytes())
	if nsid != 1 {
		t.Errorf("nsid %d, want 1 (the single namespace QEMU creates)", nsid)
	}
	if ns.Bytes() != want {
		t.Errorf("namespace holds %d bytes, QEMU was given %d", ns.Bytes(), want)
	}
	if ns.MetadataSize != 0 {
		t.Errorf("metadata size %d, want 0", ns.MetadataSize)
	}
}

func TestVMBlockDeviceSize(t *testing.T) {
	env := envOrSkip(t, "RBCTL_TEST_NVME_BLK", "RBCTL_TEST_NVME_SIZE")
	if got := blockSize64(t, open(t, env[0], os.O_RDONLY)); strconv.FormatUint(got, 10) != env[1] {
		t.Errorf("%s is %d bytes, QEMU was given %s", env[0], got, env[1])
	}
}

// TestVMNullbReadBack proves null_blk was loaded memory backed: data written with O_DIRECT
// reads back.
func TestVMNullbReadBack(t *testing.T) {
	path := envOrSkip(t, "RBCTL_TEST_NULLB")[0]
	f := open(t, path, os.O_RDWR|unix.O_DIRECT)
	size := blockSize64(t, f)
	if size < 1<<20 {
		t.Fatalf("%s is only %d bytes", path, size)
	}
	buf, err := unix.Mmap(-1, 0, 2*4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	w, r := buf[:4096], buf[4096:]
	for i := range w {
		w[i] = byte(i*7 + 3)
	}
	off := int64(size/2) &^ 4095
	if _, err := f.WriteAt(w, off); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(r, off); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w, r) {
		t.Fatalf("%s: read back differs from what was written at %d (null_blk not memory_backed?)", path, off)
	}
}

func nvmeCLIJSON(t *testing.T, ctrl string) []byte {
	t.Helper()
	if _, err := exec.LookPath("nvme"); err != nil {
		t.Skip("nvme-cli not in PATH")
	}
	out, err := exec.Command("nvme", "id-ctrl", ctrl, "-o", "json").Output()
	if err != nil {
		t.Fatalf("nvme id-ctrl %s -o json: %v", ctrl, err)
	}
	return out
}

func checkAgreement(t *testing.T, ref, other []byte, required ...string) {
	t.Helper()
	res, err := CompareIdentifyJSON(ref, other)
	if err != nil {
		t.Fatal(err)
	}
	req := map[string]bool{}
	for _, k := range required {
		req[k] = true
	}
	for _, r := range res {
		switch {
		case r.Missing && req[r.Key]:
			t.Errorf("%s: not printed (nvme-cli says %q)", r.Key, r.Want)
		case r.Missing:
			t.Logf("%s: not printed, not compared (nvme-cli says %q)", r.Key, r.Want)
		case !r.Equal:
			t.Errorf("%s: nvme-cli %q, ours %q", r.Key, r.Want, r.Got)
		default:
			t.Logf("%s: both %q", r.Key, r.Got)
		}
	}
}

// TestVMNVMeCLIAgrees checks nvme-cli (in the initramfs with its libraries) and this
// package's decode against each other.
func TestVMNVMeCLIAgrees(t *testing.T) {
	ctrl := envOrSkip(t, "RBCTL_TEST_NVME_CTRL")[0]
	ref := nvmeCLIJSON(t, ctrl)
	c := identifyCtrl(t, ctrl)
	ours, _ := json.Marshal(map[string]any{"sn": c.Serial, "mn": c.Model, "fr": c.Firmware, "ctratt": c.CTRATT, "oncs": c.ONCS})
	checkAgreement(t, ref, ours, "sn", "mn", "fr", "ctratt", "oncs")
}

// TestVMRbctlIdentifyAgrees compares `rbctl identify NS --json` with nvme-cli on the fields
// rbctl prints (serial and model at least).
func TestVMRbctlIdentifyAgrees(t *testing.T) {
	env := envOrSkip(t, "RBCTL_TEST_RBCTL", "RBCTL_TEST_NVME_CTRL", "RBCTL_TEST_NVME_NS")
	if err := exec.Command(env[0], "identify", "--help").Run(); err != nil {
		t.Skipf("%s has no identify command yet", env[0])
	}
	out, err := exec.Command(env[0], "identify", env[2], "--json").Output()
	if err != nil {
		t.Fatalf("rbctl identify %s --json: %v", env[2], err)
	}
	t.Logf("rbctl identify --json: %s", bytes.TrimSpace(out))
	checkAgreement(t, nvmeCLIJSON(t, env[1]), out, "sn", "mn")
}
