package main

import (
	"fmt"
	"runtime"
	"sort"
	"sync/atomic"
	"time"
)

// The machine's hand-off latency: how long an idle CPU takes to start work that a busy one
// hands it. A server of several threads (rbctl serve: the Go scheduler over GOMAXPROCS CPUs)
// gives a second CPU the GETs whose reads completed together only once that CPU runs; a
// server of one thread (valkey) never waits for one. On the 2-vCPU VM of docs/resp.md an
// idle vCPU took about a millisecond at the median to start such work (14 µs while both
// vCPUs were kept awake), which in LMCache's 8x1 row is longer than the disk's read: the
// row's figures depend on it, so respbench measures it before and after the phases and
// prints it beside them, as the load average is.

// wakeWaits measures n hand-offs: each time, after idle with nothing to run (long enough
// for an idle CPU to sleep), a goroutine blocked on a channel is made runnable and moved
// off this P's next slot (a second one is readied after it), so that any idle P may take
// it at once, while this goroutine keeps its own CPU busy for up to limit. A wait is from
// the hand-off to the goroutine's first instruction; one not started within limit counts
// as limit and in censored (it then ran once this goroutine stopped spinning). nil with
// GOMAXPROCS 1: no other CPU can take it.
func wakeWaits(n int, idle, limit time.Duration) (waits []time.Duration, censored int) {
	if runtime.GOMAXPROCS(0) < 2 || n < 1 {
		return nil, 0
	}
	for range n {
		start := make(chan time.Time)
		kick := make(chan struct{})
		var began atomic.Int64 // the wait in ns, once started
		done := make(chan struct{})
		go func() {
			t := <-start
			began.Store(max(int64(time.Since(t)), 1))
			close(done)
		}()
		go func() { <-kick }()
		time.Sleep(idle)
		t0 := time.Now()
		start <- t0 // the receiver goes to this P's next slot...
		close(kick) // ...and, displaced by the kicker, to its queue, where another P may take it
		for began.Load() == 0 && time.Since(t0) < limit {
		}
		w := time.Duration(began.Load())
		if w == 0 || w > limit {
			w = limit
			censored++
		}
		<-done
		waits = append(waits, w)
	}
	sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
	return waits, censored
}

// wakeLine is respbench's line for the hand-off waits (sorted, as wakeWaits returns them).
func wakeLine(when string, waits []time.Duration, censored int, limit time.Duration) string {
	if len(waits) == 0 {
		return fmt.Sprintf("resp-bench machine %s: hand-off to an idle CPU not measured (GOMAXPROCS %d: no other CPU)", when, runtime.GOMAXPROCS(0))
	}
	q := func(p float64) time.Duration { return waits[min(len(waits)-1, int(p*float64(len(waits))))] }
	over := 0
	for _, w := range waits {
		if w >= time.Millisecond {
			over++
		}
	}
	return fmt.Sprintf("resp-bench machine %s: an idle CPU started work a busy one handed it after p10 %s, p50 %s, p90 %s (%d hand-offs, %d took 1 ms or more, %d not started within %s); a multi-threaded server waits this long for its second CPU in a latency-bound row, a one-thread server (valkey) never does (docs/resp.md)",
		when, us(q(0.10)), us(q(0.50)), us(q(0.90)), len(waits), over, censored, limit)
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }
