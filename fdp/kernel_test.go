package fdp_test

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/nvme"
	"github.com/rbctl/rbctl/placement"
)

// counting counts the commands that reach a real device.
type counting struct {
	nvme.Transport
	n atomic.Int64
}

func (c *counting) Admin(cmd *nvme.Command) nvme.Completion {
	c.n.Add(1)
	return c.Transport.Admin(cmd)
}

func (c *counting) IO(cmds []nvme.Command, done []nvme.Completion) {
	c.n.Add(int64(len(cmds)))
	c.Transport.IO(cmds, done)
}

// TestKernelDiscover runs discovery on the NVMe namespace the VM test gives
// (RBCTL_TEST_NVME_NS, e.g. /dev/ng0n1). A controller without FDP (CTRATT bit 19 clear):
// discovery must say so after Identify Controller alone. One with FDP must give a
// consistent PID table (kernelFDP checks it against the harness's configuration).
func TestKernelDiscover(t *testing.T) {
	path := os.Getenv("RBCTL_TEST_NVME_NS")
	if path == "" {
		t.Skip("RBCTL_TEST_NVME_NS not set: runs inside the QEMU VM test (scripts/vmtest)")
	}
	tr, err := nvme.Open(path, nvme.OpenOptions{})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer tr.Close()
	ctrl, err := nvme.ReadController(tr)
	if err != nil {
		t.Fatal(err)
	}
	c := &counting{Transport: tr}
	d, err := fdp.Discover(c)
	if !ctrl.FDPSupported() {
		if !errors.Is(err, fdp.ErrFDPNotSupported) || !strings.Contains(err.Error(), "CTRATT bit 19 clear") || !strings.Contains(err.Error(), ctrl.ModelNumber) {
			t.Fatalf("discover on %s (%s): %v", path, ctrl.ModelNumber, err)
		}
		if n := c.n.Load(); n != 1 {
			t.Errorf("%d commands sent to a device without FDP, want 1 (Identify)", n)
		}
		return
	}
	if err != nil {
		t.Fatalf("discover on an FDP device: %v", err)
	}
	if d.Feature.Enabled && (d.Status == nil || len(d.PIDs) != len(d.Status.Descs)) {
		t.Errorf("discovery %+v", d)
	}
	if os.Getenv("RBCTL_TEST_FDP_NRG") != "" {
		kernelFDP(t)
	}
}

// kernelFDP opens the VM's namespace and discovers its FDP state; it skips on a controller
// without FDP (the qemu-nofdp scenario) and checks the configuration against the one the
// harness gave QEMU (RBCTL_TEST_FDP_NRG, _NRUH, _RUNS).
func kernelFDP(t *testing.T) (nvme.Transport, *fdp.Discovery) {
	t.Helper()
	path := os.Getenv("RBCTL_TEST_NVME_NS")
	if path == "" {
		t.Skip("RBCTL_TEST_NVME_NS not set: runs inside the QEMU VM test (scripts/vmtest)")
	}
	tr, err := nvme.Open(path, nvme.OpenOptions{Transport: nvme.TransportIoctl})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { tr.Close() })
	d, err := fdp.Discover(tr)
	if errors.Is(err, fdp.ErrFDPNotSupported) {
		t.Skipf("%s: %v", path, err)
	}
	if err != nil {
		t.Fatalf("discover: %v", err)
	}
	want := func(name string) uint64 {
		v, err := strconv.ParseUint(os.Getenv(name), 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", name, os.Getenv(name), err)
		}
		return v
	}
	checkFDPConfig(t, d, want("RBCTL_TEST_FDP_NRG"), want("RBCTL_TEST_FDP_NRUH"), want("RBCTL_TEST_FDP_RUNS"))
	return tr, d
}

// checkFDPConfig: FDP is enabled with the given geometry, and the PID table has one
// distinct, in-range (reclaim group, handle) per RUH status descriptor, in its order.
func checkFDPConfig(t *testing.T, d *fdp.Discovery, nrg, nruh, runs uint64) {
	t.Helper()
	if !d.Feature.Enabled || d.Config == nil || d.Status == nil {
		t.Fatalf("FDP supported but not enabled with a configuration and RUH status: %+v", d)
	}
	c := d.Config
	if uint64(c.NRG) != nrg || uint64(c.NRUH) != nruh || c.RUNS != runs {
		t.Errorf("configuration nrg %d nruh %d runs %d, the device was given nrg %d nruh %d runs %d", c.NRG, c.NRUH, c.RUNS, nrg, nruh, runs)
	}
	if len(d.PIDs) != int(nrg*nruh) {
		t.Errorf("%d placement identifiers, want %d (one per reclaim group and handle)", len(d.PIDs), nrg*nruh)
	}
	if c.NRG > 1 && c.RGIF() < fdp.RGIFFor(c.NRG) {
		t.Errorf("RGIF %d cannot hold %d reclaim groups", c.RGIF(), c.NRG)
	}
	seen := map[[2]uint16]bool{}
	for i, pid := range d.PIDs {
		rg, ph := fdp.SplitPID(pid, c.RGIF())
		if uint32(rg) >= c.NRG || ph >= c.NRUH || seen[[2]uint16{rg, ph}] {
			t.Errorf("PID %#x (handle %d) splits into rg %d ph %d: out of range or repeated", pid, i, rg, ph)
		}
		seen[[2]uint16{rg, ph}] = true
		if d.Status.Descs[i].PID != pid {
			t.Errorf("handle %d: PID %#x, RUH status descriptor %d has %#x", i, pid, i, d.Status.Descs[i].PID)
		}
	}
}

// ruamwAfter is the RUAMW a handle shows after lbas more blocks are written through it,
// starting from ruamw, with reclaim units of ru blocks: a write that fills the unit goes on
// in a fresh one (FDP: when a reclaim unit is full the controller points the handle at a
// new one; RUAMW then counts that unit's blocks).
func ruamwAfter(ruamw, lbas, ru uint64) uint64 {
	for lbas >= ruamw {
		lbas -= ruamw
		ruamw = ru
	}
	return ruamw - lbas
}

// TestKernelFDPWritesMoveRUAMW writes a different amount through every placement handle
// (DTYPE=2, DSPEC=PID) and checks the RUH status: each handle's RUAMW moved by exactly its
// own bytes, and the FDP statistics counted every byte as host bytes written. MBMW is only
// checked to be at least HBMW: QEMU adds a unit's size twice when a write completes it and
// counts a RUH update's unwritten rest (docs/fdp.md, QEMU's quirks).
func TestKernelFDPWritesMoveRUAMW(t *testing.T) {
	tr, d := kernelFDP(t)
	testWritesMoveRUAMW(t, tr, d, false)
}

// testWritesMoveRUAMW is TestKernelFDPWritesMoveRUAMW on any FDP transport. exactMBMW: the
// device must count media bytes as exactly the host bytes (no GC yet, no padding), which
// the spec asks of a device that wrote nothing else; QEMU does not (see above).
func testWritesMoveRUAMW(t *testing.T, tr nvme.Transport, d *fdp.Discovery, exactMBMW bool) {
	t.Helper()
	dev, err := nvme.NewDevice(tr, nvme.DeviceOptions{PIDs: d.PIDs, KeepTransport: true})
	if err != nil {
		t.Fatal(err)
	}
	bs := uint64(d.BlockSize)
	ru := d.Config.RUNS / bs
	before, _, err := fdp.ReadRUHStatus(tr, d.NSID)
	if err != nil {
		t.Fatal(err)
	}
	s0, _, err := fdp.ReadStats(tr, d.EnduranceGroup)
	if err != nil {
		t.Fatal(err)
	}
	const base, step = 128 << 20, 64 << 10 // [128 MiB, ...): clear of the other packages' areas
	buf, err := blockdev.Alloc(len(d.PIDs) * step)
	if err != nil {
		t.Fatal(err)
	}
	defer blockdev.Free(buf)
	var ops []blockdev.Op
	off, total := int64(base), uint64(0)
	for h := range d.PIDs {
		n := (h + 1) * step / 2 // 32 KiB, 64 KiB, ...: a misplaced write shows
		ops = append(ops, blockdev.Op{Write: true, Off: off, Buf: buf[:n], Handle: placement.Handle(h)})
		off += int64(n)
		total += uint64(n)
	}
	if err := dev.Submit(ops); err != nil {
		t.Fatalf("placed writes: %v", err)
	}
	after, _, err := fdp.ReadRUHStatus(tr, d.NSID)
	if err != nil {
		t.Fatal(err)
	}
	for h := range d.PIDs {
		lbas := uint64(len(ops[h].Buf)) / bs
		b, a := before.Descs[h].RUAMW, after.Descs[h].RUAMW
		if want := ruamwAfter(b, lbas, ru); a != want {
			t.Errorf("handle %d (PID %#x): RUAMW %d -> %d after %d blocks, want %d", h, d.PIDs[h], b, a, lbas, want)
		}
	}
	s1, _, err := fdp.ReadStats(tr, d.EnduranceGroup)
	if err != nil {
		t.Fatal(err)
	}
	dd := s1.Sub(s0)
	if dd.HBMW != fdp.U128(total) {
		t.Errorf("HBMW grew by %s, %d bytes were written", dd.HBMW, total)
	}
	if dd.MBMW.Less(dd.HBMW) || exactMBMW && dd.MBMW != dd.HBMW {
		t.Errorf("MBMW grew by %s, HBMW by %s", dd.MBMW, dd.HBMW)
	}
	// One write that fills handle 0's unit and goes on into the next: RUAMW continues in a
	// fresh unit (and QEMU, unlike the spec, adds the unit to MBMW twice).
	before, _, err = fdp.ReadRUHStatus(tr, d.NSID)
	if err != nil {
		t.Fatal(err)
	}
	over := (before.Descs[0].RUAMW + 16) * bs
	if over <= 128<<20 {
		big, err := blockdev.Alloc(int(over))
		if err != nil {
			t.Fatal(err)
		}
		defer blockdev.Free(big)
		if err := blockdev.WriteAt(dev, big, 256<<20, 0); err != nil {
			t.Fatalf("write across a unit boundary: %v", err)
		}
		after, _, err = fdp.ReadRUHStatus(tr, d.NSID)
		if err != nil {
			t.Fatal(err)
		}
		if a, want := after.Descs[0].RUAMW, ru-16; a != want {
			t.Errorf("after %d blocks (the unit's %d left + 16) on handle 0: RUAMW %d, want %d", over/bs, before.Descs[0].RUAMW, a, want)
		}
		t.Logf("rollover: %d blocks on handle 0 with %d left: RUAMW %d (a fresh unit less 16)", over/bs, before.Descs[0].RUAMW, after.Descs[0].RUAMW)
	} else {
		t.Logf("handle 0 has %d blocks left in its unit: no rollover write (over 128 MiB)", before.Descs[0].RUAMW)
	}
	t.Logf("%d handles, %d bytes: RUAMW moved by each handle's own blocks; HBMW +%s, MBMW +%s", len(d.PIDs), total, dd.HBMW, dd.MBMW)
}

// TestKernelFDPUpdateResets: a RUH update moves the named handles to fresh reclaim units
// (RUAMW = the nominal size in blocks) and leaves the others alone. Two PIDs only: QEMU
// rejects an update naming every PID of the namespace at once (docs/fdp.md).
func TestKernelFDPUpdateResets(t *testing.T) {
	tr, d := kernelFDP(t)
	testUpdateResets(t, tr, d)
	// An update naming every PID at once is valid; QEMU rejects it (docs/fdp.md): logged only.
	t.Logf("RUH update of all %d PIDs at once: %v", len(d.PIDs), fdp.UpdateRUH(tr, d.NSID, d.PIDs))
}

func testUpdateResets(t *testing.T, tr nvme.Transport, d *fdp.Discovery) {
	t.Helper()
	if len(d.PIDs) < 3 {
		t.Skipf("%d handles: the test updates two and watches a third", len(d.PIDs))
	}
	dev, err := nvme.NewDevice(tr, nvme.DeviceOptions{PIDs: d.PIDs, KeepTransport: true})
	if err != nil {
		t.Fatal(err)
	}
	bs := uint64(d.BlockSize)
	ru := d.Config.RUNS / bs
	buf, err := blockdev.Alloc(64 << 10)
	if err != nil {
		t.Fatal(err)
	}
	defer blockdev.Free(buf)
	const base = 160 << 20
	// Partly used units first, so that a reset shows.
	for h := 0; h < 3; h++ {
		if err := blockdev.WriteAt(dev, buf, base+int64(h)*(64<<10), placement.Handle(h)); err != nil {
			t.Fatal(err)
		}
	}
	before, _, err := fdp.ReadRUHStatus(tr, d.NSID)
	if err != nil {
		t.Fatal(err)
	}
	if err := fdp.UpdateRUH(tr, d.NSID, []uint16{d.PIDs[0], d.PIDs[1]}); err != nil {
		t.Fatalf("RUH update of PIDs %#x, %#x: %v", d.PIDs[0], d.PIDs[1], err)
	}
	after, _, err := fdp.ReadRUHStatus(tr, d.NSID)
	if err != nil {
		t.Fatal(err)
	}
	for h := 0; h < 2; h++ {
		if a := after.Descs[h].RUAMW; a != ru {
			t.Errorf("handle %d after update: RUAMW %d, want %d (a fresh %d-byte unit)", h, a, ru, d.Config.RUNS)
		}
	}
	if b, a := before.Descs[2].RUAMW, after.Descs[2].RUAMW; a != b {
		t.Errorf("handle 2 (not updated): RUAMW %d -> %d", b, a)
	}
}

// TestKernelWriteStreams: the third placement path, kernel write streams on the
// namespace's block device (RBCTL_TEST_NVME_BLK) through io_uring. On a kernel before 6.16
// asking for them is refused with ErrWriteStreamsKernel ("needs Linux 6.16"), because the
// kernel would silently drop the SQE byte. On a newer one an FDP namespace with one reclaim
// group has one stream per handle: a write with placement handle h (stream h+1) must move
// exactly RUH status descriptor h's RUAMW, by exactly its blocks. With several reclaim
// groups Linux gives no streams (max_write_streams 0).
func TestKernelWriteStreams(t *testing.T) {
	blk := os.Getenv("RBCTL_TEST_NVME_BLK")
	if blk == "" {
		t.Skip("RBCTL_TEST_NVME_BLK not set: runs inside the QEMU VM test (scripts/vmtest)")
	}
	ws, err := blockdev.BlockWriteStreams(blk)
	if errors.Is(err, blockdev.ErrWriteStreamsKernel) {
		_, oerr := blockdev.OpenUring(blk, blockdev.UringOptions{WriteStreams: true})
		if !errors.Is(oerr, blockdev.ErrWriteStreamsKernel) || !errors.Is(oerr, blockdev.ErrNotSupported) ||
			!strings.Contains(oerr.Error(), "not supported, needs Linux 6.16") {
			t.Fatalf("OpenUring(%s, WriteStreams) on an old kernel: %v", blk, oerr)
		}
		d, err := blockdev.OpenUring(blk, blockdev.UringOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if d.Info().Handles != 0 {
			t.Errorf("old kernel: the uring device offers %d handles", d.Info().Handles)
		}
		t.Logf("refused as it must be: %v", oerr)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	tr, disc := kernelFDP(t) // skips without FDP
	if disc.Config.NRG > 1 {
		if ws.Max != 0 {
			t.Errorf("%d reclaim groups but %d write streams", disc.Config.NRG, ws.Max)
		}
		_, oerr := blockdev.OpenUring(blk, blockdev.UringOptions{WriteStreams: true})
		if !errors.Is(oerr, blockdev.ErrNoWriteStreams) {
			t.Errorf("OpenUring(%s, WriteStreams) with no streams: %v", blk, oerr)
		}
		t.Logf("%d reclaim groups: no write streams (%v)", disc.Config.NRG, oerr)
		return
	}
	if ws.Max != len(disc.PIDs) || uint64(ws.Granularity) != disc.Config.RUNS {
		t.Errorf("write streams %+v; the namespace has %d handles of %d-byte units", ws, len(disc.PIDs), disc.Config.RUNS)
	}
	d, err := blockdev.OpenUring(blk, blockdev.UringOptions{WriteStreams: true, Rings: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Info().Handles != ws.Max {
		t.Fatalf("uring device offers %d handles, the kernel %d streams", d.Info().Handles, ws.Max)
	}
	bs := uint64(disc.BlockSize)
	ru := disc.Config.RUNS / bs
	buf, err := blockdev.Alloc(len(disc.PIDs) * 32 << 10)
	if err != nil {
		t.Fatal(err)
	}
	defer blockdev.Free(buf)
	before, _, err := fdp.ReadRUHStatus(tr, disc.NSID)
	if err != nil {
		t.Fatal(err)
	}
	const base = 192 << 20
	var ops []blockdev.Op
	off := int64(base)
	for h := range disc.PIDs {
		n := (h + 1) * 4096 * 2 // 8 KiB, 16 KiB, ...
		ops = append(ops, blockdev.Op{Write: true, Off: off, Buf: buf[:n], Handle: placement.Handle(h)})
		off += int64(n)
	}
	if err := d.Submit(ops); err != nil {
		t.Fatalf("writes through write streams: %v", err)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	after, _, err := fdp.ReadRUHStatus(tr, disc.NSID)
	if err != nil {
		t.Fatal(err)
	}
	for h := range disc.PIDs {
		lbas := uint64(len(ops[h].Buf)) / bs
		b, a := before.Descs[h].RUAMW, after.Descs[h].RUAMW
		if want := ruamwAfter(b, lbas, ru); a != want {
			t.Errorf("stream %d (handle %d, PID %#x): RUAMW %d -> %d, want %d (%d blocks)", h+1, h, disc.PIDs[h], b, a, want, lbas)
		}
	}
	if err := d.Submit([]blockdev.Op{{Write: true, Off: base, Buf: buf[:4096], Handle: placement.Handle(ws.Max)}}); err == nil {
		t.Errorf("handle %d (stream %d > max %d) was accepted", ws.Max, ws.Max+1, ws.Max)
	}
	t.Logf("%d write streams (granularity %d): stream s moved RUH status descriptor s-1 by exactly its blocks", ws.Max, ws.Granularity)
}

// TestKernelFDPInvalidPID: a write naming a PID the namespace lacks succeeds on placement
// handle 0 (testInvalidPID). QEMU logs no Invalid PID event for it (a quirk: the test logs
// what it saw and does not assert it); the emulator does (TestEmuPassesTheQEMUChecks).
func TestKernelFDPInvalidPID(t *testing.T) {
	tr, d := kernelFDP(t)
	testInvalidPID(t, tr, d, false)
}
