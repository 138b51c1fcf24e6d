package nvme

import (
	"bytes"
	"errors"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/placement"
)

func TestProbe(t *testing.T) {
	f := newFakeCtrl(1024, 12, 0)
	f.ctrl.CTRATT |= CTRATTEnduranceGroups
	ns, err := Probe(f)
	if err != nil {
		t.Fatal(err)
	}
	// MDTS 2 with 4 KiB pages = 16 KiB; ENDGID 0 in CNS 0 -> CNS 8 (fake answers 3).
	if ns.NSID != 1 || ns.BlockSize != 4096 || ns.Capacity != 1024*4096 || ns.MaxTransfer != 16<<10 || ns.EnduranceGroup != 3 {
		t.Errorf("probe %+v", ns)
	}
	if ns.Ctrl.SerialNumber != "deadbeef" {
		t.Errorf("serial %q", ns.Ctrl.SerialNumber)
	}
	// A transport on a controller node (NSID 0) gets the first active namespace.
	ns, err = Probe(ctrlNode{f})
	if err != nil || ns.NSID != 1 || ns.Capacity != 1024*4096 {
		t.Errorf("probe via controller node: %v %+v", err, ns)
	}
	// A transport limit below MDTS wins.
	ns, _ = Probe(limited{f, 8192})
	if ns.MaxTransfer != 8192 {
		t.Errorf("limited max transfer %d", ns.MaxTransfer)
	}
}

type ctrlNode struct{ *fakeCtrl }

func (ctrlNode) NSID() uint32 { return 0 }

type limited struct {
	*fakeCtrl
	n int
}

func (l limited) MaxTransferBytes() int { return l.n }

func TestDeviceRefusesMetadata(t *testing.T) {
	f := newFakeCtrl(64, 12, 8)
	_, err := NewDevice(f, DeviceOptions{})
	if !errors.Is(err, ErrMetadataFormat) {
		t.Fatalf("metadata format accepted: %v", err)
	}
	t.Log(err)
}

func alloc(t *testing.T, n int) []byte {
	b, err := blockdev.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { blockdev.Free(b) })
	return b
}

func TestDeviceReadWriteSplitAndPlacement(t *testing.T) {
	f := newFakeCtrl(1024, 12, 0)
	d, err := NewDevice(f, DeviceOptions{PIDs: []uint16{0x10, 0x11}})
	if err != nil {
		t.Fatal(err)
	}
	info := d.Info()
	if info.Size != 1024*4096 || info.LogicalBlock != 4096 || info.MaxTransfer != 16<<10 || info.Handles != 2 || !info.Deallocate || !info.Direct {
		t.Fatalf("info %+v", info)
	}
	w := alloc(t, 40<<10)
	for i := range w {
		w[i] = byte(i*31 + 7)
	}
	ops := []blockdev.Op{
		{Write: true, Off: 8 << 10, Buf: w, Handle: 1},
		{Write: true, Off: 100 << 12, Buf: w[:4096], Handle: placement.None},
	}
	if err := d.Submit(ops); err != nil {
		t.Fatal(err)
	}
	if ops[0].N != len(w) || ops[1].N != 4096 {
		t.Errorf("N = %d, %d", ops[0].N, ops[1].N)
	}
	// 40 KiB at 16 KiB per command = 3 writes + 1.
	if len(f.io) != 4 {
		t.Fatalf("%d commands, want 4", len(f.io))
	}
	wantSLBA := []uint64{2, 6, 10, 100}
	wantNLB := []uint32{4, 4, 2, 1}
	for i, c := range f.io {
		rw := ParseRW(&c)
		if c.Opcode != OpWrite || rw.SLBA != wantSLBA[i] || rw.NLB != wantNLB[i] {
			t.Errorf("cmd %d: op %#x %+v", i, c.Opcode, rw)
		}
		if i < 3 && (rw.DType != DirTypeDataPlacement || rw.DSpec != 0x11) {
			t.Errorf("cmd %d: placement DTYPE %d DSPEC %#x", i, rw.DType, rw.DSpec)
		}
		if i == 3 && (rw.DType != 0 || rw.DSpec != 0) {
			t.Errorf("no-placement write carries a directive: %+v", rw)
		}
	}
	r := alloc(t, 40<<10)
	if err := blockdev.ReadAt(d, r, 8<<10); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r, w) {
		t.Error("read back differs")
	}
	// A handle outside the table fails that op only.
	ops = []blockdev.Op{{Write: true, Off: 0, Buf: w[:4096], Handle: 2}, {Off: 0, Buf: r[:4096], Handle: placement.None}}
	if err := d.Submit(ops); !errors.Is(err, ErrBadHandle) || ops[1].Err != nil || ops[1].N != 4096 {
		t.Errorf("bad handle: %v / %v %d", err, ops[1].Err, ops[1].N)
	}
	// Misaligned and out-of-range ops are refused before any command.
	n := len(f.io)
	ops = []blockdev.Op{{Off: 512, Buf: r[:4096]}, {Off: 1024 * 4096, Buf: r[:4096]}}
	d.Submit(ops)
	if !errors.Is(ops[0].Err, blockdev.ErrMisaligned) || !errors.Is(ops[1].Err, blockdev.ErrOutOfRange) || len(f.io) != n {
		t.Errorf("checks: %v %v, %d new commands", ops[0].Err, ops[1].Err, len(f.io)-n)
	}
	// With an empty table, handles are ignored.
	d2, _ := NewDevice(f, DeviceOptions{KeepTransport: true})
	f.io = nil
	if err := blockdev.WriteAt(d2, w[:4096], 0, 5); err != nil {
		t.Fatal(err)
	}
	if rw := ParseRW(&f.io[0]); rw.DType != 0 || d2.Info().Handles != 0 {
		t.Errorf("empty table sent %+v", rw)
	}
}

func TestDeviceStatusErrorAndPartialN(t *testing.T) {
	f := newFakeCtrl(1024, 12, 0)
	d, _ := NewDevice(f, DeviceOptions{Path: "/dev/fake"})
	f.failIO = map[int]Status{1: StatusLBAOutOfRange} // the second piece of the op fails
	w := alloc(t, 48<<10)
	ops := []blockdev.Op{{Write: true, Off: 0, Buf: w, Handle: placement.None}}
	err := d.Submit(ops)
	if !errors.Is(err, ErrLBAOutOfRange) || ops[0].N != 16<<10 {
		t.Fatalf("err %v N %d", err, ops[0].N)
	}
	t.Log(err)
}

func TestDeviceDeallocateBatches(t *testing.T) {
	f := newFakeCtrl(2048, 12, 0)
	d, _ := NewDevice(f, DeviceOptions{})
	var rs []blockdev.Range
	for i := 0; i < 600; i++ {
		rs = append(rs, blockdev.Range{Off: int64(i) * 2 * 4096, Len: 4096})
	}
	if err := d.Deallocate(rs); err != nil {
		t.Fatal(err)
	}
	if len(f.dsm) != 3 || len(f.dsm[0]) != 256 || len(f.dsm[1]) != 256 || len(f.dsm[2]) != 88 {
		t.Fatalf("DSM commands: %d", len(f.dsm))
	}
	if r := f.dsm[2][87]; r.SLBA != 599*2 || r.NLB != 1 {
		t.Errorf("last range %+v", r)
	}
	if err := d.Deallocate([]blockdev.Range{{Off: 100, Len: 4096}}); !errors.Is(err, blockdev.ErrMisaligned) {
		t.Errorf("misaligned: %v", err)
	}
	if err := d.Deallocate([]blockdev.Range{{Off: 0, Len: 1 << 40}}); !errors.Is(err, blockdev.ErrOutOfRange) {
		t.Errorf("out of range: %v", err)
	}
	f.ctrl.ONCS &^= ONCSDSM
	d2, _ := NewDevice(f, DeviceOptions{})
	if err := d2.Deallocate(rs[:1]); !errors.Is(err, blockdev.ErrNotSupported) {
		t.Errorf("no DSM: %v", err)
	}
	if err := d.Flush(); err != nil || f.io[len(f.io)-1].Opcode != OpFlush {
		t.Errorf("flush: %v", err)
	}
}

func TestGetLogPieces(t *testing.T) {
	f := newFakeCtrl(16, 12, 0)
	b, err := GetLogChunked(f, LogPage{LID: 0x7f, LSI: 1}, 10000, 4096)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		if b[i] != byte(i*7) {
			t.Fatalf("byte %d = %d", i, b[i])
		}
	}
	if len(f.admin) != 3 {
		t.Fatalf("%d commands, want 3", len(f.admin))
	}
	for i, c := range f.admin {
		p, n := ParseGetLogPage(&c)
		if p.Offset != uint64(4096*i) || p.LSI != 1 || p.RAE != (i < 2) || n != min(4096, 10000-4096*i) {
			t.Errorf("piece %d: %+v len %d", i, p, n)
		}
	}
	_, err = GetLog(f, LogPage{LID: 0x20, LSI: 1}, 4096)
	if !errors.Is(err, ErrInvalidField) {
		t.Errorf("unknown LID: %v", err)
	}
	if _, err := GetLog(f, LogPage{LID: 0x7f}, 6); err == nil {
		t.Error("length 6 accepted")
	}
	dw0, _, err := GetFeature(f, FeatFDP, SelCurrent, 0, 1, 0)
	if err != nil || dw0 != 2 {
		t.Errorf("GetFeature dw0 %d %v", dw0, err)
	}
}

// TestDeviceTailWrites: a write with a Tail goes out as Buf's commands then Tail's, split at
// the transfer limit and never across the seam, each with the op's placement and from its
// own memory; N and a failing piece behave as for one buffer.
func TestDeviceTailWrites(t *testing.T) {
	f := newFakeCtrl(1024, 12, 0)
	d, err := NewDevice(f, DeviceOptions{PIDs: []uint16{0x10, 0x11}})
	if err != nil {
		t.Fatal(err)
	}
	if !blockdev.WritesTail(d) {
		t.Fatal("the passthrough device does not report VectoredWrites")
	}
	head, tail := alloc(t, 8<<10), alloc(t, 36<<10)
	for i := range head {
		head[i] = byte(i*3 + 1)
	}
	for i := range tail {
		tail[i] = byte(i*5 + 2)
	}
	ops := []blockdev.Op{{Write: true, Off: 4 << 12, Buf: head, Tail: tail, Handle: 1}}
	if err := d.Submit(ops); err != nil || ops[0].N != len(head)+len(tail) {
		t.Fatalf("Submit: %v, N %d", err, ops[0].N)
	}
	// 8 KiB of header (one command), then 36 KiB of tail at 16 KiB per command.
	wantSLBA := []uint64{4, 6, 10, 14}
	wantNLB := []uint32{2, 4, 4, 1}
	wantData := [][]byte{head, tail[:16<<10], tail[16<<10 : 32<<10], tail[32<<10:]}
	if len(f.io) != len(wantSLBA) {
		t.Fatalf("%d commands, want %d", len(f.io), len(wantSLBA))
	}
	for i, c := range f.io {
		rw := ParseRW(&c)
		if c.Opcode != OpWrite || rw.SLBA != wantSLBA[i] || rw.NLB != wantNLB[i] || rw.DType != DirTypeDataPlacement || rw.DSpec != 0x11 {
			t.Errorf("cmd %d: op %#x %+v", i, c.Opcode, rw)
		}
		if len(c.Data) != len(wantData[i]) || &c.Data[0] != &wantData[i][0] {
			t.Errorf("cmd %d: %d bytes of data, not the op's own memory at its offset (want %d, no copy)", i, len(c.Data), len(wantData[i]))
		}
	}
	r := alloc(t, len(head)+len(tail))
	if err := blockdev.ReadAt(d, r, 4<<12); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r[:len(head)], head) || !bytes.Equal(r[len(head):], tail) {
		t.Fatal("read back differs from Buf followed by Tail")
	}
	// The tail's second command fails: N is the prefix before it.
	f.io = nil
	f.failIO = map[int]Status{f.nIO + 2: StatusLBAOutOfRange} // by sequence number since the fake started
	ops = []blockdev.Op{{Write: true, Off: 0, Buf: head, Tail: tail, Handle: placement.None}}
	if err := d.Submit(ops); !errors.Is(err, ErrLBAOutOfRange) || ops[0].N != len(head)+16<<10 {
		t.Fatalf("err %v N %d, want N %d", err, ops[0].N, len(head)+16<<10)
	}
}

// timedCtrl is a transport with rings that reports a fixed Timing.
type timedCtrl struct {
	*fakeCtrl
	t blockdev.RingTiming
}

func (c timedCtrl) RingTiming() (blockdev.RingTiming, bool) { return c.t, true }

// A device says where its transport's ring batches spent their time when the transport has
// rings (the URING_CMD one), and that it has none over any other (the ioctl one): not ok,
// rather than zeros it did not measure.
func TestDeviceRingTiming(t *testing.T) {
	d, err := NewDevice(newFakeCtrl(1024, 12, 0), DeviceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tm, ok := d.RingTiming(); ok {
		t.Fatalf("a transport without rings reported %+v", tm)
	}
	want := blockdev.RingTiming{Batches: 3, QueuedNs: 10, RunNs: 200, WakeNs: 30}
	d, err = NewDevice(timedCtrl{newFakeCtrl(1024, 12, 0), want}, DeviceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tm, ok := d.RingTiming(); !ok || tm != want {
		t.Fatalf("RingTiming = %+v, %v; want the transport's %+v", tm, ok, want)
	}
}
