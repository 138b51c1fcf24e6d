package uring

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rbctl/rbctl/internal/sys"
	"golang.org/x/sys/unix"
)

// rwBatch reads or writes chunk-sized pieces of buf at off+i*chunk, resubmitting short
// transfers; cap, when > 0, limits every transfer to cap bytes to force the short path.
type rwBatch struct {
	fd    int32
	write bool
	buf   []byte
	off   int64
	chunk int
	cap   int
	done  []int
	errs  []error
	preps int
}

func (b *rwBatch) Len() int { return len(b.buf) / b.chunk }

func (b *rwBatch) Prep(i int, sqe SQE) {
	b.preps++
	p := b.buf[i*b.chunk+b.done[i] : (i+1)*b.chunk]
	if b.cap > 0 && len(p) > b.cap {
		p = p[:b.cap]
	}
	off := uint64(b.off + int64(i*b.chunk+b.done[i]))
	if b.write {
		sqe.PrepWrite(b.fd, p, off)
	} else {
		sqe.PrepRead(b.fd, p, off)
	}
}

func (b *rwBatch) Complete(i int, c CQE) bool {
	if c.Res <= 0 {
		b.errs[i] = fmt.Errorf("item %d: res %d", i, c.Res)
		return false
	}
	b.done[i] += int(c.Res)
	return b.done[i] < b.chunk
}

func newRW(fd int32, write bool, buf []byte, off int64, chunk int) *rwBatch {
	n := len(buf) / chunk
	return &rwBatch{fd: fd, write: write, buf: buf, off: off, chunk: chunk, done: make([]int, n), errs: make([]error, n)}
}

func newExecutorOrSkip(t testing.TB, opt Options, depth int) *Executor {
	t.Helper()
	e, err := NewExecutor(opt, depth)
	if err != nil {
		if ns, ok := err.(*NotSupportedError); ok {
			t.Skipf("kernel lacks %s (needs %s)", ns.Feature, ns.MinKernel)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// Once a probe has found that the kernel does not signal a registered eventfd for deferred
// completion work, a DEFER_TASKRUN Executor started after it does not probe again (a second
// each) but waits in the kernel, and still completes its batches.
func TestExecutorKeepsTheSignalVerdict(t *testing.T) {
	noDeferredSignal.Store(true)
	defer noDeferredSignal.Store(false)
	e := newExecutorOrSkip(t, Options{SingleIssuer: true, DeferTaskrun: true, BestEffort: true}, 8)
	if e.Flags()&sys.IORING_SETUP_DEFER_TASKRUN == 0 {
		t.Skip("no DEFER_TASKRUN ring here")
	}
	if e.WaitsInPoller() {
		t.Fatal("waits in the netpoller although this process's kernel was found not to signal")
	}
	f := tempFile(t, 1<<20, true)
	buf := offHeap(t, 64<<10)
	fill(buf, 7)
	if err := e.Run(newRW(int32(f.Fd()), true, buf, 0, 16<<10)); err != nil {
		t.Fatal(err)
	}
}

func TestExecutorConcurrentBatches(t *testing.T) {
	for _, opt := range []Options{
		{},
		{SingleIssuer: true, DeferTaskrun: true, BestEffort: true},
		{SingleIssuer: true, DeferTaskrun: true, BestEffort: true, KernelWait: true},
		{CoopTaskrun: true, BestEffort: true},
		{SQPoll: true, SQPollIdle: 10 * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("flags=%#x/kernelwait=%v", opt.setupFlags(), opt.KernelWait), func(t *testing.T) {
			e := newExecutorOrSkip(t, opt, 8)
			// A DEFER_TASKRUN ring waits in the netpoller unless told otherwise (or the kernel,
			// before 6.2 without 6.1's stable fix, does not signal its eventfd); others never do.
			want := e.Flags()&sys.IORING_SETUP_DEFER_TASKRUN != 0 && !opt.KernelWait
			if e.WaitsInPoller() && !want || !e.WaitsInPoller() && want && kernelAtLeast(t, 6, 2) {
				t.Fatalf("ring flags %#x, KernelWait %v: WaitsInPoller %v", e.Flags(), opt.KernelWait, e.WaitsInPoller())
			}
			f := tempFile(t, 8<<20, true)
			const workers, chunk, per = 6, 16 << 10, 24
			bufs := make([][]byte, workers)
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				bufs[w] = offHeap(t, chunk*per)
				fill(bufs[w], byte(w))
				wg.Add(1)
				go func() {
					defer wg.Done()
					b := newRW(int32(f.Fd()), true, bufs[w], int64(w*chunk*per), chunk)
					if err := e.Run(b); err != nil {
						t.Error(err)
					}
					for i, err := range b.errs {
						if err != nil || b.done[i] != chunk {
							t.Errorf("worker %d item %d: done %d err %v", w, i, b.done[i], err)
						}
					}
				}()
			}
			wg.Wait()
			got := offHeap(t, chunk*per*workers)
			rb := newRW(int32(f.Fd()), false, got, 0, chunk)
			if err := e.Run(rb); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, bytes.Join(bufs, nil)) {
				t.Fatal("read back differs from what the workers wrote")
			}
		})
	}
}

func TestExecutorResubmitsShortTransfers(t *testing.T) {
	e := newExecutorOrSkip(t, Options{}, 4)
	f := tempFile(t, 1<<20, true)
	buf := offHeap(t, 64<<10)
	fill(buf, 11)
	w := newRW(int32(f.Fd()), true, buf, 0, 16<<10)
	w.cap = 4096 // every transfer a quarter of the item: three resubmits each
	if err := e.Run(w); err != nil {
		t.Fatal(err)
	}
	if w.preps != 16 {
		t.Fatalf("%d preparations, want 16 (4 items x 4 pieces)", w.preps)
	}
	got := offHeap(t, 64<<10)
	if err := e.Run(newRW(int32(f.Fd()), false, got, 0, 64<<10)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, buf) {
		t.Fatal("bytes differ after resubmitted short writes")
	}
}

func TestExecutorDoAndClose(t *testing.T) {
	e, err := NewExecutor(Options{SingleIssuer: true, BestEffort: true}, 2)
	if err != nil {
		t.Skip(err)
	}
	buf := offHeap(t, 4096)
	if err := e.Do(func(r *Ring) error { return r.RegisterBuffers([][]byte{buf}) }); err != nil {
		t.Fatalf("RegisterBuffers on the owner thread: %v", err)
	}
	if e.Flags()&sys.IORING_SETUP_SINGLE_ISSUER == 0 {
		t.Log("SINGLE_ISSUER dropped by BestEffort")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Run(newRW(0, false, buf, 0, 4096)); err != ErrClosed {
		t.Fatalf("Run after Close = %v, want ErrClosed", err)
	}
}

// TestExecutorCloseReleasesFinishedBatches closes while batches are completing: every Run
// must return (none may be left waiting for a signal the closed Executor never sends).
func TestExecutorCloseReleasesFinishedBatches(t *testing.T) {
	for round := 0; round < 20; round++ {
		e, err := NewExecutor(Options{}, 4)
		if err != nil {
			t.Skip(err)
		}
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; k < 5; k++ {
					if err := e.Run(&nopBatch{n: 7}); err != nil && err != ErrClosed {
						t.Error(err)
					}
				}
			}()
		}
		e.Close()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Run callers still blocked 10 s after Close")
		}
	}
}

// pipeBatch reads one byte from a pipe per item: it stays in flight until the pipe has data.
type pipeBatch struct {
	fd       int32
	bufs     [][]byte
	res      []int32
	prepared chan struct{} // one send per Prep
}

func (b *pipeBatch) Len() int { return len(b.bufs) }
func (b *pipeBatch) Prep(i int, sqe SQE) {
	sqe.PrepRead(b.fd, b.bufs[i], ^uint64(0))
	b.prepared <- struct{}{}
}
func (b *pipeBatch) Complete(i int, c CQE) bool {
	b.res[i] = c.Res
	return false
}

func newPipeBatch(t *testing.T, n int) (*pipeBatch, int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	b := &pipeBatch{fd: int32(p[0]), res: make([]int32, n), prepared: make(chan struct{}, n)}
	for range n {
		b.bufs = append(b.bufs, offHeap(t, 4096))
	}
	return b, p[1]
}

// runAsync starts e.Run(b) and returns a channel with its result.
func runAsync(e *Executor, b Batch) <-chan error {
	c := make(chan error, 1)
	go func() { c <- e.Run(b) }()
	return c
}

func waitRun(t *testing.T, c <-chan error) error {
	t.Helper()
	select {
	case err := <-c:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Run still blocked after 10 s")
		return nil
	}
}

// TestExecutorRingFailure: an io_uring_enter error that is not transient (here
// EOPNOTSUPP: the ring's fd no longer refers to an io_uring) and a completion for a
// user_data that names no operation both fail the work — in flight, queued and new — with
// an error wrapping ErrRingFailed instead of killing the process; Close still returns.
func TestExecutorRingFailure(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inject func(r *Ring) error
		errno  unix.Errno // the Res the in-flight items get, 0: any negative
	}{
		{"enter fails", func(r *Ring) error {
			null, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer unix.Close(null)
			return unix.Dup3(null, r.Fd(), unix.O_CLOEXEC) // io_uring_enter now gets EOPNOTSUPP
		}, unix.EOPNOTSUPP},
		{"unknown user_data", func(r *Ring) error {
			sqe, ok := r.GetSQE()
			if !ok {
				return fmt.Errorf("no SQE")
			}
			sqe.PrepNop()
			sqe.SetUserData(12345)
			return nil
		}, unix.EIO},
		{"user_data of a free slot", func(r *Ring) error {
			sqe, ok := r.GetSQE()
			if !ok {
				return fmt.Errorf("no SQE")
			}
			sqe.PrepNop()
			sqe.SetUserData(7) // depth 8, three items in flight: slots 0..2 are used
			return nil
		}, unix.EIO},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newExecutorOrSkip(t, Options{}, 8)
			stuck, _ := newPipeBatch(t, 3)
			running := runAsync(e, stuck)
			// Let the three reads reach the kernel: once prepared, a NOP batch run after them
			// returns only when the loop has submitted them too.
			for range 3 {
				<-stuck.prepared
			}
			if err := e.Run(&nopBatch{n: 1}); err != nil {
				t.Fatal(err)
			}
			if err := e.Do(tc.inject); err != nil {
				t.Fatal(err)
			}
			// The next trip through the kernel fails (or reaps the stray completion).
			err := waitRun(t, running)
			if !errors.Is(err, ErrRingFailed) {
				t.Fatalf("in-flight batch: %v, want ErrRingFailed", err)
			}
			for i, res := range stuck.res {
				if res >= 0 || (tc.errno != 0 && unix.Errno(-res) != tc.errno) {
					t.Errorf("item %d completed with res %d, want -%v", i, res, tc.errno)
				}
			}
			if err := e.Run(&nopBatch{n: 2}); !errors.Is(err, ErrRingFailed) {
				t.Errorf("Run after the failure: %v", err)
			}
			if err := e.Do(func(*Ring) error { return nil }); !errors.Is(err, ErrRingFailed) {
				t.Errorf("Do after the failure: %v", err)
			}
			if err := e.Close(); err != nil {
				t.Errorf("Close after the failure: %v", err)
			}
		})
	}
}

// TestExecutorRingFailureFailsUnprepared: items of a batch larger than the depth that were
// never prepared when the ring failed are failed too, and Run returns.
func TestExecutorRingFailureFailsUnprepared(t *testing.T) {
	e := newExecutorOrSkip(t, Options{}, 2)
	stuck, _ := newPipeBatch(t, 5)
	running := runAsync(e, stuck)
	<-stuck.prepared
	<-stuck.prepared
	if err := e.Do(func(r *Ring) error { return unix.Dup3(int(stuck.fd), r.Fd(), unix.O_CLOEXEC) }); err != nil {
		t.Fatal(err)
	}
	if err := waitRun(t, running); !errors.Is(err, ErrRingFailed) || !errors.Is(err, unix.EOPNOTSUPP) {
		t.Fatalf("Run: %v, want ErrRingFailed with EOPNOTSUPP", err)
	}
	for i, res := range stuck.res {
		if res != -int32(unix.EOPNOTSUPP) {
			t.Errorf("item %d: res %d", i, res)
		}
	}
}

// Occupancy integrates the items in flight over time: three reads parked on an empty pipe
// hold a mean depth of 3 over any window while they wait, and 0 once they are done.
func TestExecutorOccupancy(t *testing.T) {
	e := newExecutorOrSkip(t, Options{}, 8)
	defer e.Close()
	b, w := newPipeBatch(t, 3)
	for i := range b.bufs {
		b.bufs[i] = b.bufs[i][:1]
	}
	done := runAsync(e, b)
	for range 3 {
		<-b.prepared
	}
	mean := func(a, b Occupancy) float64 {
		return float64(b.InflightNs-a.InflightNs) / float64(b.ElapsedNs-a.ElapsedNs)
	}
	depth := func(want int64) { // the owner accounts its depth just before it waits
		for end := time.Now().Add(10 * time.Second); e.inflight.Load() != want; time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("the owner never accounted a depth of %d (now %d)", want, e.inflight.Load())
			}
		}
	}
	depth(3)
	o1 := e.Occupancy()
	time.Sleep(30 * time.Millisecond)
	o2 := e.Occupancy()
	if m := mean(o1, o2); m < 2.999 || m > 3.001 {
		t.Errorf("mean depth while 3 reads wait: %.4f, want 3", m)
	}
	if _, err := unix.Write(w, []byte{1, 2, 3}); err != nil { // one byte for each read
		t.Fatal(err)
	}
	if err := waitRun(t, done); err != nil {
		t.Fatal(err)
	}
	depth(0)
	o3 := e.Occupancy()
	time.Sleep(20 * time.Millisecond)
	o4 := e.Occupancy()
	if m := mean(o3, o4); m != 0 {
		t.Errorf("mean depth with nothing in flight: %.4f, want 0", m)
	}
	if o4.InflightNs < o2.InflightNs || o4.ElapsedNs <= o2.ElapsedNs {
		t.Errorf("occupancy went backwards: %+v then %+v", o2, o4)
	}
}

// TestExecutorStart starts several batches from one goroutine before waiting for any (more
// items than the depth), and each Wait returns with its batch complete.
func TestExecutorStart(t *testing.T) {
	e := newExecutorOrSkip(t, Options{SingleIssuer: true, DeferTaskrun: true, BestEffort: true}, 8)
	f := tempFile(t, 4<<20, true)
	const batches, chunk, per = 5, 16 << 10, 4
	bufs := make([][]byte, batches)
	var pending []Pending
	var ws []*rwBatch
	for k := range batches {
		bufs[k] = offHeap(t, chunk*per)
		fill(bufs[k], byte(k+1))
		w := newRW(int32(f.Fd()), true, bufs[k], int64(k*chunk*per), chunk)
		ws = append(ws, w)
		pending = append(pending, e.Start(w))
	}
	for k, p := range pending {
		if err := p.Wait(); err != nil {
			t.Fatalf("batch %d: %v", k, err)
		}
		for i, err := range ws[k].errs {
			if err != nil || ws[k].done[i] != chunk {
				t.Fatalf("batch %d item %d: done %d err %v after Wait", k, i, ws[k].done[i], err)
			}
		}
	}
	got := offHeap(t, batches*chunk*per)
	if err := e.Start(newRW(int32(f.Fd()), false, got, 0, chunk)).Wait(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, bytes.Join(bufs, nil)) {
		t.Fatal("read back differs from the started writes")
	}
	if err := e.Start(newRW(0, false, got[:0], 0, chunk)).Wait(); err != nil {
		t.Fatalf("empty batch: %v", err)
	}
	e.Close()
	if err := e.Start(newRW(0, false, got[:chunk], 0, chunk)).Wait(); err != ErrClosed {
		t.Fatalf("Start after Close: Wait = %v, want ErrClosed", err)
	}
}

// kernelAtLeast reports whether the running kernel is at least major.minor.
func kernelAtLeast(t *testing.T, major, minor int) bool {
	t.Helper()
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var ma, mi int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &ma, &mi); err != nil {
		t.Fatalf("kernel release %q: %v", unix.ByteSliceToString(u.Release[:]), err)
	}
	return ma > major || ma == major && mi >= minor
}

// Many small batches one after another, from four goroutines, each waiting for its batch
// before handing over the next: every hand-off meets the Executor about to sleep, so a
// wake-up lost between its last look at the queue and its sleep stalls a caller for good.
// (The netpoller wait once cleared its eventfd after that look, and slept through it.)
func TestExecutorSerialBatchesNeverStall(t *testing.T) {
	for _, kw := range []bool{false, true} {
		t.Run(fmt.Sprintf("kernelwait=%v", kw), func(t *testing.T) {
			e := newExecutorOrSkip(t, Options{SingleIssuer: true, DeferTaskrun: true, BestEffort: true, KernelWait: kw}, 4)
			f := tempFile(t, 1<<20, true)
			const callers, runs = 4, 10000
			progress := make([]atomic.Int64, callers)
			errc := make(chan error, callers)
			for w := range callers {
				go func() {
					buf := offHeap(t, 4096)
					for i := range runs {
						b := newRW(int32(f.Fd()), false, buf, int64((i%256)*4096), 4096)
						if err := e.Run(b); err != nil {
							errc <- err
							return
						}
						if b.errs[0] != nil {
							errc <- b.errs[0]
							return
						}
						progress[w].Add(1)
					}
					errc <- nil
				}()
			}
			var last [callers]int64
			for done := 0; done < callers; {
				select {
				case err := <-errc:
					if err != nil {
						t.Fatal(err)
					}
					done++
				case <-time.After(20 * time.Second):
					// A liveness check, not a speed one: 20 s without a single batch finishing.
					for w := range callers {
						if n := progress[w].Load(); n == last[w] && n < runs {
							e.mu.Lock() // wake both waits, so that Close, in the cleanup, does not wait for ever too
							e.wake(false)
							if e.WaitsInPoller() {
								e.wake(true)
							}
							e.mu.Unlock()
							t.Fatalf("caller %d stalled after %d of %d batches (poller %v)", w, n, runs, e.WaitsInPoller())
						}
						last[w] = progress[w].Load()
					}
				}
			}
			// An Executor that can waits in the netpoller whenever its queue is empty.
			if e.WaitsInPoller() && e.parked.Load() == 0 {
				t.Fatal("never waited in the netpoller")
			}
			// ... and its eventfd is still non-blocking (os.File.Fd keeps it so only because it
			// was created non-blocking): a blocking one would make each of those waits a
			// read(2) holding a thread, not a netpoller park.
			if e.WaitsInPoller() {
				fl, err := unix.FcntlInt(uintptr(e.cfd), unix.F_GETFL, 0)
				if err != nil || fl&unix.O_NONBLOCK == 0 {
					t.Fatalf("the netpoller's eventfd has flags %#x (%v): not O_NONBLOCK", fl, err)
				}
			}
			if !e.WaitsInPoller() && e.parked.Load() != 0 {
				t.Fatalf("waited in the netpoller %d times without WaitsInPoller", e.parked.Load())
			}
			t.Logf("poller %v: %d of the waits in the netpoller", e.WaitsInPoller(), e.parked.Load())
		})
	}
}

// With one batch held in flight (a pipe read), other batches come and go while the Executor,
// if it can, waits in the netpoller: new work and the held batch's completion both reach it
// there.
func TestExecutorWaitsInPollerWhileOthersRun(t *testing.T) {
	e := newExecutorOrSkip(t, Options{SingleIssuer: true, DeferTaskrun: true, BestEffort: true}, 4)
	if !e.WaitsInPoller() {
		t.Skipf("ring flags %#x: the Executor always waits in the kernel here", e.Flags())
	}
	held, w := newPipeBatch(t, 1)
	heldc := runAsync(e, held)
	<-held.prepared
	f := tempFile(t, 1<<20, true)
	buf := offHeap(t, 4096)
	for i := range 50 { // each finishes while the pipe read is in flight
		b := newRW(int32(f.Fd()), false, buf, int64(i*4096), 4096)
		if err := waitRun(t, runAsync(e, b)); err != nil || b.errs[0] != nil {
			t.Fatalf("batch %d: %v %v", i, err, b.errs[0])
		}
	}
	if e.parked.Load() == 0 {
		t.Fatal("never waited in the netpoller with a batch in flight")
	}
	parked := e.parked.Load()
	if _, err := unix.Write(w, []byte{1}); err != nil {
		t.Fatal(err)
	}
	if err := waitRun(t, heldc); err != nil || held.res[0] != 1 {
		t.Fatalf("the held read: %v, res %d", err, held.res[0])
	}
	t.Logf("%d waits in the netpoller while the pipe read was in flight", parked)
}

// TestExecutorTiming: Timing cuts a batch's time into queued, run and wake stamps that lie
// inside its Run, in that order: a pipe read that only completes once the test writes, 50 ms
// after the read was prepared, puts at least those 50 ms in Run (the read cannot complete
// earlier), and the three never add up to more than the Run call took. Do and empty
// batches are not batches of ops and are not counted. Both of the owner's waits (the
// netpoller where the ring has DEFER_TASKRUN, the kernel) are covered.
func TestExecutorTiming(t *testing.T) {
	for _, kw := range []bool{false, true} {
		t.Run(fmt.Sprintf("KernelWait=%v", kw), func(t *testing.T) {
			e := newExecutorOrSkip(t, Options{SingleIssuer: true, DeferTaskrun: true, BestEffort: true, KernelWait: kw}, 4)
			defer e.Close()
			if got := e.Timing(); got != (Timing{}) {
				t.Fatalf("Timing before any batch = %+v", got)
			}
			const hold = 50 * time.Millisecond
			for k := 1; k <= 2; k++ {
				b, w := newPipeBatch(t, 1)
				before := e.Timing()
				t0 := time.Now()
				done := runAsync(e, b)
				<-b.prepared
				time.Sleep(hold)
				if _, err := unix.Write(w, []byte{1}); err != nil {
					t.Fatal(err)
				}
				if err := waitRun(t, done); err != nil {
					t.Fatal(err)
				}
				took := time.Since(t0)
				got := e.Timing()
				d := Timing{Batches: got.Batches - before.Batches, QueuedNs: got.QueuedNs - before.QueuedNs,
					RunNs: got.RunNs - before.RunNs, WakeNs: got.WakeNs - before.WakeNs}
				if d.Batches != 1 {
					t.Fatalf("batch %d: counted %d batches, want 1", k, d.Batches)
				}
				if d.RunNs < int64(hold) {
					t.Errorf("batch %d: Run %v, less than the %v the read was held", k, time.Duration(d.RunNs), hold)
				}
				if d.QueuedNs < 0 || d.WakeNs < 0 || d.QueuedNs+d.RunNs+d.WakeNs > int64(took) {
					t.Errorf("batch %d: queued %v + run %v + wake %v, against the %v Run took",
						k, time.Duration(d.QueuedNs), time.Duration(d.RunNs), time.Duration(d.WakeNs), took)
				}
			}
			before := e.Timing()
			if err := e.Do(func(*Ring) error { return nil }); err != nil {
				t.Fatal(err)
			}
			if err := e.Run(newRW(0, false, nil, 0, 4096)); err != nil {
				t.Fatal(err)
			}
			if got := e.Timing(); got.Batches != before.Batches {
				t.Errorf("a Do and an empty batch were counted: %d -> %d batches", before.Batches, got.Batches)
			}
		})
	}
}
