package handoff

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestMeasure(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	const limit = 3 * time.Millisecond
	r := Measure(5, time.Millisecond, limit)
	if len(r.Waits) != 5 || r.Procs != 2 || r.Limit != limit {
		t.Fatalf("%+v: want 5 waits at GOMAXPROCS 2", r)
	}
	at := 0
	for i, w := range r.Waits {
		if w <= 0 || w > limit || (i > 0 && w < r.Waits[i-1]) {
			t.Fatalf("waits %v: each in (0, %s], sorted", r.Waits, limit)
		}
		if w == limit {
			at++
		}
	}
	if r.Censored > at {
		t.Fatalf("%d censored but only %d waits at the limit", r.Censored, at)
	}
	for _, want := range []string{"p50 ", "5 hand-offs", " not started within 3ms"} {
		if s := r.String(); !strings.Contains(s, want) {
			t.Errorf("%q lacks %q", s, want)
		}
	}

	runtime.GOMAXPROCS(1)
	r = Measure(5, time.Millisecond, limit)
	if r.Waits != nil || r.Censored != 0 || r.Procs != 1 {
		t.Fatalf("GOMAXPROCS 1: %+v, want nothing measured", r)
	}
	if s := r.String(); !strings.Contains(s, "not measured (GOMAXPROCS 1") || r.Quantile(0.5) != 0 {
		t.Fatalf("GOMAXPROCS 1: %q", s)
	}
}

func TestResultFigures(t *testing.T) {
	r := Result{Censored: 1, Limit: 3 * time.Millisecond, Procs: 2}
	for i := 1; i <= 10; i++ {
		r.Waits = append(r.Waits, time.Duration(i)*300*time.Microsecond)
	}
	if r.Quantile(0) != 300*time.Microsecond || r.Quantile(1) != 3*time.Millisecond || r.Over(time.Millisecond) != 7 {
		t.Fatalf("quantiles %s %s, over 1 ms %d", r.Quantile(0), r.Quantile(1), r.Over(time.Millisecond))
	}
	if s := (Result{Procs: 2}).String(); !strings.Contains(s, "not measured (no hand-offs") {
		t.Errorf("no waits at GOMAXPROCS 2: %q", s)
	}
	s := r.String()
	for _, want := range []string{"p10 600 µs", "p50 1800 µs", "p90 3000 µs", "10 hand-offs, 7 took 1 ms or more, 1 not started within 3ms"} {
		if !strings.Contains(s, want) {
			t.Errorf("%q lacks %q", s, want)
		}
	}
}

func TestMachineLine(t *testing.T) {
	r := Result{Waits: []time.Duration{time.Millisecond}, Limit: 3 * time.Millisecond, Procs: 2}
	line := MachineLine("resp-bench", "before the phases", r)
	for _, want := range []string{"resp-bench machine before the phases: load ", "; an idle CPU started work", "1 hand-offs, 1 took 1 ms or more"} {
		if !strings.Contains(line, want) {
			t.Errorf("%q lacks %q", line, want)
		}
	}
	if line := MachineLine("bench-io", "after the runs", Result{Procs: 1}); !strings.Contains(line, "bench-io machine after the runs: load ") || !strings.Contains(line, "not measured (GOMAXPROCS 1") {
		t.Errorf("%q", line)
	}
}
