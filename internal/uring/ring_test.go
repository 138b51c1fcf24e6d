package uring

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/rbctl/rbctl/internal/sys"
	"golang.org/x/sys/unix"
)

// setupOrSkip creates a ring, skipping only when the kernel lacks a requested feature.
func setupOrSkip(t testing.TB, opt Options) *Ring {
	t.Helper()
	r, err := Setup(opt)
	var ns *NotSupportedError
	if errors.As(err, &ns) {
		t.Skipf("kernel lacks %s (needs %s): %v", ns.Feature, ns.MinKernel, err)
	}
	if errors.Is(err, unix.EPERM) {
		t.Skipf("io_uring disabled here (kernel.io_uring_disabled?): %v", err)
	}
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// offHeap returns n bytes of page-aligned anonymous memory released at cleanup.
func offHeap(t testing.TB, n int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

// tempFile opens a file under t.TempDir (O_DIRECT when direct and the filesystem allows it).
func tempFile(t testing.TB, size int64, direct bool) *os.File {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ring.dat")
	flags := os.O_RDWR | os.O_CREATE
	if direct {
		flags |= unix.O_DIRECT
	}
	f, err := os.OpenFile(p, flags, 0o600)
	if err != nil && direct {
		t.Skipf("O_DIRECT not supported on %s: %v", p, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7)
	}
}

// one submits the prepared SQEs, waits for exactly one completion and returns it.
func one(t testing.TB, r *Ring) CQE {
	t.Helper()
	if _, err := r.SubmitAndWait(1); err != nil {
		t.Fatalf("SubmitAndWait: %v", err)
	}
	var c [1]CQE
	if n := r.Reap(c[:]); n != 1 {
		t.Fatalf("Reap = %d, want 1", n)
	}
	return c[0]
}

func TestNop(t *testing.T) {
	r := setupOrSkip(t, Options{Entries: 8})
	if r.Features()&sys.IORING_FEAT_SINGLE_MMAP == 0 {
		t.Log("kernel without IORING_FEAT_SINGLE_MMAP: separate CQ mapping in use")
	}
	for i := 0; i < 20; i++ { // more than the ring size: head/tail wrap
		sqe, ok := r.GetSQE()
		if !ok {
			t.Fatal("GetSQE: SQ full on an empty ring")
		}
		sqe.PrepNop()
		sqe.SetUserData(uint64(1000 + i))
		c := one(t, r)
		if c.UserData != uint64(1000+i) || c.Res != 0 {
			t.Fatalf("NOP %d: got user_data %d res %d", i, c.UserData, c.Res)
		}
	}
}

func TestSQFull(t *testing.T) {
	r := setupOrSkip(t, Options{Entries: 4})
	for i := uint32(0); i < r.SQEntries(); i++ {
		if _, ok := r.GetSQE(); !ok {
			t.Fatalf("GetSQE %d failed before the SQ was full", i)
		}
	}
	if _, ok := r.GetSQE(); ok {
		t.Fatal("GetSQE succeeded on a full SQ")
	}
	if r.SQSpace() != 0 {
		t.Fatalf("SQSpace = %d, want 0", r.SQSpace())
	}
}

func TestReadWrite(t *testing.T) {
	r := setupOrSkip(t, Options{Entries: 16})
	if err := r.RequireOp(sys.IORING_OP_READ); err != nil {
		t.Skip(err)
	}
	f := tempFile(t, 1<<20, true)
	fd := int32(f.Fd())
	w := offHeap(t, 64<<10)
	fill(w, 3)
	sqe, _ := r.GetSQE()
	sqe.PrepWrite(fd, w, 4096)
	sqe.SetUserData(1)
	if c := one(t, r); c.Res != int32(len(w)) {
		t.Fatalf("write res = %d (%v), want %d", c.Res, c.Err(), len(w))
	}
	rd := offHeap(t, 64<<10)
	sqe, _ = r.GetSQE()
	sqe.PrepRead(fd, rd, 4096)
	sqe.SetUserData(2)
	if c := one(t, r); c.Res != int32(len(rd)) || c.UserData != 2 {
		t.Fatalf("read res = %d (%v) ud %d", c.Res, c.Err(), c.UserData)
	}
	if !bytes.Equal(w, rd) {
		t.Fatal("read back different bytes")
	}
}

func TestBatchManyInFlight(t *testing.T) {
	r := setupOrSkip(t, Options{Entries: 32})
	f := tempFile(t, 4<<20, true)
	fd := int32(f.Fd())
	const n, bs = 32, 16 << 10
	buf := offHeap(t, n*bs)
	fill(buf, 9)
	for i := 0; i < n; i++ {
		sqe, ok := r.GetSQE()
		if !ok {
			t.Fatalf("SQ full at %d", i)
		}
		sqe.PrepWrite(fd, buf[i*bs:(i+1)*bs], uint64(i*bs))
		sqe.SetUserData(uint64(i))
	}
	if got, err := r.Submit(); err != nil || got != n {
		t.Fatalf("Submit = %d, %v; want %d in one io_uring_enter", got, err, n)
	}
	seen := make([]bool, n)
	cq := make([]CQE, n)
	for left := n; left > 0; {
		if err := r.Wait(1); err != nil {
			t.Fatal(err)
		}
		k := r.Reap(cq)
		for _, c := range cq[:k] {
			if c.Res != bs || seen[c.UserData] {
				t.Fatalf("completion %+v (dup=%v)", c, seen[c.UserData])
			}
			seen[c.UserData] = true
		}
		left -= k
	}
	got := make([]byte, n*bs)
	if _, err := f.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, buf) {
		t.Fatal("file content differs from what was written")
	}
}

func TestFixedBuffers(t *testing.T) {
	r := setupOrSkip(t, Options{Entries: 8})
	f := tempFile(t, 1<<20, true)
	fd := int32(f.Fd())
	pool := offHeap(t, 256<<10)
	other := offHeap(t, 64<<10)
	if err := r.RegisterBuffers([][]byte{pool, other}); err != nil {
		t.Fatalf("RegisterBuffers: %v", err)
	}
	// A sub-range of a registered buffer is legal for fixed ops.
	src := pool[64<<10 : 128<<10]
	fill(src, 42)
	sqe, _ := r.GetSQE()
	sqe.PrepWriteFixed(fd, src, 8192, 0)
	if c := one(t, r); c.Res != int32(len(src)) {
		t.Fatalf("write fixed res = %d (%v)", c.Res, c.Err())
	}
	sqe, _ = r.GetSQE()
	sqe.PrepReadFixed(fd, other, 8192, 1)
	if c := one(t, r); c.Res != int32(len(other)) {
		t.Fatalf("read fixed res = %d (%v)", c.Res, c.Err())
	}
	if !bytes.Equal(src, other) {
		t.Fatal("fixed read returned different bytes")
	}
	// A buffer outside the registered region must be refused by the kernel.
	stray := offHeap(t, 4096)
	sqe, _ = r.GetSQE()
	sqe.PrepReadFixed(fd, stray, 0, 1)
	if c := one(t, r); c.Res != -int32(unix.EFAULT) {
		t.Fatalf("fixed read outside the registered buffer: res %d, want -EFAULT", c.Res)
	}
	if err := r.UnregisterBuffers(); err != nil {
		t.Fatal(err)
	}
}

func TestFsync(t *testing.T) {
	r := setupOrSkip(t, Options{Entries: 4})
	f := tempFile(t, 4096, false)
	for _, fl := range []uint32{0, sys.IORING_FSYNC_DATASYNC} {
		sqe, _ := r.GetSQE()
		sqe.PrepFsync(int32(f.Fd()), fl)
		if c := one(t, r); c.Res != 0 {
			t.Fatalf("fsync(flags=%d) res = %d (%v)", fl, c.Res, c.Err())
		}
	}
	sqe, _ := r.GetSQE()
	sqe.PrepFsync(-1, 0)
	if c := one(t, r); c.Res != -int32(unix.EBADF) {
		t.Fatalf("fsync on fd -1: res %d, want -EBADF", c.Res)
	}
}

func TestSQE128CQE32(t *testing.T) {
	r := setupOrSkip(t, Options{Entries: 8, SQE128: true, CQE32: true})
	if r.Flags()&(sys.IORING_SETUP_SQE128|sys.IORING_SETUP_CQE32) != sys.IORING_SETUP_SQE128|sys.IORING_SETUP_CQE32 {
		t.Fatalf("flags %#x lack SQE128|CQE32", r.Flags())
	}
	// Fill every slot's command area so an off-by-64 SQE stride would corrupt neighbours.
	for i := 0; i < 3*int(r.SQEntries()); i++ {
		sqe, ok := r.GetSQE()
		if !ok {
			t.Fatal("SQ full")
		}
		if len(sqe.Cmd()) != 80 || len(sqe.Bytes()) != 128 {
			t.Fatalf("Cmd %d bytes, SQE %d bytes; want 80 and 128", len(sqe.Cmd()), len(sqe.Bytes()))
		}
		for j := range sqe.Cmd() {
			sqe.Cmd()[j] = 0xEE
		}
		sqe.PrepNop()
		sqe.SetUserData(uint64(i))
		c := one(t, r)
		if c.UserData != uint64(i) || c.Res != 0 || c.Big() != [2]uint64{} {
			t.Fatalf("NOP %d on SQE128/CQE32: %+v big=%v", i, c, c.Big())
		}
	}
	// A plain read also works on the big ring, and the 32-byte CQE stride holds.
	f := tempFile(t, 64<<10, false)
	want := []byte("sqe128 cqe32 read")
	f.WriteAt(want, 100)
	buf := offHeap(t, 4096)
	sqe, _ := r.GetSQE()
	sqe.PrepRead(int32(f.Fd()), buf[:len(want)], 100)
	sqe.SetUserData(77)
	if c := one(t, r); c.Res != int32(len(want)) || c.UserData != 77 || !bytes.Equal(buf[:len(want)], want) {
		t.Fatalf("read on SQE128 ring: %+v %q", c, buf[:len(want)])
	}
}

func TestSmallSQECmdArea(t *testing.T) {
	r := setupOrSkip(t, Options{Entries: 2})
	sqe, _ := r.GetSQE()
	if len(sqe.Cmd()) != 16 || len(sqe.Bytes()) != 64 {
		t.Fatalf("64-byte ring: Cmd %d, Bytes %d; want 16 and 64", len(sqe.Cmd()), len(sqe.Bytes()))
	}
}

func TestUringCmdGolden(t *testing.T) {
	r := setupOrSkip(t, Options{Entries: 2, SQE128: true, CQE32: true})
	sqe, _ := r.GetSQE()
	cmd := sqe.PrepUringCmd(7, sys.NVME_URING_CMD_IO)
	cmd[0] = 0x02
	sqe.SetOpFlags(sys.IORING_URING_CMD_FIXED)
	sqe.SetBufIndex(3)
	sqe.SetUserData(0x1122334455667788)
	b := sqe.Bytes()
	want := map[int]byte{0: sys.IORING_OP_URING_CMD, 4: 7, 8: 0x80, 9: 0x4E, 10: 0x48, 11: 0xC0, 28: 1, 32: 0x88, 33: 0x77, 34: 0x66, 35: 0x55, 36: 0x44, 37: 0x33, 38: 0x22, 39: 0x11, 40: 3, 48: 0x02}
	for i, v := range b {
		if w := want[i]; v != w {
			t.Fatalf("SQE byte %d = %#x, want %#x\n% x", i, v, w, b)
		}
	}
}

func TestShortReadAtEOF(t *testing.T) {
	// A buffered read across EOF returns fewer bytes; the resubmit returns 0 at EOF.
	r := setupOrSkip(t, Options{Entries: 4})
	f := tempFile(t, 0, false)
	f.Write(bytes.Repeat([]byte{5}, 6000))
	buf := offHeap(t, 8192)
	sqe, _ := r.GetSQE()
	sqe.PrepRead(int32(f.Fd()), buf, 0)
	if c := one(t, r); c.Res != 6000 {
		t.Fatalf("read across EOF res %d, want 6000", c.Res)
	}
	sqe, _ = r.GetSQE()
	sqe.PrepRead(int32(f.Fd()), buf[6000:], 6000)
	if c := one(t, r); c.Res != 0 {
		t.Fatalf("read at EOF res %d, want 0", c.Res)
	}
}

func TestProbe(t *testing.T) {
	r := setupOrSkip(t, Options{Entries: 2})
	if r.Probe() == nil {
		t.Skip("no IORING_REGISTER_PROBE (Linux < 5.6)")
	}
	for _, op := range []uint8{sys.IORING_OP_NOP, sys.IORING_OP_READ_FIXED, sys.IORING_OP_FSYNC} {
		if err := r.RequireOp(op); err != nil {
			t.Errorf("RequireOp(%d) = %v on a kernel with a probe", op, err)
		}
	}
	err := r.RequireOp(250)
	if !errors.Is(err, ErrNotSupported) {
		t.Fatalf("RequireOp(250) = %v, want ErrNotSupported", err)
	}
}

func TestOptionalFlags(t *testing.T) {
	cases := []struct {
		name string
		opt  Options
		flag uint32
	}{
		{"single-issuer", Options{SingleIssuer: true}, sys.IORING_SETUP_SINGLE_ISSUER},
		{"defer-taskrun", Options{DeferTaskrun: true}, sys.IORING_SETUP_DEFER_TASKRUN},
		{"coop-taskrun", Options{CoopTaskrun: true}, sys.IORING_SETUP_COOP_TASKRUN},
		{"submit-all", Options{SubmitAll: true}, sys.IORING_SETUP_SUBMIT_ALL},
		{"sqpoll", Options{SQPoll: true}, sys.IORING_SETUP_SQPOLL},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tc.opt.Entries = 4
			r := setupOrSkip(t, tc.opt)
			if r.Flags()&tc.flag == 0 {
				t.Fatalf("flags %#x lack %#x", r.Flags(), tc.flag)
			}
			for i := 0; i < 10; i++ {
				sqe, _ := r.GetSQE()
				sqe.PrepNop()
				sqe.SetUserData(uint64(i))
				if c := one(t, r); c.UserData != uint64(i) {
					t.Fatalf("NOP %d: %+v", i, c)
				}
			}
		})
	}
}

func TestIOPollRejectsBufferedFile(t *testing.T) {
	// IOPOLL only works on polled queues; on a buffered tmpfs/ext4 file the op fails
	// with EOPNOTSUPP. We assert the ring sets up and the error comes back as a CQE.
	r := setupOrSkip(t, Options{Entries: 4, IOPoll: true})
	f := tempFile(t, 4096, false)
	buf := offHeap(t, 4096)
	sqe, _ := r.GetSQE()
	sqe.PrepRead(int32(f.Fd()), buf, 0)
	c := one(t, r)
	if c.Res >= 0 {
		t.Logf("IOPOLL read on a buffered file succeeded (res %d)", c.Res)
	} else if c.Res != -int32(unix.EOPNOTSUPP) && c.Res != -int32(unix.EINVAL) {
		t.Fatalf("IOPOLL read: res %d, want EOPNOTSUPP/EINVAL or success", c.Res)
	}
}

func TestNotSupportedError(t *testing.T) {
	err := error(&NotSupportedError{Feature: "IORING_SETUP_SQE128", MinKernel: "5.19", Err: unix.EINVAL})
	if !errors.Is(err, ErrNotSupported) || !errors.Is(err, unix.EINVAL) {
		t.Fatalf("errors.Is chain broken for %v", err)
	}
	if got := err.Error(); got != "io_uring: IORING_SETUP_SQE128 needs Linux 5.19 or newer (invalid argument)" {
		t.Fatalf("message %q", got)
	}
}

// A signal that interrupts io_uring_enter's wait after it has submitted makes the kernel
// return the submitted count and drop the -EINTR (io_uring_enter prefers a submission count
// to the wait's error), so one enter does not mean the wait finished. The Go runtime sends
// such signals (SIGURG for preemption); under a slow emulator they land inside the wait
// often enough to fail a test that trusted the one enter.
//
// The op waited for is a timeout (IORING_OP_TIMEOUT, 150 ms): the kernel completes it from
// its timer, with no io-wq worker and no poll. A pipe read served the first version of this
// test and failed once in the 6.1 guest with -ECANCELED: there the kernel cancels an op it
// punted to io-wq when it cannot start io-wq's first worker, and a thread with signals
// pending cannot start one (blockdev's retryable says the same of device I/O).
func TestSubmitAndWaitOutlastsSignals(t *testing.T) {
	r := setupOrSkip(t, Options{Entries: 4})
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pid, tid := unix.Getpid(), unix.Gettid()
	stop := make(chan struct{})
	done := make(chan struct{})
	signals := 0
	go func() {
		defer close(done)
		// Signal the waiting thread while the timeout runs (20 × 5 ms of its 150 ms).
		for i := 0; i < 20; i++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if unix.Tgkill(pid, tid, unix.SIGURG) == nil {
				signals++
			}
		}
	}()
	defer func() { close(stop); <-done }()

	ts := &unix.Timespec{Nsec: int64(150 * time.Millisecond)}
	sqe, _ := r.GetSQE()
	sqe.SetOpcode(sys.IORING_OP_TIMEOUT)
	sqe.SetAddr(uint64(uintptr(unsafe.Pointer(ts))))
	sqe.SetLen(1)
	sqe.SetUserData(7)
	_, err := r.SubmitAndWait(1)
	runtime.KeepAlive(ts)
	if err != nil {
		t.Fatalf("SubmitAndWait: %v", err)
	}
	if got := r.CQReady(); got != 1 {
		t.Fatalf("SubmitAndWait(1) returned with %d completions ready", got)
	}
	var c [1]CQE
	if r.Reap(c[:]) != 1 || c[0].UserData != 7 || c[0].Res != -int32(unix.ETIME) {
		t.Fatalf("completion %+v, want user data 7 and -ETIME", c[0])
	}
	close(stop)
	<-done
	stop = make(chan struct{}) // the deferred close must not close twice
	if signals == 0 {
		t.Fatal("no signal was sent, so the test showed nothing")
	}
}
