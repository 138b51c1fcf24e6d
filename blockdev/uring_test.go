package blockdev

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rbctl/rbctl/internal/looptest"
	"github.com/rbctl/rbctl/internal/uring"
	"github.com/rbctl/rbctl/placement"
	"golang.org/x/sys/unix"
)

// uringTestFile creates a pre-sized file for the io_uring device tests.
func uringTestFile(t testing.TB, size int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "uring.img")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
	return p
}

func openUringOrSkip(t testing.TB, path string, opt UringOptions) *UringDevice {
	t.Helper()
	d, err := OpenUring(path, opt)
	if errors.Is(err, uring.ErrNotSupported) {
		t.Skipf("kernel lacks io_uring support: %v", err)
	}
	if err != nil {
		t.Fatalf("OpenUring: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func uringAlloc(t testing.TB, n int) []byte {
	t.Helper()
	b, err := Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Free(b) })
	return b
}

func uringPattern(b []byte, seed int) {
	for i := range b {
		b[i] = byte(seed*31 + i*7 + i>>9)
	}
}

func TestUringRoundTrip(t *testing.T) {
	d := openUringOrSkip(t, uringTestFile(t, 16<<20), UringOptions{QueueDepth: 8, Rings: 2})
	info := d.Info()
	if !info.Direct || info.Kind != KindFile || info.Size != 16<<20 || info.LogicalBlock <= 0 {
		t.Fatalf("Info = %+v", info)
	}
	// 40 ops (more than the depth of one ring, so the batch is split over both rings), with
	// heap buffers (pinned by Submit) and Alloc'd ones, in one Submit.
	const n, bs = 40, 64 << 10
	var ops []Op
	var want [][]byte
	for i := 0; i < n; i++ {
		var b []byte
		if i%2 == 0 {
			b = uringAlloc(t, bs)
		} else {
			b = alignedHeap(bs, 4096)
		}
		uringPattern(b, i)
		want = append(want, b)
		ops = append(ops, Op{Write: true, Off: int64(i) * bs, Buf: b, Handle: placement.None})
	}
	if err := d.Submit(ops); err != nil {
		t.Fatalf("write batch: %v", err)
	}
	for i, op := range ops {
		if op.N != bs || op.Err != nil {
			t.Fatalf("write op %d: N=%d err=%v", i, op.N, op.Err)
		}
	}
	rd := make([]Op, n)
	for i := range rd {
		rd[i] = Op{Off: int64(n-1-i) * bs, Buf: uringAlloc(t, bs)}
	}
	if err := d.Submit(rd); err != nil {
		t.Fatalf("read batch: %v", err)
	}
	for i, op := range rd {
		if !bytes.Equal(op.Buf, want[n-1-i]) {
			t.Fatalf("read op %d returned different bytes", i)
		}
	}
	if err := d.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

// alignedHeap returns a Go-heap slice of n bytes whose start is aligned for O_DIRECT.
func alignedHeap(n, align int) []byte {
	b := make([]byte, n+align)
	off := int((uintptr(align) - uintptrOf(b)%uintptr(align)) % uintptr(align))
	return b[off : off+n : off+n]
}

func TestUringFixedBuffers(t *testing.T) {
	d := openUringOrSkip(t, uringTestFile(t, 4<<20), UringOptions{QueueDepth: 4, Rings: 2})
	pool := uringAlloc(t, 1<<20)
	other := uringAlloc(t, 256<<10)
	if err := d.RegisterBuffers([][]byte{pool, other}); err != nil {
		t.Fatalf("RegisterBuffers: %v", err)
	}
	slotA, slotB := pool[128<<10:256<<10], other[:128<<10] // sub-ranges of registered buffers
	stray := uringAlloc(t, 128<<10)                        // not registered
	uringPattern(slotA, 1)
	uringPattern(stray, 2)
	before := d.Stats()
	if err := d.Submit([]Op{
		{Write: true, Off: 0, Buf: slotA, Handle: placement.None},
		{Write: true, Off: 128 << 10, Buf: stray, Handle: placement.None},
	}); err != nil {
		t.Fatal(err)
	}
	if err := ReadAt(d, slotB, 0); err != nil {
		t.Fatal(err)
	}
	s := d.Stats()
	if s.FixedOps-before.FixedOps != 2 || s.PlainOps-before.PlainOps != 1 {
		t.Fatalf("fixed %d plain %d SQEs, want 2 fixed (slotA write, slotB read) and 1 plain",
			s.FixedOps-before.FixedOps, s.PlainOps-before.PlainOps)
	}
	if !bytes.Equal(slotA, slotB) {
		t.Fatal("fixed read returned different bytes")
	}
	// Registering again replaces the table.
	if err := d.RegisterBuffers([][]byte{stray}); err != nil {
		t.Fatalf("re-register: %v", err)
	}
	if err := ReadAt(d, stray, 0); err != nil || !bytes.Equal(stray, slotA) {
		t.Fatalf("read into re-registered buffer: %v", err)
	}
}

func TestUringShortTransfersResubmitted(t *testing.T) {
	d := openUringOrSkip(t, uringTestFile(t, 1<<20), UringOptions{QueueDepth: 4, Rings: 1})
	d.maxChunk = 4096 // every SQE moves one block: the short-transfer path carries each op
	w := uringAlloc(t, 64<<10)
	uringPattern(w, 5)
	if err := WriteAt(d, w, 8192, placement.None); err != nil {
		t.Fatal(err)
	}
	r := uringAlloc(t, 64<<10)
	if err := ReadAt(d, r, 8192); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r, w) {
		t.Fatal("bytes differ after chunked transfers")
	}
	if got := d.Stats().Resubmits; got != 2*15 {
		t.Fatalf("%d resubmits, want 30 (15 per 64 KiB op in 4 KiB pieces)", got)
	}
}

func TestUringErrors(t *testing.T) {
	p := uringTestFile(t, 1<<20)
	checkOpErrors(t, openUringOrSkip(t, p, UringOptions{QueueDepth: 4, Rings: 1}), p, false)
}

// checkOpErrors: ops the device cannot take fail alone in their batch, with the right
// error; a read past the end of a file shrunk under the device is ErrUnexpectedEOF. d is a
// 1 MiB file at p; misalignedBuf also checks a buffer at an unaligned address.
func checkOpErrors(t *testing.T, d Device, p string, misalignedBuf bool) {
	buf := uringAlloc(t, 8192)
	lb := int64(d.Info().LogicalBlock)
	cases := []struct {
		name string
		op   Op
		want error
	}{
		{"past end", Op{Off: 1 << 20, Buf: buf[:lb]}, ErrOutOfRange},
		{"negative", Op{Off: -lb, Buf: buf[:lb]}, ErrOutOfRange},
		{"misaligned offset", Op{Off: 1, Buf: buf[:lb]}, ErrMisaligned},
		{"misaligned length", Op{Off: 0, Buf: buf[:lb+1]}, ErrMisaligned},
	}
	if misalignedBuf {
		cases = append(cases, struct {
			name string
			op   Op
			want error
		}{"misaligned buffer", Op{Off: 0, Buf: buf[1 : 1+lb]}, ErrMisaligned})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ops := []Op{tc.op, {Off: 0, Buf: buf[4096:8192]}}
			err := d.Submit(ops)
			if !errors.Is(err, tc.want) || !errors.Is(ops[0].Err, tc.want) {
				t.Fatalf("Submit = %v, op err %v; want %v", err, ops[0].Err, tc.want)
			}
			if ops[1].Err != nil || ops[1].N != 4096 {
				t.Fatalf("the valid op of the batch: N=%d err=%v", ops[1].N, ops[1].Err)
			}
		})
	}
	// The file shrinks under the device: a read past the new end hits EOF.
	if err := os.Truncate(p, 512<<10); err != nil {
		t.Fatal(err)
	}
	if err := ReadAt(d, buf[:4096], 768<<10); !errors.Is(err, ErrUnexpectedEOF) {
		t.Fatalf("read past a shrunk file = %v, want ErrUnexpectedEOF", err)
	}
}

func TestUringReadOnly(t *testing.T) {
	checkReadOnly(t, openUringOrSkip(t, uringTestFile(t, 1<<20), UringOptions{ReadOnly: true, Rings: 1}))
}

// checkReadOnly: a device opened read-only refuses writes and reads.
func checkReadOnly(t *testing.T, d Device) {
	buf := uringAlloc(t, 4096)
	if err := WriteAt(d, buf, 0, placement.None); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("write on a read-only device = %v", err)
	}
	if err := ReadAt(d, buf, 0); err != nil {
		t.Fatal(err)
	}
}

func TestUringDeallocateFile(t *testing.T) {
	d := openUringOrSkip(t, uringTestFile(t, 1<<20), UringOptions{Rings: 1})
	w := uringAlloc(t, 64<<10)
	uringPattern(w, 9)
	if err := WriteAt(d, w, 0, placement.None); err != nil {
		t.Fatal(err)
	}
	if err := d.Deallocate([]Range{{Off: 16 << 10, Len: 32 << 10}}); err != nil {
		t.Fatalf("Deallocate: %v", err)
	}
	r := uringAlloc(t, 64<<10)
	if err := ReadAt(d, r, 0); err != nil {
		t.Fatal(err)
	}
	want := append([]byte(nil), w...)
	clear(want[16<<10 : 48<<10])
	if !bytes.Equal(r, want) {
		t.Fatal("punched range does not read back as zeros (or the rest changed)")
	}
	if err := d.Deallocate([]Range{{Off: 1 << 20, Len: 4096}}); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Deallocate past the end = %v", err)
	}
}

func TestUringConcurrentSubmitters(t *testing.T) {
	checkConcurrentSubmitters(t, openUringOrSkip(t, uringTestFile(t, 8<<20), UringOptions{QueueDepth: 8, Rings: 2}))
}

// checkConcurrentSubmitters: eight goroutines write and read back 16 ops each at once on
// an 8 MiB device.
func checkConcurrentSubmitters(t *testing.T, d Device) {
	const workers, per, bs = 8, 16, 16 << 10
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := uringAlloc(t, per*bs)
			uringPattern(buf, w)
			ops := make([]Op, per)
			for i := range ops {
				ops[i] = Op{Write: true, Off: int64((w*per + i) * bs), Buf: buf[i*bs : (i+1)*bs], Handle: placement.None}
			}
			if err := d.Submit(ops); err != nil {
				t.Error(err)
				return
			}
			got := uringAlloc(t, per*bs)
			if err := ReadAt(d, got, int64(w*per*bs)); err != nil {
				t.Error(err)
				return
			}
			if !bytes.Equal(got, buf) {
				t.Errorf("worker %d read back different bytes", w)
			}
		}()
	}
	wg.Wait()
}

// TestUringLoopDevice runs the data path, BLKDISCARD and flush on a real loop device.
func TestUringLoopDevice(t *testing.T) {
	dev := looptest.Attach(t, uringTestFile(t, 16<<20), looptest.Options{DirectIO: true})
	d := openUringOrSkip(t, dev, UringOptions{QueueDepth: 16, Rings: 2, Exclusive: true})
	info := d.Info()
	if info.Kind != KindBlock || info.Size != 16<<20 {
		t.Fatalf("Info = %+v", info)
	}
	pool := uringAlloc(t, 1<<20)
	if err := d.RegisterBuffers([][]byte{pool}); err != nil {
		t.Fatal(err)
	}
	uringPattern(pool, 3)
	var ops []Op
	for i := 0; i < 16; i++ {
		ops = append(ops, Op{Write: true, Off: int64(i) * 64 << 10, Buf: pool[i*64<<10 : (i+1)*64<<10], Handle: placement.None})
	}
	if err := d.Submit(ops); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	got := uringAlloc(t, 1<<20)
	if err := ReadAt(d, got, 0); err != nil || !bytes.Equal(got, pool) {
		t.Fatalf("loop read back: %v", err)
	}
	if err := d.Deallocate([]Range{{Off: 0, Len: 1 << 20}}); err != nil {
		if errors.Is(err, ErrNotSupported) {
			t.Skipf("loop device without discard: %v", err)
		}
		t.Fatalf("BLKDISCARD: %v", err)
	}
	if err := ReadAt(d, got, 0); err != nil || !bytes.Equal(got, make([]byte, 1<<20)) {
		t.Fatalf("discarded range should read as zeros on a file-backed loop device: %v", err)
	}
	// Close must release the O_EXCL claim at once, registered file and all.
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d2, err := OpenUring(dev, UringOptions{Rings: 2, Exclusive: true})
	if err != nil {
		t.Fatalf("exclusive reopen right after Close: %v", err)
	}
	d2.Close()
}

// TestUringRealBlockDevices runs the io_uring backend on the block devices the QEMU VM test
// provides: null_blk (with discard) and the emulated NVMe namespace's block device.
func TestUringRealBlockDevices(t *testing.T) {
	forRealBlockDevices(t, func(t *testing.T, dev string) {
		d := openUringOrSkip(t, dev, UringOptions{QueueDepth: 32, Rings: 2})
		pool := uringAlloc(t, 4<<20)
		if err := d.RegisterBuffers([][]byte{pool}); err != nil {
			t.Fatalf("RegisterBuffers: %v", err)
		}
		checkRealBlockDevice(t, d, pool[:2<<20], pool[2<<20:], 4<<20)
		if st := d.Stats(); st.FixedOps < 33 {
			t.Fatalf("stats %+v: expected every op fixed", st)
		}
	})
}

// forRealBlockDevices runs fn on null_blk and QEMU's NVMe namespace, which the VM test names
// in RBCTL_TEST_NULLB and RBCTL_TEST_NVME_BLK (skipped elsewhere).
func forRealBlockDevices(t *testing.T, fn func(t *testing.T, dev string)) {
	for _, env := range []string{"RBCTL_TEST_NULLB", "RBCTL_TEST_NVME_BLK"} {
		t.Run(env, func(t *testing.T) {
			dev := os.Getenv(env)
			if dev == "" {
				t.Skipf("%s not set (runs inside the QEMU VM test)", env)
			}
			fn(t, dev)
		})
	}
}

// checkRealBlockDevice writes 32 ops of 64 KiB from src (2 MiB) fromEnd bytes before the
// end of the block device d, flushes, reads them back into dst and discards them.
func checkRealBlockDevice(t *testing.T, d Device, src, dst []byte, fromEnd int64) {
	info := d.Info()
	if info.Kind != KindBlock || info.Size < 8<<20 || info.LogicalBlock < 512 {
		t.Fatalf("Info = %+v", info)
	}
	uringPattern(src, int(fromEnd>>20))
	base := info.Size - fromEnd // near the end, away from other tests' data
	var ops []Op
	for i := 0; i < 32; i++ {
		ops = append(ops, Op{Write: true, Off: base + int64(i)*64<<10, Buf: src[i*64<<10 : (i+1)*64<<10], Handle: placement.None})
	}
	if err := d.Submit(ops); err != nil {
		t.Fatalf("write batch: %v", err)
	}
	if err := d.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if err := ReadAt(d, dst, base); err != nil || !bytes.Equal(dst, src) {
		t.Fatalf("read back: err %v, equal %v", err, bytes.Equal(dst, src))
	}
	if err := d.Deallocate([]Range{{Off: base, Len: 2 << 20}}); err != nil && !errors.Is(err, ErrNotSupported) {
		t.Fatalf("BLKDISCARD: %v", err)
	}
}

// A writer that closes gives its lock back at once: the same process (rbctl commands run one
// after another in a test, a Go program reopening its cache) can open the file for writing
// right after Close, although the kernel drops the rings' reference to the file later.
func TestUringReopenRightAfterClose(t *testing.T) {
	path := uringTestFile(t, 8<<20)
	for i := range 200 {
		d := openUringOrSkip(t, path, UringOptions{})
		if err := WriteAt(d, make([]byte, 4096), int64(i%16)*4096, placement.None); err != nil {
			t.Fatal(err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUringCompleteRetries: a completion with EAGAIN, EINTR or ECANCELED (io-wq failing to
// start its worker cancels a punted op) is issued again, at most maxTries times, and then
// fails naming the errno; other errors fail at once; a short transfer asks for the rest.
func TestUringCompleteRetries(t *testing.T) {
	d := &UringDevice{info: Info{Path: "dev"}}
	for _, tc := range []struct {
		errno unix.Errno
		retry bool
	}{
		{unix.EAGAIN, true}, {unix.EINTR, true}, {unix.ECANCELED, true},
		{unix.EIO, false}, {unix.ENOSPC, false}, {unix.EINVAL, false},
	} {
		op := Op{Write: true, Buf: make([]byte, 8192)}
		b := &uringBatch{d: d, ops: []Op{op}, items: []int32{0}, tries: make([]uint8, 1)}
		tries := 0
		for b.Complete(0, uring.CQE{Res: -int32(tc.errno)}) {
			tries++
			if tries > maxTries {
				t.Fatalf("%v: retried past %d", tc.errno, maxTries)
			}
		}
		if want := map[bool]int{true: maxTries, false: 0}[tc.retry]; tries != want {
			t.Errorf("%v: %d retries, want %d", tc.errno, tries, want)
		}
		if err := b.ops[0].Err; !errors.Is(err, tc.errno) {
			t.Errorf("%v: op error %v", tc.errno, err)
		}
	}
	b := &uringBatch{d: d, ops: []Op{{Buf: make([]byte, 8192)}}, items: []int32{0}, tries: make([]uint8, 1)}
	if !b.Complete(0, uring.CQE{Res: 4096}) || b.ops[0].N != 4096 {
		t.Fatalf("short read: N=%d", b.ops[0].N)
	}
	if b.Complete(0, uring.CQE{Res: 4096}) || b.ops[0].Err != nil {
		t.Fatalf("rest of the read: err %v", b.ops[0].Err)
	}
}
