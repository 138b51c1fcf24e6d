// Package handoff measures a machine's hand-off latency: how long an idle CPU takes to
// start work that a busy one hands it. A program of several threads (the Go scheduler over
// GOMAXPROCS CPUs: rbctl serve, the io_uring ring's owner thread) gives work to a second
// CPU only once that CPU runs; a program of one thread (valkey, one fio job) never waits
// for one. On the 2-vCPU VM of docs/resp.md an idle vCPU took about a millisecond at the
// median to start such work (14 µs while both vCPUs were kept busy), longer than a 256 KiB
// read from its disk, so the benches print it beside their figures, as they print the load.
package handoff

import (
	"fmt"
	"runtime"
	"sort"
	"sync/atomic"
	"time"

	"github.com/rbctl/rbctl/internal/sys"
)

// Result is a run of Measure.
type Result struct {
	Waits    []time.Duration // sorted; a wait past Limit counts as Limit
	Censored int             // hand-offs not started within Limit
	Limit    time.Duration
	Procs    int // GOMAXPROCS during the run
}

// Measure measures n hand-offs: each time, after idle with nothing to run (long enough for
// an idle CPU to sleep), a goroutine blocked on a channel is made runnable and moved off
// this P's next slot (a second one is readied after it), so that any idle P may take it at
// once, while this goroutine keeps its own CPU busy for up to limit. A wait is from the
// hand-off to the goroutine's first instruction; one not started within limit counts as
// limit and in Censored (it then ran once this goroutine stopped spinning). With
// GOMAXPROCS 1 nothing is measured: no other CPU can take it. A run takes at most
// n × (idle + limit).
func Measure(n int, idle, limit time.Duration) Result {
	r := Result{Limit: limit, Procs: runtime.GOMAXPROCS(0)}
	if r.Procs < 2 || n < 1 || limit <= 0 {
		return r
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
			r.Censored++
		}
		<-done
		r.Waits = append(r.Waits, w)
	}
	sort.Slice(r.Waits, func(i, j int) bool { return r.Waits[i] < r.Waits[j] })
	return r
}

// Quantile is the wait below which a fraction p of the hand-offs started (0 when nothing
// was measured).
func (r Result) Quantile(p float64) time.Duration {
	if len(r.Waits) == 0 {
		return 0
	}
	return r.Waits[min(len(r.Waits)-1, max(0, int(p*float64(len(r.Waits)))))]
}

// Over counts the hand-offs that took d or longer.
func (r Result) Over(d time.Duration) int {
	n := 0
	for _, w := range r.Waits {
		if w >= d {
			n++
		}
	}
	return n
}

// String says what was measured, or why nothing was.
func (r Result) String() string {
	switch {
	case len(r.Waits) == 0 && r.Procs < 2:
		return fmt.Sprintf("hand-off to an idle CPU not measured (GOMAXPROCS %d: no other CPU)", r.Procs)
	case len(r.Waits) == 0:
		return "hand-off to an idle CPU not measured (no hand-offs asked for)"
	}
	return fmt.Sprintf("an idle CPU started work a busy one handed it after p10 %s, p50 %s, p90 %s (%d hand-offs, %d took 1 ms or more, %d not started within %s)",
		us(r.Quantile(0.10)), us(r.Quantile(0.50)), us(r.Quantile(0.90)), len(r.Waits), r.Over(time.Millisecond), r.Censored, r.Limit)
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }

// Probe is the benches' usual run: 100 hand-offs after 2 ms idle each, 3 ms at most each
// (at most 0.5 s in all).
func Probe() Result { return Measure(100, 2*time.Millisecond, 3*time.Millisecond) }

// MachineLine is the benches' line about the machine: "BENCH machine WHEN: load L1 L5 L15;"
// and r.
func MachineLine(bench, when string, r Result) string {
	return fmt.Sprintf("%s machine %s: load %s; %s", bench, when, sys.LoadAvgText(), r)
}
