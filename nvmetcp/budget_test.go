package nvmetcp

import (
	"testing"
	"time"
)

// TestBudgetOrderAndCancel: reservations are granted in arrival order (a large one is not
// overtaken by small ones that would fit), a cancelled waiter leaves nothing reserved and
// lets the next one through, and releases return the budget to zero.
func TestBudgetOrderAndCancel(t *testing.T) {
	b := newBudget(100)
	if !b.tryAcquire(60) {
		t.Fatal("60 of 100 refused")
	}
	never := make(chan struct{})
	got := make(chan int64, 4)
	wait := func(n int64, cancel chan struct{}) {
		go func() {
			if b.acquire(n, cancel) {
				got <- n
			} else {
				got <- -n
			}
		}()
		// Queued before the next one: acquire registers under the lock before blocking.
		for b.queuedWaiters() < 1 {
			time.Sleep(time.Millisecond)
		}
	}
	wait(50, never) // does not fit: waits
	if b.tryAcquire(10) {
		t.Fatal("10 bytes overtook a waiting 50")
	}
	cancel := make(chan struct{})
	go func() {
		if b.acquire(30, cancel) {
			got <- 30
		} else {
			got <- -30
		}
	}()
	for b.queuedWaiters() < 2 {
		time.Sleep(time.Millisecond)
	}
	close(cancel)
	if n := <-got; n != -30 {
		t.Fatalf("cancelled waiter: %d", n)
	}
	b.release(60)
	if n := <-got; n != 50 {
		t.Fatalf("first waiter: %d", n)
	}
	if b.inUse() != 50 || b.peak.Load() != 60 {
		t.Fatalf("in use %d, peak %d", b.inUse(), b.peak.Load())
	}
	b.release(50)
	if b.inUse() != 0 || b.queuedWaiters() != 0 {
		t.Fatalf("in use %d, %d waiting", b.inUse(), b.queuedWaiters())
	}
}

func (b *budget) queuedWaiters() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiters)
}
