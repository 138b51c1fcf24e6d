package engine

import (
	"encoding/binary"
	"sync"

	"golang.org/x/sys/unix"
)

// The async API mirrors LMCache's MP adapter: three pools (store, lookup, load) take tasks
// from unbounded queues, so Submit never blocks; completions go to one queue that
// PopCompleted drains, with a coalescing channel and an optional eventfd as notification.

type task struct {
	id   TaskID
	kind TaskKind
	keys []Key
	bufs [][]byte
}

type taskQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	q      []task
	closed bool
}

func newTaskQueue() *taskQueue {
	q := &taskQueue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *taskQueue) push(t task) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	q.q = append(q.q, t)
	q.cond.Signal()
	return true
}

func (q *taskQueue) pop() (task, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.q) == 0 && !q.closed {
		q.cond.Wait()
	}
	if len(q.q) == 0 {
		return task{}, false
	}
	t := q.q[0]
	q.q[0] = task{}
	q.q = q.q[1:]
	return t, true
}

func (q *taskQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
}

type asyncState struct {
	nextID  TaskID
	idMu    sync.Mutex
	queues  [4]*taskQueue // indexed by TaskKind
	wg      sync.WaitGroup
	doneMu  sync.Mutex
	doneCnd *sync.Cond
	done    []TaskResult
	stopped bool
	efd     int
	efdOnce sync.Once
	efdErr  error
}

func (e *Engine) startAsync() {
	a := &e.async
	a.doneCnd = sync.NewCond(&a.doneMu)
	a.efd = -1
	for kind, n := range map[TaskKind]int{TaskStore: e.cfg.StoreWorkers, TaskLookup: e.cfg.LookupWorkers, TaskLoad: e.cfg.LoadWorkers} {
		q := newTaskQueue()
		a.queues[kind] = q
		for i := 0; i < n; i++ {
			a.wg.Add(1)
			go e.worker(q)
		}
	}
}

func (e *Engine) stopAsync() {
	a := &e.async
	for _, q := range a.queues {
		if q != nil {
			q.close()
		}
	}
	a.wg.Wait()
	a.doneMu.Lock()
	a.stopped = true
	if a.doneCnd != nil {
		a.doneCnd.Broadcast()
	}
	a.doneMu.Unlock()
}

func (e *Engine) worker(q *taskQueue) {
	defer e.async.wg.Done()
	for {
		t, ok := q.pop()
		if !ok {
			return
		}
		r := TaskResult{ID: t.id, Kind: t.kind}
		switch t.kind {
		case TaskStore:
			pr, err := e.putMany(t.keys, t.bufs, PutOptions{})
			r.Results, r.Stored, r.Err = pr.Results, pr.Stored, err
		case TaskLookup:
			r.Results = e.existsMany(t.keys, true)
		case TaskLoad:
			r.Results, r.Err = e.loadManyInto(t.keys, t.bufs, LoadOptions{})
		}
		e.complete(r)
	}
}

// complete publishes r, then signals the channel and the eventfd while still holding doneMu:
// whoever wakes on either (or on WaitTask) can only look once the result is visible, and
// the eventfd counter already includes it when WaitTask returns.
func (e *Engine) complete(r TaskResult) {
	a := &e.async
	a.doneMu.Lock()
	defer a.doneMu.Unlock()
	a.done = append(a.done, r)
	if a.efd >= 0 {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], 1)
		_, _ = unix.Write(a.efd, b[:])
	}
	select {
	case e.notify <- struct{}{}:
	default:
	}
	a.doneCnd.Broadcast()
}

func (e *Engine) submit(kind TaskKind, keys []Key, bufs [][]byte) TaskID {
	a := &e.async
	a.idMu.Lock()
	a.nextID++
	id := a.nextID
	a.idMu.Unlock()
	q := a.queues[kind]
	if q == nil || !q.push(task{id: id, kind: kind, keys: keys, bufs: bufs}) {
		e.complete(TaskResult{ID: id, Kind: kind, Results: make([]bool, len(keys)), Err: ErrClosed})
	}
	return id
}

func (e *Engine) popCompleted(max int) []TaskResult {
	a := &e.async
	a.doneMu.Lock()
	defer a.doneMu.Unlock()
	n := len(a.done)
	if max > 0 && max < n {
		n = max
	}
	if n == 0 {
		return nil
	}
	out := append([]TaskResult(nil), a.done[:n]...)
	a.done = append(a.done[:0], a.done[n:]...)
	return out
}

func (e *Engine) waitTask(id TaskID) (TaskResult, error) {
	a := &e.async
	a.doneMu.Lock()
	defer a.doneMu.Unlock()
	for {
		for i, r := range a.done {
			if r.ID == id {
				a.done = append(a.done[:i], a.done[i+1:]...)
				return r, nil
			}
		}
		if a.stopped || a.doneCnd == nil {
			return TaskResult{}, ErrClosed
		}
		a.doneCnd.Wait()
	}
}

func (e *Engine) eventFD() (int, error) {
	a := &e.async
	a.efdOnce.Do(func() {
		fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		a.doneMu.Lock()
		a.efd, a.efdErr = fd, err
		if err != nil {
			a.efd = -1
		}
		a.doneMu.Unlock()
	})
	return a.efd, a.efdErr
}

func (e *Engine) closeEventFD() {
	a := &e.async
	a.doneMu.Lock()
	if a.efd >= 0 {
		_ = unix.Close(a.efd)
		a.efd = -1
	}
	a.doneMu.Unlock()
}
