package nvmetcp

import (
	"sync"
	"sync/atomic"
)

// budget bounds the write data a target holds for hosts at once. Every R2T reserves its
// length before it is sent and the reservation lasts until the command has run, so the
// bytes a host can make the target buffer — whatever its queue depth, connections and
// controllers — never exceed the limit. Waiters are served in arrival order across all
// queues: a large write is not starved by a stream of small ones.
type budget struct {
	limit int64

	mu      sync.Mutex
	used    int64
	waiters []*budgetWaiter

	peak atomic.Int64
}

type budgetWaiter struct {
	n       int64
	granted chan struct{} // closed when the reservation is made
}

func newBudget(limit int64) *budget { return &budget{limit: limit} }

// tryAcquire reserves n bytes if nobody waits and they fit.
func (b *budget) tryAcquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiters) > 0 || b.used+n > b.limit {
		return false
	}
	b.reserveLocked(n)
	return true
}

func (b *budget) reserveLocked(n int64) {
	b.used += n
	if b.used > b.peak.Load() {
		b.peak.Store(b.used)
	}
}

// acquire reserves n bytes (n <= limit), waiting its turn; it gives up and returns false
// when cancel is closed first, with nothing reserved.
func (b *budget) acquire(n int64, cancel <-chan struct{}) bool {
	if b.tryAcquire(n) {
		return true
	}
	w := &budgetWaiter{n: n, granted: make(chan struct{})}
	b.mu.Lock()
	b.waiters = append(b.waiters, w)
	b.grantLocked() // the budget may have been released since tryAcquire
	b.mu.Unlock()
	select {
	case <-w.granted:
		return true
	case <-cancel:
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.granted: // granted while we gave up: hand it back
		b.used -= n
		b.grantLocked()
		return false
	default:
	}
	for i, x := range b.waiters {
		if x == w {
			b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
			break
		}
	}
	b.grantLocked() // the head may have changed
	return false
}

// release returns n reserved bytes and serves the waiters that now fit, in order.
func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.grantLocked()
	b.mu.Unlock()
}

func (b *budget) grantLocked() {
	for len(b.waiters) > 0 && b.used+b.waiters[0].n <= b.limit {
		w := b.waiters[0]
		b.waiters[0] = nil
		b.waiters = b.waiters[1:]
		b.reserveLocked(w.n)
		close(w.granted)
	}
}

// inUse is the bytes reserved now.
func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
