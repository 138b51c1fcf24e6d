package nvme

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/internal/sys"
	"github.com/rbctl/rbctl/internal/uring"
)

func bigRing(t *testing.T) *uring.Ring {
	t.Helper()
	r, err := uring.Setup(uring.Options{Entries: 4, SQE128: true, CQE32: true})
	if errors.Is(err, uring.ErrNotSupported) {
		t.Skipf("kernel lacks SQE128/CQE32: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func allocT(t *testing.T, n int) []byte {
	t.Helper()
	b, err := blockdev.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { blockdev.Free(b) })
	return b
}

// TestPrepUringCmdGolden checks every byte of the 128-byte SQE built for an FDP write
// (nvme-fdp-reference.md §1.1, §1.3, §2.2).
func TestPrepUringCmdGolden(t *testing.T) {
	data := allocT(t, 8192)
	md := allocT(t, 4096)[:64]
	c := Command{
		Opcode: 0x01, NSID: 1, CDW2: 0x22222222, CDW3: 0x33333333,
		CDW10: 0x10, CDW11: 0, CDW12: 1 | 2<<20, CDW13: 5 << 16, CDW14: 0xAAAA, CDW15: 0xBBBB,
		Data: data, Metadata: md, TimeoutMs: 1500, BufIndex: -1,
	}
	for _, fixed := range []bool{false, true} {
		sqe, _ := bigRing(t).GetSQE()
		prepUringCmd(sqe, 9, sys.NVME_URING_CMD_IO, &c, fixed, 3)
		want := make([]byte, 128)
		le := binary.LittleEndian
		want[0] = 46                       // IORING_OP_URING_CMD
		le.PutUint32(want[4:], 9)          // fd
		le.PutUint32(want[8:], 0xC0484E80) // cmd_op NVME_URING_CMD_IO
		if fixed {
			le.PutUint32(want[28:], 1) // IORING_URING_CMD_FIXED
			le.PutUint16(want[40:], 3) // buf_index
		}
		cmd := want[48:]
		cmd[0] = 0x01
		le.PutUint32(cmd[4:], 1)
		le.PutUint32(cmd[8:], 0x22222222)
		le.PutUint32(cmd[12:], 0x33333333)
		le.PutUint64(cmd[16:], uint64(uintptr(unsafe.Pointer(&md[0]))))
		le.PutUint64(cmd[24:], uint64(uintptr(unsafe.Pointer(&data[0]))))
		le.PutUint32(cmd[32:], 64)
		le.PutUint32(cmd[36:], 8192)
		le.PutUint32(cmd[40:], 0x10)
		le.PutUint32(cmd[48:], 1|2<<20)
		le.PutUint32(cmd[52:], 5<<16)
		le.PutUint32(cmd[56:], 0xAAAA)
		le.PutUint32(cmd[60:], 0xBBBB)
		le.PutUint32(cmd[64:], 1500)
		if got := sqe.Bytes(); !bytes.Equal(got, want) {
			t.Fatalf("fixed=%v SQE:\n got % x\nwant % x", fixed, got, want)
		}
	}
}

func TestFixedIndex(t *testing.T) {
	a, b := allocT(t, 1<<16), allocT(t, 1<<16)
	regs, err := uring.NewBufferTable([][]byte{a, b})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		c    Command
		want int // -1: not fixed
	}{
		{"inside 1", Command{Data: b[4096:8192], BufIndex: 1}, 1},
		{"whole 0", Command{Data: a, BufIndex: 0}, 0},
		{"wrong index", Command{Data: b[:4096], BufIndex: 0}, -1},
		{"no index", Command{Data: a[:4096], BufIndex: -1}, -1},
		{"index out of range", Command{Data: a[:4096], BufIndex: 2}, -1},
		{"no data", Command{BufIndex: 0}, -1},
	}
	for _, tc := range cases {
		idx, ok := fixedIndex(regs, &tc.c)
		if got := map[bool]int{true: int(idx), false: -1}[ok]; got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestUringCompletion(t *testing.T) {
	cases := []struct {
		res    int32
		big    [2]uint64
		status Status
		errno  error
		result uint64
	}{
		{0, [2]uint64{0x1234, 0}, 0, nil, 0x1234},
		{0x4002, [2]uint64{}, 0x4002, nil, 0},               // Invalid Field, DNR
		{0x0001, [2]uint64{7, 0}, 0x0001, nil, 7},           // Invalid Opcode
		{-int32(unix.EINTR), [2]uint64{}, 0, unix.EINTR, 0}, // cancelled
		{-int32(unix.ENOTTY), [2]uint64{}, 0, unix.ENOTTY, 0},
	}
	for _, tc := range cases {
		c := uringCompletion(tc.res, tc.big)
		if c.Status != tc.status || c.Result != tc.result || !errors.Is(c.Err, tc.errno) || (tc.errno == nil) != (c.Err == nil) {
			t.Errorf("res %d: got %+v", tc.res, c)
		}
	}
}

func FuzzUringCompletion(f *testing.F) {
	f.Add(int32(0), uint64(0))
	f.Add(int32(0x4002), uint64(1))
	f.Add(int32(-4), uint64(0))
	f.Fuzz(func(t *testing.T, res int32, r uint64) {
		c := uringCompletion(res, [2]uint64{r, 0})
		if c.Result != r {
			t.Fatalf("result %x lost", r)
		}
		if res == 0 && (c.Err != nil || !c.Status.OK()) {
			t.Fatalf("res 0 not OK: %+v", c)
		}
		if res != 0 && c.Err == nil && c.Status == 0 {
			t.Fatalf("res %d decoded as success", res)
		}
	})
}

func TestOpenUringCmdRejectsNonNVMe(t *testing.T) {
	p := filepath.Join(t.TempDir(), "plain")
	os.WriteFile(p, make([]byte, 4096), 0o600)
	if _, err := OpenUringCmd(p, UringCmdOptions{}); err == nil || !errors.Is(err, ErrNotNVMe) {
		t.Fatalf("OpenUringCmd(regular file) = %v, want ErrNotNVMe", err)
	}
}

// --- real-device tests (inside the QEMU VM harness) ---

func openTestNS(t *testing.T, opt UringCmdOptions) *UringCmdTransport {
	t.Helper()
	ns := os.Getenv("RBCTL_TEST_NVME_NS")
	if ns == "" {
		t.Skip("RBCTL_TEST_NVME_NS not set (runs inside the QEMU VM test)")
	}
	tr, err := OpenUringCmd(ns, opt)
	if err != nil {
		t.Fatalf("OpenUringCmd(%s): %v", ns, err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func TestUringCmdIdentifyAdmin(t *testing.T) {
	tr := openTestNS(t, UringCmdOptions{})
	if os.Getenv("RBCTL_TEST_NVME_CTRL") != "" && tr.Nodes().Controller == "" {
		t.Fatalf("controller %s set but not found from the namespace", os.Getenv("RBCTL_TEST_NVME_CTRL"))
	}
	buf := allocT(t, 4096)
	c := tr.Admin(&Command{Opcode: 0x06, CDW10: 1, Data: buf, BufIndex: -1}) // Identify Controller
	if c.Err != nil || !c.Status.OK() {
		t.Fatalf("Identify Controller: %+v", c)
	}
	if !tr.admOff.Load() && tr.adm != nil {
		t.Logf("admin via io_uring on %s", tr.Nodes().Controller)
	}
	if sn := os.Getenv("RBCTL_TEST_NVME_SERIAL"); sn != "" {
		if got := string(bytes.TrimRight(buf[4:24], " \x00")); got != sn {
			t.Fatalf("serial %q, want %q", got, sn)
		}
	}
	// Identify Namespace: LBA size for the I/O test.
	c = tr.Admin(&Command{Opcode: 0x06, NSID: tr.NSID(), CDW10: 0, Data: buf, BufIndex: -1})
	if c.Err != nil || !c.Status.OK() {
		t.Fatalf("Identify Namespace: %+v", c)
	}
	// An unknown admin opcode comes back as an NVMe status, not a transport error.
	c = tr.Admin(&Command{Opcode: 0xC3, BufIndex: -1})
	if c.Err == nil && c.Status.OK() {
		t.Fatalf("vendor opcode 0xC3 succeeded: %+v", c)
	}
}

func TestUringCmdReadWrite(t *testing.T) {
	tr := openTestNS(t, UringCmdOptions{QueueDepth: 8})
	buf := allocT(t, 4096)
	if c := tr.Admin(&Command{Opcode: 0x06, NSID: tr.NSID(), Data: buf, BufIndex: -1}); c.Err != nil || !c.Status.OK() {
		t.Fatalf("Identify Namespace: %+v", c)
	}
	flbas := buf[26] & 0xf
	lbads := buf[128+4*int(flbas)+2]
	bs := 1 << lbads
	const n = 16
	nsze := binary.LittleEndian.Uint64(buf[0:8])
	if nsze < 2*n {
		t.Fatalf("namespace of %d blocks", nsze)
	}
	slba := uint32(nsze - n) // the last blocks: out of the way of other tests' data
	pool := allocT(t, 2*n*bs)
	if err := tr.RegisterBuffers([][]byte{pool}); err != nil {
		t.Fatalf("RegisterBuffers: %v", err)
	}
	wr, rd := pool[:n*bs], pool[n*bs:]
	for i := range wr {
		wr[i] = byte(i*13 + 1)
	}
	for _, fixed := range []int{-1, 0} {
		clear(rd)
		cmds := make([]Command, 0, 2*n)
		for i := 0; i < n; i++ {
			cmds = append(cmds, Command{Opcode: 0x01, NSID: tr.NSID(), CDW10: slba + uint32(i), Data: wr[i*bs : (i+1)*bs], BufIndex: fixed})
		}
		done := make([]Completion, n)
		tr.IO(cmds, done)
		for i, c := range done {
			if c.Err != nil || !c.Status.OK() {
				t.Fatalf("write %d (fixed=%d): %+v", i, fixed, c)
			}
		}
		cmds = cmds[:0]
		for i := 0; i < n; i++ {
			cmds = append(cmds, Command{Opcode: 0x02, NSID: tr.NSID(), CDW10: slba + uint32(i), Data: rd[i*bs : (i+1)*bs], BufIndex: fixed})
		}
		tr.IO(cmds, done)
		for i, c := range done {
			if c.Err != nil || !c.Status.OK() {
				t.Fatalf("read %d (fixed=%d): %+v", i, fixed, c)
			}
		}
		if !bytes.Equal(rd, wr) {
			t.Fatalf("fixed=%d: read back differs", fixed)
		}
	}
	// Each IO call above is at least one timed batch on an I/O ring (the stages the node
	// reports as ring_*), and a real device's commands take time to run.
	if tm, ok := tr.RingTiming(); !ok || tm.Batches < 4 || tm.RunNs <= 0 {
		t.Fatalf("RingTiming after 4 IO calls = %+v, %v", tm, ok)
	}
}
