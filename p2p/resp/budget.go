package resp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Budget bounds the request bytes all connections of a server hold at once (the kept
// arguments of requests being read or run). A connection that needs more than is free stops
// reading its socket until another releases, so a crowd of large requests is back-pressure
// on the clients' TCP windows, not memory. Per connection the bound is Limits.MaxRequest.
type Budget struct {
	limit int64

	mu         sync.Mutex
	used, peak int64
	wake       chan struct{} // closed and replaced on every release
	waits      int64         // acquisitions that had to wait
	nwait      int           // callers waiting now
	timeouts   int64         // waits given up (ErrBusy)
}

// NewBudget is a budget of limit bytes.
func NewBudget(limit int64) *Budget {
	return &Budget{limit: limit, wake: make(chan struct{})}
}

// ErrBusy: the server's request budget stayed full for longer than a connection that already
// held part of a request may wait (two half-read requests could otherwise wait for each other
// for ever). The request fails with "-ERR ..." and the connection is closed.
var ErrBusy = errors.New("server busy")

// acquire takes n bytes, waiting while they are not free, until ctx ends; a caller that
// already holds bytes waits at most maxWait (0: as long as ctx) and then gets ErrBusy.
func (b *Budget) acquire(ctx context.Context, n int64, maxWait time.Duration) error {
	if n > b.limit {
		return fmt.Errorf("%w: a request needs %d bytes, the server's request budget is %d", ErrBusy, n, b.limit)
	}
	var timer <-chan time.Time
	waited := false
	for {
		b.mu.Lock()
		if b.used+n <= b.limit {
			b.used += n
			b.peak = max(b.peak, b.used)
			if waited {
				b.waits++
			}
			b.mu.Unlock()
			return nil
		}
		wake := b.wake
		b.nwait++
		b.mu.Unlock()
		waited = true
		if timer == nil && maxWait > 0 {
			t := time.NewTimer(maxWait)
			defer t.Stop()
			timer = t.C
		}
		var err error
		select {
		case <-wake:
		case <-ctx.Done():
			err = ctx.Err()
		case <-timer:
			err = fmt.Errorf("%w: the request budget (%d bytes) stayed full for %v", ErrBusy, b.limit, maxWait)
		}
		b.mu.Lock()
		b.nwait--
		if errors.Is(err, ErrBusy) {
			b.timeouts++
		}
		b.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// waiting is how many callers wait for bytes now.
func (b *Budget) waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.nwait
}

// release returns n bytes.
func (b *Budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	if b.nwait > 0 { // a waiter took b.wake and counted itself under b.mu
		close(b.wake)
		b.wake = make(chan struct{})
	}
	b.mu.Unlock()
}

// BudgetStats is a snapshot of a Budget.
type BudgetStats struct {
	Limit, Used, Peak int64
	Waits, Timeouts   int64
}

// Stats returns the budget's figures now.
func (b *Budget) Stats() BudgetStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return BudgetStats{Limit: b.limit, Used: b.used, Peak: b.peak, Waits: b.waits, Timeouts: b.timeouts}
}
