package uring

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rbctl/rbctl/internal/sys"
	"golang.org/x/sys/unix"
)

// Batch is work handed to an Executor: Len items, each prepared into one SQE and completed by
// one CQE. Prep and Complete run on the Executor's goroutine, one call at a time per batch.
type Batch interface {
	Len() int
	// Prep fills sqe for item i. The Executor sets user_data afterwards; do not touch it.
	Prep(i int, sqe SQE)
	// Complete receives item i's completion. Returning true asks for Prep(i) and submission
	// again, e.g. for the remainder of a short transfer; Complete then runs again later.
	Complete(i int, c CQE) (again bool)
}

// ErrRingFailed marks work an Executor failed because its ring stopped working: an
// io_uring_enter error that reaping and retrying cannot cure (EBADF, EINVAL, EFAULT, EBADR,
// EOWNERDEAD, ...) or a completion whose user_data names no operation in flight. The
// Executor then fails every item it holds, closes its ring and refuses further work; Run and
// Do return an error wrapping ErrRingFailed (and the errno, when there is one).
var ErrRingFailed = errors.New("io_uring executor: ring failed")

// Executor owns one Ring on a goroutine locked to its OS thread and runs Batches handed to it
// by Run from any goroutine, keeping up to Depth items in flight across all of them. Items
// are matched to completions by an index into a preallocated op table carried in user_data.
// On a DEFER_TASKRUN ring the goroutine waits in the Go netpoller, on an eventfd registered
// with the ring that the kernel signals when completion work is queued and callers signal
// for new work (see WaitsInPoller). Elsewhere it sleeps in io_uring_enter, and new work wakes
// it through a second eventfd the ring polls.
type Executor struct {
	depth  int
	efd    int
	flags  uint32
	feats  uint32
	probe  *Probe
	poller bool         // waits in the netpoller (see WaitsInPoller)
	parked atomic.Int64 // waits in the netpoller (tests)

	mu       sync.Mutex
	queue    []*job
	sleeping bool // the owner waits in the kernel and must be woken for new work
	inKernel bool // the owner waits in the kernel, possibly at full depth (Do wakes it anyway)
	inPoller bool // ... and waits in the netpoller: wake it through cfd, not efd
	cfd      int  // the eventfd registered with the ring (with poller)
	closing  bool
	failed   error // why the ring failed (wraps ErrRingFailed); set once, with closing
	exited   chan struct{}

	// Occupancy, published by the owner (see Occupancy): items in flight, their integral
	// over time up to lastNs, and lastNs, all since start.
	start    time.Time
	inflight atomic.Int64
	areaNs   atomic.Int64
	lastNs   atomic.Int64

	// Timing's sums, added by each timed batch's Wait.
	timed, queuedNs, runNs, wakeNs atomic.Int64
}

// Occupancy is how full an Executor kept its ring since it started: the integral over time
// of the items in flight (item·nanoseconds) and the nanoseconds it covers. Over a window
// between two readings a and b, the mean depth is (b.InflightNs-a.InflightNs) /
// (b.ElapsedNs-a.ElapsedNs); by Little's law it equals ops/s × mean latency.
type Occupancy struct {
	InflightNs, ElapsedNs int64
}

// Occupancy reads the Executor's occupancy integral up to now.
func (e *Executor) Occupancy() Occupancy {
	// The owner adds to area, then stores last, then the new depth. Reading in the same
	// order, a reading that races an update is off by at most the one interval being
	// accounted (microseconds at full load); between readings taken apart the error does
	// not accumulate.
	area := e.areaNs.Load()
	last := e.lastNs.Load()
	n := e.inflight.Load()
	now := int64(time.Since(e.start))
	return Occupancy{InflightNs: area + n*max(0, now-last), ElapsedNs: now}
}

// account adds the interval since the last call at the depth stored then, and stores
// inflight as the depth from now on.
func (e *Executor) account(inflight int) {
	now := int64(time.Since(e.start))
	last := e.lastNs.Load()
	e.areaNs.Add(e.inflight.Load() * (now - last))
	e.lastNs.Store(now)
	e.inflight.Store(int64(inflight))
}

// Timing is where an Executor's batches spent their time, summed over the batches whose Wait
// has returned since it started (a batch failed with the ring is not counted). Each batch's
// time is cut in three, one after the other:
//
//   - Queued: from Start until the owner prepares its first item: the hand-off of the work
//     to the ring's thread, and its wait behind other batches;
//   - Run: from then until its last completion is reaped: the device, and the completion's
//     way back to the ring's thread (the kernel's signal, the netpoller, the thread's wake-up);
//   - Wake: from the owner waking the caller until the caller's Wait returns: the hand-off
//     back.
//
// The device's own share of Run is what the kernel's block statistics count for the same
// reads (/sys/block/DEV/stat); docs/resp.md shows both for a RESP GET.
type Timing struct {
	Batches                 int64
	QueuedNs, RunNs, WakeNs int64
}

// Plus is t and x added, stage by stage (the Timing of several rings).
func (t Timing) Plus(x Timing) Timing {
	return Timing{Batches: t.Batches + x.Batches, QueuedNs: t.QueuedNs + x.QueuedNs, RunNs: t.RunNs + x.RunNs, WakeNs: t.WakeNs + x.WakeNs}
}

// Timing reads the Executor's sums (see Timing).
func (e *Executor) Timing() Timing {
	return Timing{Batches: e.timed.Load(), QueuedNs: e.queuedNs.Load(), RunNs: e.runNs.Load(), WakeNs: e.wakeNs.Load()}
}

// since is the monotonic time since the Executor started, the clock of its stamps.
func (e *Executor) since() int64 { return int64(time.Since(e.start)) }

type job struct {
	e    *Executor
	b    Batch
	n    int // items
	next int // next item never prepared
	left int // items not finally completed
	fn   func(*Ring) error
	err  error
	done chan struct{}

	// Stamps for Timing (Executor.since): queued, first item prepared, last completion
	// reaped, caller woken; 0 until then.
	tQueued, tPrep, tReap, tWoken int64
}

var jobPool = sync.Pool{New: func() any { return &job{done: make(chan struct{}, 1)} }}

type opSlot struct {
	j *job
	i int
}

const wakeTag = ^uint64(0) // user_data of the eventfd poll; op-table indices are small

// NewExecutor starts an Executor whose ring is set up with opt on its own locked thread.
// depth (>= 1) bounds the items in flight; opt.Entries is raised to fit it.
func NewExecutor(opt Options, depth int) (*Executor, error) {
	if depth < 1 {
		return nil, fmt.Errorf("io_uring executor: depth %d must be at least 1", depth)
	}
	need := uint32(depth + 1) // + the eventfd poll
	if opt.Entries < need {
		opt.Entries = 1
		for opt.Entries < need {
			opt.Entries <<= 1
		}
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("io_uring executor: eventfd: %w", err)
	}
	e := &Executor{depth: depth, efd: efd, exited: make(chan struct{}), start: time.Now()}
	ready := make(chan error, 1)
	go e.loop(opt, ready)
	if err := <-ready; err != nil {
		unix.Close(efd)
		return nil, err
	}
	return e, nil
}

// Depth is the most items the Executor keeps in flight.
func (e *Executor) Depth() int { return e.depth }

// Flags and Features describe the ring (IORING_SETUP_* in effect, IORING_FEAT_*).
func (e *Executor) Flags() uint32    { return e.flags }
func (e *Executor) Features() uint32 { return e.feats }

// Probe is the ring's opcode probe (nil before Linux 5.6).
func (e *Executor) Probe() *Probe { return e.probe }

// WaitsInPoller reports whether the Executor waits for completions in the Go netpoller
// rather than inside io_uring_enter. A goroutine in a system call keeps its P until the
// runtime takes it back (20 µs to 10 ms); in the netpoller the thread holds none, so the
// callers it has just woken (queued on its P) and other goroutines run while it waits.
func (e *Executor) WaitsInPoller() bool { return e.poller }

// Run performs every item of b and returns when all have completed. It returns ErrClosed if
// the Executor is closed, and an error wrapping ErrRingFailed if the ring failed while b was
// queued or in flight (the items it could not finish were completed with a negative errno
// Res, see fail); otherwise item outcomes are the Batch's business.
func (e *Executor) Run(b Batch) error { return e.Start(b).Wait() }

// Pending is a batch handed to Start, until its Wait returns.
type Pending struct {
	j   *job  // nil: nothing queued (an empty batch, or err)
	err error // why the batch was not queued
}

// Start queues b and returns at once, so the caller can work while the ring runs b (e.g.
// checksum the next batch). Wait must be called exactly once on what it returns: it
// blocks until every item of b has completed and returns what Run would have.
func (e *Executor) Start(b Batch) Pending {
	n := b.Len()
	if n == 0 {
		return Pending{}
	}
	j := jobPool.Get().(*job)
	j.e, j.b, j.n, j.next, j.left, j.fn, j.err = e, b, n, 0, n, nil, nil
	j.tQueued, j.tPrep, j.tReap, j.tWoken = e.since(), 0, 0, 0
	if err := e.enqueue(j); err != nil {
		j.b = nil
		jobPool.Put(j)
		return Pending{err: err}
	}
	return Pending{j: j}
}

// Wait blocks until the batch has completed (see Run).
func (p Pending) Wait() error {
	j := p.j
	if j == nil {
		return p.err
	}
	<-j.done
	if e := j.e; j.tWoken > 0 {
		e.queuedNs.Add(j.tPrep - j.tQueued)
		e.runNs.Add(j.tReap - j.tPrep)
		e.wakeNs.Add(e.since() - j.tWoken)
		e.timed.Add(1)
	}
	err := j.err
	j.e, j.b, j.err = nil, nil, nil
	jobPool.Put(j)
	return err
}

// Do runs fn on the Executor's thread with its ring (e.g. to register buffers on a
// SINGLE_ISSUER ring) and returns fn's error.
func (e *Executor) Do(fn func(*Ring) error) error {
	j := &job{fn: fn, done: make(chan struct{}, 1)}
	if err := e.enqueue(j); err != nil {
		return err
	}
	<-j.done
	return j.err
}

func (e *Executor) enqueue(j *job) error {
	e.mu.Lock()
	if e.closing {
		err := e.failed
		e.mu.Unlock()
		if err == nil {
			err = ErrClosed
		}
		return err
	}
	e.queue = append(e.queue, j)
	// A batch waits for a free slot, which only a completion brings; a Do needs no slot,
	// so it wakes the owner even at full depth.
	if e.sleeping || (j.fn != nil && e.inKernel) {
		e.sleeping, e.inKernel = false, false
		e.wake(e.inPoller)
	}
	e.mu.Unlock()
	return nil
}

// wake wakes the owner from its wait: in the kernel through the eventfd its ring polls; in
// the netpoller through the registered eventfd itself (the ring's poll would signal that
// one from inside the eventfd's own wake-up, which the kernel defers to an RCU callback).
// Callers hold e.mu: the owner cannot then finish the work, exit and close the eventfd
// before the write, which would otherwise land on whatever file reused its number.
func (e *Executor) wake(poller bool) {
	one := [8]byte{1}
	fd := e.efd
	if poller {
		fd = e.cfd
	}
	unix.Write(fd, one[:]) // EAGAIN only if the counter is saturated: it is readable anyway
}

// Close waits for queued and in-flight work to finish, then tears the ring down. After a ring
// failure it only waits for the goroutine, which has already failed the work.
func (e *Executor) Close() error {
	e.mu.Lock()
	already := e.closing
	e.closing = true
	if !already && e.sleeping {
		e.wake(e.inPoller)
	}
	e.sleeping = false
	e.mu.Unlock()
	<-e.exited
	return nil
}

func (e *Executor) loop(opt Options, ready chan<- error) {
	// Never unlocked: a SINGLE_ISSUER ring is bound to this thread, which exits with us.
	runtime.LockOSThread()
	defer close(e.exited)
	r, err := Setup(opt)
	if err != nil {
		ready <- err
		return
	}
	defer unix.Close(e.efd)
	defer r.Close()
	e.flags, e.feats, e.probe = r.Flags(), r.Features(), r.Probe()
	var poller syscall.RawConn
	if !opt.KernelWait && e.flags&sys.IORING_SETUP_DEFER_TASKRUN != 0 {
		// Without the poller the ring waits in the kernel as on any other ring.
		if f, rc, err := pollOn(r); err == nil {
			defer f.Close()
			poller, e.poller, e.cfd = rc, true, int(f.Fd())
		}
	}
	ready <- nil

	table := make([]opSlot, e.depth)
	free := make([]uint32, e.depth)
	for i := range free {
		free[i] = uint32(e.depth - 1 - i)
	}
	cqes := make([]CQE, 2*e.depth+2)
	var (
		active, spare []*job
		retry         []opSlot
		finished      []*job // batches complete since the last refill
		inflight      int
		pollArmed     = poller != nil // callers wake a netpoller wait through cfd: no ring poll
		efdBuf        [8]byte
	)
	for {
		e.mu.Lock()
		spare, e.queue = e.queue, spare[:0]
		closing := e.closing
		e.mu.Unlock()
		for _, j := range spare {
			if j.fn != nil {
				j.err = j.fn(r)
				j.done <- struct{}{}
				continue
			}
			active = append(active, j)
		}
		clear(spare)
		if closing && inflight == 0 && len(active) == 0 && len(retry) == 0 {
			now := e.since()
			for _, j := range finished {
				j.tWoken = now
				j.done <- struct{}{}
			}
			return
		}

		e.account(inflight) // the wait and reap before this were at the depth of the last refill
		// Prepare as many items as depth and the SQ allow: retries first, then in order.
		for inflight < e.depth && (len(retry) > 0 || len(active) > 0) {
			sqe, ok := r.GetSQE()
			if !ok {
				break
			}
			var s opSlot
			if n := len(retry); n > 0 {
				s, retry = retry[n-1], retry[:n-1]
			} else {
				j := active[0]
				s = opSlot{j, j.next}
				if j.next++; j.next == j.n {
					active[0] = nil
					active = active[1:]
				}
			}
			idx := free[len(free)-1]
			free = free[:len(free)-1]
			table[idx] = s
			if s.j.tPrep == 0 {
				s.j.tPrep = e.since()
			}
			s.j.b.Prep(s.i, sqe)
			sqe.SetUserData(uint64(idx))
			inflight++
		}
		if !pollArmed {
			if sqe, ok := r.GetSQE(); ok {
				sqe.SetOpcode(sys.IORING_OP_POLL_ADD)
				sqe.SetFd(int32(e.efd))
				sqe.SetOpFlags(unix.POLLIN)
				sqe.SetUserData(wakeTag)
				pollArmed = true
			}
		}

		// Wake the callers of finished batches only after the refill is in the kernel: a
		// wake-up costs a futex call (an IPI and, in a VM, an exit) that the device should
		// not wait for.
		if len(finished) > 0 {
			if r.SQReady() > 0 {
				if _, err := r.Submit(); err != nil && !isTransient(err) {
					e.fail(r, err, table, retry, active, finished)
					return
				}
			}
			now := e.since()
			for i, j := range finished {
				j.tWoken = now
				j.done <- struct{}{}
				finished[i] = nil
			}
			finished = finished[:0]
		}

		// Wait (in the netpoller, or in the kernel) unless new work is already queued.
		// Callers wake us only while we could take more work (below depth).
		// Items left unprepared here wait for a free slot, which only a completion brings.
		var wait uint32
		inPoller := poller != nil
		e.mu.Lock()
		if len(e.queue) == 0 && (e.closing == closing) {
			wait = 1
			e.sleeping = inflight < e.depth
			e.inKernel = true
			e.inPoller = inPoller
		}
		e.mu.Unlock()
		e.account(inflight) // the depth after the refill, through the wait
		var err error
		if wait == 1 && inPoller {
			e.parked.Add(1)
			err = waitInPoller(r, poller)
		} else {
			_, err = r.SubmitAndWait(wait)
		}
		if wait == 1 {
			e.mu.Lock()
			e.sleeping, e.inKernel, e.inPoller = false, false, false
			e.mu.Unlock()
		}
		if err != nil && !isTransient(err) {
			// EBADF/EFAULT/EINVAL/EBADR/... here mean the ring itself is broken.
			e.fail(r, err, table, retry, active, finished)
			return
		}
		var stray error
		for {
			n := r.Reap(cqes)
			if n == 0 {
				break
			}
			for _, c := range cqes[:n] {
				if c.UserData == wakeTag {
					unix.Read(e.efd, efdBuf[:])
					pollArmed = false
					continue
				}
				if c.UserData >= uint64(len(table)) || table[c.UserData].j == nil {
					// Not ours: the op table and the kernel disagree, so some operation's
					// completion may never come. Deliver the rest of this batch, then fail.
					stray = fmt.Errorf("completion (res %d) for user_data %#x, which names no operation in flight", c.Res, c.UserData)
					continue
				}
				s := table[c.UserData]
				table[c.UserData] = opSlot{}
				free = append(free, uint32(c.UserData))
				inflight--
				if s.j.b.Complete(s.i, c) {
					retry = append(retry, s)
					continue
				}
				if s.j.left--; s.j.left == 0 {
					s.j.tReap = e.since()
					finished = append(finished, s.j)
				}
			}
		}
		if stray != nil {
			e.fail(r, stray, table, retry, active, finished)
			return
		}
	}
}

// fail ends the loop after a ring failure (cause): it stops taking work, completes every
// item it still holds — in flight, waiting for a retry, not yet prepared, or in jobs still
// queued — with Res = -errno (the cause's errno, else EIO) without asking whether to retry,
// closes the ring (the kernel cancels what it still runs), and only then releases the
// callers, whose Run returns the cause. Completions already in the CQ are delivered first:
// those operations did finish. The kernel may still be finishing an operation failed here
// when Run returns; callers that reuse its buffer at once should treat its bytes as unknown.
func (e *Executor) fail(r *Ring, cause error, table []opSlot, retry []opSlot, active, finished []*job) {
	err := fmt.Errorf("%w: %w", ErrRingFailed, cause)
	errno := unix.EIO
	if en, ok := errors.AsType[unix.Errno](cause); ok {
		errno = en
	}
	e.mu.Lock()
	e.closing, e.failed = true, err
	queued := e.queue
	e.queue = nil
	e.mu.Unlock()

	finish := func(j *job) {
		j.err = err
		if j.left--; j.left == 0 {
			finished = append(finished, j)
		}
	}
	failed := CQE{Res: -int32(errno)}
	// What the kernel already completed is real; the rest is failed.
	var cqes [64]CQE
	for n := r.Reap(cqes[:]); n > 0; n = r.Reap(cqes[:]) {
		for _, c := range cqes[:n] {
			if c.UserData >= uint64(len(table)) || table[c.UserData].j == nil {
				continue
			}
			s := table[c.UserData]
			table[c.UserData] = opSlot{}
			if s.j.b.Complete(s.i, c) {
				retry = append(retry, s)
				continue
			}
			if s.j.left--; s.j.left == 0 {
				finished = append(finished, s.j)
			}
		}
	}
	for i, s := range table {
		if s.j != nil {
			table[i] = opSlot{}
			s.j.b.Complete(s.i, failed)
			finish(s.j)
		}
	}
	for _, s := range retry {
		s.j.b.Complete(s.i, failed)
		finish(s.j)
	}
	for _, j := range queued {
		if j.fn != nil {
			j.err = err
			j.done <- struct{}{}
			continue
		}
		active = append(active, j)
	}
	for _, j := range active {
		if j == nil {
			continue
		}
		for ; j.next < j.n; j.next++ {
			j.b.Complete(j.next, failed)
			finish(j)
		}
	}
	r.Close()
	for _, j := range finished {
		j.done <- struct{}{}
	}
}

// isTransient: the kernel could not take more work right now (CQ backpressure, memory);
// reaping completions and entering again resolves it.
func isTransient(err error) bool {
	return errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.ENOMEM)
}
