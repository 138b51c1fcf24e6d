package nvme

// Real-kernel tests. They run inside the QEMU VM of `make vmtest` (Debian kernel 6.1, QEMU
// 7.2 `-device nvme,serial=deadbeef`), which sets the RBCTL_TEST_NVME_* variables, and skip
// elsewhere. Every expectation below was seen on that kernel/QEMU and is asserted.

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/internal/blockdev"
)

func kernelEnv(t *testing.T) (ns, ctrl string) {
	t.Helper()
	ns, ctrl = os.Getenv("RBCTL_TEST_NVME_NS"), os.Getenv("RBCTL_TEST_NVME_CTRL")
	if ns == "" {
		t.Skip("RBCTL_TEST_NVME_NS not set: real NVMe tests run inside `make vmtest`")
	}
	return ns, ctrl
}

func openKernel(t *testing.T, transport string) Transport {
	t.Helper()
	ns, _ := kernelEnv(t)
	tr, err := Open(ns, OpenOptions{Transport: transport})
	if err != nil {
		t.Fatalf("Open(%s, %q): %v", ns, transport, err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func TestNVMeKernelIdentify(t *testing.T) {
	nsPath, ctrlPath := kernelEnv(t)
	tr, err := OpenIoctl(nsPath, IoctlOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	nodes := tr.Nodes()
	t.Logf("nodes %+v nsid %d max transfer %d", nodes, tr.NSID(), tr.MaxTransferBytes())
	if tr.NSID() != 1 {
		t.Errorf("NVME_IOCTL_ID on %s = %d, want 1", nsPath, tr.NSID())
	}
	if ctrlPath != "" && nodes.Controller != ctrlPath {
		t.Errorf("controller resolved to %q, want %q", nodes.Controller, ctrlPath)
	}
	ns, err := Probe(tr)
	if err != nil {
		t.Fatal(err)
	}
	c := ns.Ctrl
	t.Logf("ctrl: vid %#x sn %q mn %q fr %q mdts %d ver %s ctratt %#x oncs %#x nn %d; ns: nsze %d lbads %d ms %d endgid %d maxxfer %d",
		c.VID, c.SerialNumber, c.ModelNumber, c.Firmware, c.MDTS, c.Version(), c.CTRATT, c.ONCS, c.NN,
		ns.Blocks, ns.Format.LBADS, ns.Format.MS, ns.EnduranceGroup, ns.MaxTransfer)
	if want := os.Getenv("RBCTL_TEST_NVME_SERIAL"); want != "" && c.SerialNumber != want {
		t.Errorf("serial %q, want %q", c.SerialNumber, want)
	}
	if want, err := strconv.ParseInt(os.Getenv("RBCTL_TEST_NVME_SIZE"), 10, 64); err == nil && ns.Capacity != want {
		t.Errorf("capacity %d, want %d", ns.Capacity, want)
	}
	if c.FDPSupported() {
		t.Errorf("QEMU 7.2 has no FDP but CTRATT %#x has FDPS", c.CTRATT)
	}
	if !c.DSMSupported() {
		t.Errorf("QEMU reports DSM in ONCS; got %#x", c.ONCS)
	}
	// The LBA size must match what the kernel's block layer reports for the same namespace.
	if blk := os.Getenv("RBCTL_TEST_NVME_BLK"); blk != "" {
		lbs := readSysInt(filepath.Join("/sys/block", filepath.Base(blk), "queue/logical_block_size"))
		if lbs != ns.BlockSize {
			t.Errorf("LBA size %d, block layer says %d", ns.BlockSize, lbs)
		}
		sectors := readSysInt(filepath.Join("/sys/block", filepath.Base(blk), "size"))
		if int64(sectors)*512 != ns.Capacity {
			t.Errorf("capacity %d, block layer says %d", ns.Capacity, int64(sectors)*512)
		}
	}
	ids, err := ReadActiveNamespaces(tr)
	if err != nil || len(ids) == 0 || ids[0] != 1 {
		t.Errorf("active namespaces %v %v", ids, err)
	}
	if _, err := ReadIndependentNamespace(tr, 1); err != nil {
		t.Errorf("Identify CNS 8: %v", err)
	}
	// The controller node answers admin commands too, and names the same controller.
	if ctrlPath != "" {
		ct, err := OpenIoctl(ctrlPath, IoctlOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer ct.Close()
		c2, err := ReadController(ct)
		if err != nil || c2.SerialNumber != c.SerialNumber {
			t.Errorf("identify via %s: %v %+v", ctrlPath, err, c2)
		}
		ns2, err := Probe(ct)
		if err != nil || ns2.NSID != 1 || ns2.Capacity != ns.Capacity {
			t.Errorf("probe via controller: %v %+v", err, ns2)
		}
	}
}

func testKernelRoundTrip(t *testing.T, transport string) {
	tr := openKernel(t, transport)
	d, err := NewDevice(tr, DeviceOptions{PIDs: []uint16{1}, KeepTransport: true})
	if err != nil {
		t.Fatal(err)
	}
	info := d.Info()
	// Work in the last 4 MiB so other suites using the start of the namespace are not hit.
	const span = 1 << 20
	base := info.Size - 4<<20
	if transport == TransportUring {
		base += 2 << 20
	}
	w := alloc(t, span)
	r := alloc(t, span)
	rng := rand.New(rand.NewPCG(uint64(len(transport)), 42))
	for i := range w {
		w[i] = byte(rng.Uint32())
	}
	// 4 KiB at the start without placement, the rest with DTYPE=2/DSPEC=1 (QEMU 7.2 ignores
	// the directive and completes with status 0), larger than MaxTransfer to force splits.
	ops := []blockdev.Op{
		{Write: true, Off: base, Buf: w[:4096], Handle: blockdev.NoPlacement},
		{Write: true, Off: base + 4096, Buf: w[4096:], Handle: 0},
	}
	if err := d.Submit(ops); err != nil {
		t.Fatalf("write: %v", err)
	}
	if err := d.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if err := blockdev.ReadAt(d, r, base); err != nil {
		t.Fatalf("read: %v", err)
	}
	if !bytes.Equal(r, w) {
		t.Fatal("read back differs from what was written")
	}
	t.Logf("%s: wrote and read %d bytes at %d, max transfer %d", transport, span, base, info.MaxTransfer)
	if err := d.Deallocate([]blockdev.Range{{Off: base, Len: span}}); err != nil {
		t.Fatalf("DSM deallocate: %v", err)
	}
}

func TestNVMeKernelIoctlRoundTrip(t *testing.T) { testKernelRoundTrip(t, TransportIoctl) }
func TestNVMeKernelUringRoundTrip(t *testing.T) { testKernelRoundTrip(t, TransportUring) }

func TestNVMeKernelNoFDP(t *testing.T) {
	tr := openKernel(t, TransportIoctl)
	// I/O Management Receive (RUH status): QEMU 7.2 answers Invalid Opcode with DNR (0x4001).
	_, _, err := IORead(tr, 4096, func(buf []byte) (Command, error) {
		return IOMgmtRecv(tr.NSID(), IOMgmtRecvRUHStatus, 0, buf)
	})
	var se *StatusError
	if !errors.Is(err, ErrInvalidOpcode) || !errors.As(err, &se) || se.Status != 0x4001 {
		t.Errorf("I/O Management Receive: %v, want status 0x4001", err)
	}
	if err != nil && !strings.Contains(err.Error(), "I/O Management Receive") {
		t.Errorf("error does not name the command: %v", err)
	}
	// Get Log Page 0x20 (FDP configurations): Invalid Field with DNR (0x4002).
	_, err = GetLog(tr, LogPage{LID: LogFDPConfigs, LSI: 1}, 512)
	if !errors.Is(err, ErrInvalidField) || !errors.As(err, &se) || se.Status != 0x4002 {
		t.Errorf("Get Log Page 0x20: %v, want status 0x4002", err)
	}
	t.Logf("as expected: %v", err)
}
