package blockdev

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rbctl/rbctl/internal/looptest"
	"github.com/rbctl/rbctl/placement"
	"golang.org/x/sys/unix"
)

func openAio(t testing.TB, path string, opt FileOptions) *AioDevice {
	t.Helper()
	d, err := OpenAio(path, opt)
	if err != nil {
		t.Fatalf("OpenAio: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestAioRoundTrip writes a batch longer than the context's depth (so ops wait for slots
// and the reaper submits them), one write with a Tail (PWRITEV), and reads it all back.
func TestAioRoundTrip(t *testing.T) {
	d := openAio(t, uringTestFile(t, 4<<20), FileOptions{Direct: true, QueueDepth: 4})
	const n, bs = 19, 64 << 10
	w := uringAlloc(t, n*bs)
	uringPattern(w, 3)
	ops := make([]Op, n)
	for i := range ops {
		ops[i] = Op{Write: true, Off: int64(i * bs), Buf: w[i*bs : (i+1)*bs], Handle: placement.None}
	}
	// The last op's bytes from two places: header and payload as the engine writes them.
	ops[n-1].Buf, ops[n-1].Tail = w[(n-1)*bs:(n-1)*bs+4096], w[(n-1)*bs+4096:n*bs]
	if err := d.Submit(ops); err != nil {
		t.Fatal(err)
	}
	for i := range ops {
		if ops[i].N != bs || ops[i].Err != nil {
			t.Fatalf("op %d: N=%d err=%v", i, ops[i].N, ops[i].Err)
		}
	}
	r := uringAlloc(t, n*bs)
	if err := ReadAt(d, r, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r, w) {
		t.Fatal("bytes differ after the round trip")
	}
	if sub, ev := d.submits.Load(), d.events.Load(); sub != n+1 || ev != n+1 {
		t.Fatalf("%d iocbs submitted and %d events reaped, want %d each (one per op, none resubmitted)", sub, ev, n+1)
	}
	// The reaper waits in the netpoller: its eventfd is non-blocking (a blocking one would
	// make each wait a read(2) holding a thread).
	if fl, err := unix.FcntlInt(uintptr(d.efdN), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK == 0 {
		t.Fatalf("the completions' eventfd has flags %#x (%v): not O_NONBLOCK", fl, err)
	}
	tm, ok := d.RingTiming()
	if !ok || tm.Batches != 2 || tm.RunNs <= 0 || tm.QueuedNs <= 0 || tm.WakeNs < 0 {
		t.Fatalf("RingTiming = %+v, %v; want the two batches counted, their submission and run measured", tm, ok)
	}
}

// TestAioConcurrentSubmitters: several goroutines share the context's slots.
func TestAioConcurrentSubmitters(t *testing.T) {
	checkConcurrentSubmitters(t, openAio(t, uringTestFile(t, 8<<20), FileOptions{Direct: true, QueueDepth: 8}))
}

func TestAioErrors(t *testing.T) {
	p := uringTestFile(t, 1<<20)
	checkOpErrors(t, openAio(t, p, FileOptions{Direct: true, QueueDepth: 4}), p, true)
}

func TestAioReadOnly(t *testing.T) {
	checkReadOnly(t, openAio(t, uringTestFile(t, 1<<20), FileOptions{Direct: true, ReadOnly: true}))
}

// TestAioCompleteRetries drives complete by hand: a short transfer is resubmitted for its
// rest, retryable errnos up to maxTries, others fail the op; the slot is freed, the batch
// finished and a waiting op takes the slot.
func TestAioCompleteRetries(t *testing.T) {
	d := openAio(t, uringTestFile(t, 1<<20), FileOptions{Direct: true, QueueDepth: 1})
	for _, tc := range []struct {
		errno unix.Errno
		retry bool
	}{
		{unix.EAGAIN, true}, {unix.EINTR, true}, {unix.ECANCELED, true},
		{unix.EIO, false}, {unix.ENOSPC, false}, {unix.EINVAL, false},
	} {
		s := &aioStarted{d: d, ops: []Op{{Write: true, Off: 8192, Buf: make([]byte, 8192)}}, done: make(chan struct{}, 1)}
		s.left.Store(1)
		d.mu.Lock()
		k := int32(d.slot(aioPiece{s, 0}).data)
		d.mu.Unlock()
		tries := 0
		for len(d.complete(k, -int64(tc.errno), nil)) > 0 {
			if tries++; tries > maxTries {
				t.Fatalf("%v: retried past %d", tc.errno, maxTries)
			}
		}
		if want := map[bool]int{true: maxTries, false: 0}[tc.retry]; tries != want {
			t.Errorf("%v: %d retries, want %d", tc.errno, tries, want)
		}
		if err := s.ops[0].Err; !errors.Is(err, tc.errno) {
			t.Errorf("%v: op error %v", tc.errno, err)
		}
		select {
		case <-s.done:
		default:
			t.Fatalf("%v: the batch was not finished", tc.errno)
		}
	}
	// A short read: the rest is prepared at the right offset; a waiting op gets the slot.
	s := &aioStarted{d: d, ops: []Op{{Off: 8192, Buf: make([]byte, 8192)}, {Off: 0, Buf: make([]byte, 4096)}}, done: make(chan struct{}, 1)}
	s.left.Store(2)
	d.mu.Lock()
	k := int32(d.slot(aioPiece{s, 0}).data)
	d.waiting = append(d.waiting, aioPiece{s, 1})
	d.mu.Unlock()
	again := d.complete(k, 4096, nil)
	if len(again) != 1 || again[0].offset != 8192+4096 || again[0].nbytes != 4096 || again[0].opcode != iocbCmdPread {
		t.Fatalf("after a short read: %d iocbs, %+v", len(again), again)
	}
	again = d.complete(k, 4096, nil)
	if s.ops[0].Err != nil || s.ops[0].N != 8192 || len(again) != 1 || again[0].offset != 0 || again[0].nbytes != 4096 {
		t.Fatalf("rest of the read: N=%d err %v; the waiting op's iocb %+v", s.ops[0].N, s.ops[0].Err, again)
	}
	d.complete(int32(again[0].data), 4096, nil)
	select {
	case <-s.done:
	default:
		t.Fatal("the batch was not finished")
	}
	if d.held != 0 || len(d.free) != 1 {
		t.Fatalf("slots held %d, free %d after every op finished", d.held, len(d.free))
	}
}

// TestAioCloseWaits: Close waits for what is in flight; afterwards Start refuses.
func TestAioCloseWaits(t *testing.T) {
	d, err := OpenAio(uringTestFile(t, 4<<20), FileOptions{Direct: true, QueueDepth: 2})
	if err != nil {
		t.Fatal(err)
	}
	const n, bs = 32, 64 << 10
	buf := uringAlloc(t, n*bs)
	ops := make([]Op, n)
	for i := range ops {
		ops[i] = Op{Write: true, Off: int64(i * bs), Buf: buf[i*bs : (i+1)*bs], Handle: placement.None}
	}
	st := d.Start(ops)
	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	if err := st.Wait(); err != nil {
		t.Fatalf("a batch started before Close: %v", err)
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return after the batch finished")
	}
	for i := range ops {
		if ops[i].N != bs {
			t.Fatalf("op %d moved %d bytes before Close returned", i, ops[i].N)
		}
	}
	if err := d.Submit(ops[:1]); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Submit after Close = %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestAioSetupRefused: a context larger than fs.aio-max-nr is refused by io_setup with
// EAGAIN; OpenAio says so as ErrAioUnavailable (what lets serve's default fall back to
// another engine) and closes the file it had opened, so that it opens again exclusively.
func TestAioSetupRefused(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/fs/aio-max-nr")
	if err != nil {
		t.Skipf("no fs.aio-max-nr: %v", err)
	}
	max, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || max >= 1<<24 {
		t.Skipf("fs.aio-max-nr %q: no depth above it to ask for", b)
	}
	p := uringTestFile(t, 1<<20)
	_, err = OpenAio(p, FileOptions{Direct: true, Exclusive: true, QueueDepth: max + 1})
	if !errors.Is(err, ErrAioUnavailable) || !errors.Is(err, unix.EAGAIN) || !strings.Contains(err.Error(), "fs.aio-max-nr") {
		t.Fatalf("io_setup(%d) over fs.aio-max-nr %d: %v", max+1, max, err)
	}
	d, err := OpenAio(p, FileOptions{Direct: true, Exclusive: true, QueueDepth: 4})
	if err != nil {
		t.Fatalf("the file after a refused context: %v", err)
	}
	d.Close()
}

// TestAioLoopDevice runs the data path on a real loop device with direct I/O.
func TestAioLoopDevice(t *testing.T) {
	if testing.Short() {
		t.Skip("-short (the QEMU VM run): the full unit run on the root CI host covers it")
	}
	dev := looptest.New(t, 16<<20, looptest.Options{DirectIO: true})
	d := openAio(t, dev, FileOptions{Direct: true, Exclusive: true, QueueDepth: 8})
	if d.Info().Kind != KindBlock {
		t.Fatalf("kind %v, want a block device", d.Info().Kind)
	}
	w := uringAlloc(t, 1<<20)
	uringPattern(w, 11)
	if err := WriteAt(d, w, 4<<20, placement.None); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	r := uringAlloc(t, 1<<20)
	if err := ReadAt(d, r, 4<<20); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r, w) {
		t.Fatal("bytes differ on the loop device")
	}
}

// TestAioRealBlockDevices runs the data path on null_blk and QEMU's NVMe in the VM test:
// a batch of 32 writes, a flush, the read back (one event per op), BLKDISCARD.
func TestAioRealBlockDevices(t *testing.T) {
	forRealBlockDevices(t, func(t *testing.T, dev string) {
		d := openAio(t, dev, FileOptions{Direct: true, QueueDepth: 16})
		// 6 MiB from the end: clear of the io_uring test's last 4 MiB.
		checkRealBlockDevice(t, d, uringAlloc(t, 2<<20), uringAlloc(t, 2<<20), 6<<20)
		if ev := d.events.Load(); ev != 33 {
			t.Fatalf("%d events for 33 ops", ev)
		}
	})
}

// TestAioReusesBatches: a waited batch goes back to the device for the next Start, so
// one read's error must not reach the next batch, and a read costs no allocation once
// the device is warm (the batch, its channel and its Pinner reused; the reaper's eventfd
// callback made once).
func TestAioReusesBatches(t *testing.T) {
	const size = 1 << 20
	d := openAio(t, uringTestFile(t, size), FileOptions{Direct: true, QueueDepth: 4})
	w := uringAlloc(t, 64<<10)
	uringPattern(w, 7)
	if err := d.Submit([]Op{{Write: true, Off: 0, Buf: w, Handle: placement.None}}); err != nil {
		t.Fatalf("write: %v", err)
	}
	r := uringAlloc(t, 64<<10)
	good := []Op{{Off: 0, Buf: r, Handle: placement.None}}
	past := []Op{{Off: size, Buf: r[:4096], Handle: placement.None}} // past the device's end
	for i := range 20 {
		past[0].N, past[0].Err = 0, nil
		if err := d.Start(past).Wait(); err == nil {
			t.Fatalf("round %d: a read past the end succeeded", i)
		}
		clear(r)
		good[0].N, good[0].Err = 0, nil
		if err := d.Start(good).Wait(); err != nil {
			t.Fatalf("round %d: the read after a failed one returned %v", i, err)
		}
		if !bytes.Equal(r, w) {
			t.Fatalf("round %d: read back other bytes", i)
		}
	}
	allocs := testing.AllocsPerRun(200, func() {
		good[0].N, good[0].Err = 0, nil
		if err := d.Start(good).Wait(); err != nil {
			t.Fatal(err)
		}
	})
	// A GC during the run empties the pool once (two allocations in 200 reads); one per
	// read would mean the batches are not reused.
	if allocs >= 1 {
		t.Errorf("%.2f allocations per read, want the batch reused (< 1)", allocs)
	}
}
