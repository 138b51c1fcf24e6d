package nvme

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine/enginetest"
	"github.com/rbctl/rbctl/placement"
)

// window is a zeroed [base, base+size) part of a namespace, presented as a whole device, so
// the engine suite can take a fresh device per subtest from one namespace.
type window struct {
	d          *Device
	base, size int64
}

func (w *window) Info() blockdev.Info {
	i := w.d.Info()
	i.Size = w.size
	i.Path = fmt.Sprintf("%s[%d,+%d)", i.Path, w.base, w.size)
	return i
}

func (w *window) Submit(ops []blockdev.Op) error {
	for i := range ops {
		if err := blockdev.CheckOp(w.Info(), &ops[i]); err != nil {
			ops[i].Err = err
			return err
		}
	}
	for i := range ops {
		ops[i].Off += w.base
	}
	err := w.d.Submit(ops)
	for i := range ops {
		ops[i].Off -= w.base
	}
	return err
}

func (w *window) Deallocate(rs []blockdev.Range) error {
	moved := make([]blockdev.Range, len(rs))
	for i, r := range rs {
		if r.Off < 0 || r.Len < 0 || r.Off+r.Len > w.size {
			return fmt.Errorf("%w: deallocate [%d, %d) on a %d-byte window", blockdev.ErrOutOfRange, r.Off, r.Off+r.Len, w.size)
		}
		moved[i] = blockdev.Range{Off: r.Off + w.base, Len: r.Len}
	}
	return w.d.Deallocate(moved)
}

// VectoredWrites passes the device's on: the suite's puts of whole blocks from aligned
// memory go out as header and payload commands, as they do on the device itself.
func (w *window) VectoredWrites() bool { return w.d.VectoredWrites() }

func (w *window) Flush() error { return w.d.Flush() }
func (w *window) Close() error { return nil }

// TestNVMeKernelEngineSuite runs the engine's behaviour suite on the passthrough Device
// (URING_CMD when available, else ioctl) over the VM's NVMe namespace; on an FDP namespace
// with its RUH status's placement identifiers, so the suite's placed writes carry
// DTYPE=2/DSPEC=PID. Each subtest gets a 32 MiB window, zeroed first, between 256 MiB and
// 768 MiB of the namespace.
func TestNVMeKernelEngineSuite(t *testing.T) {
	tr := openKernel(t, TransportAuto)
	pids := kernelPIDs(t, tr)
	d, err := NewDevice(tr, DeviceOptions{KeepTransport: true, PIDs: pids})
	if err != nil {
		t.Fatal(err)
	}
	const first, span = 256 << 20, 512 << 20
	size := int64(enginetest.MinDeviceBytes)
	if d.Info().Size < first+span {
		t.Skipf("namespace of %d bytes is smaller than the %d the suite's windows need", d.Info().Size, first+span)
	}
	zero, err := blockdev.Alloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer blockdev.Free(zero)
	n := 0
	enginetest.RunEngineSuite(t, func(t *testing.T) blockdev.Device {
		base := first + int64(n%int(span/size))*size
		n++
		ops := make([]blockdev.Op, size/int64(len(zero)))
		for i := range ops {
			ops[i] = blockdev.Op{Write: true, Off: base + int64(i*len(zero)), Buf: zero, Handle: placement.None}
		}
		if err := d.Submit(ops); err != nil {
			t.Fatalf("zeroing window at %d: %v", base, err)
		}
		return &window{d: d, base: base, size: size}
	})
	t.Logf("engine suite: %d subtests on %s through %s, %d placement handles", n, d.Info().Path, fmt.Sprintf("%T", tr), d.Info().Handles)
}

// kernelPIDs returns the placement identifiers of the namespace's RUH status (handle i is
// descriptor i, as fdp.Discover orders them) on a controller with FDP, nil without. The
// fdp package cannot be imported here (it imports nvme), so the status is read directly.
func kernelPIDs(t *testing.T, tr Transport) []uint16 {
	t.Helper()
	c, err := ReadController(tr)
	if err != nil {
		t.Fatal(err)
	}
	if !c.FDPSupported() {
		return nil
	}
	data, _, err := IORead(tr, 4096, func(buf []byte) (Command, error) {
		return IOMgmtRecv(tr.NSID(), IOMgmtRecvRUHStatus, 0, buf)
	})
	if errors.Is(err, ErrFDPDisabled) {
		return nil
	}
	if err != nil {
		t.Fatalf("RUH status: %v", err)
	}
	n := int(binary.LittleEndian.Uint16(data[14:]))
	if 16+32*n > len(data) {
		t.Fatalf("RUH status lists %d descriptors, more than 4096 bytes hold", n)
	}
	pids := make([]uint16, n)
	for i := range pids {
		pids[i] = binary.LittleEndian.Uint16(data[16+32*i:])
	}
	return pids
}

// TestEngineSuiteOnFakeController runs the engine suite through Device on the in-memory fake
// controller: every engine I/O becomes NVMe Read/Write/DSM/Flush commands, split at 16 KiB.
func TestEngineSuiteOnFakeController(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: the engine suite through the fake controller takes a few seconds")
	}
	enginetest.RunEngineSuite(t, func(t *testing.T) blockdev.Device {
		d, err := NewDevice(newFakeCtrl(uint64(enginetest.MinDeviceBytes)>>12, 12, 0), DeviceOptions{Path: "fake"})
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
}
