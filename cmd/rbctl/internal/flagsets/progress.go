package flagsets

import (
	"fmt"
	"os"
	"sync"

	"github.com/rbctl/rbctl/bench"
	"github.com/rbctl/rbctl/cmd/rbctl/internal/progress"
	"github.com/rbctl/rbctl/cmd/rbctl/internal/torture"
	"github.com/rbctl/rbctl/p2p/clusterbench"
	"github.com/rbctl/rbctl/reports"
	"github.com/rbctl/rbctl/sim"
	"github.com/rbctl/rbctl/units"
)

// The progress lines of the long commands, drawn by package progress on stderr when it is a
// terminal. Each returns the hook for the library's options and, where the line outlives
// the run, a finish to call before the report is printed.

// BenchProgress draws each policy's warm-up and measured window of a bench, "policy k of n",
// on stderr when stderr is a terminal and quiet is unset; nil otherwise (bench.Options.Progress).
func BenchProgress(quiet bool) func(bench.Progress) {
	l := progress.New(os.Stderr)
	if quiet || l == nil {
		return nil
	}
	var mu sync.Mutex
	phase := ""
	return func(p bench.Progress) {
		mu.Lock()
		defer mu.Unlock()
		if p.Done {
			l.Done()
			phase = ""
			return
		}
		what, frac := "warm-up", p.WarmFrac
		if p.Warm {
			what, frac = "measuring", p.Frac
		}
		label := fmt.Sprintf("policy %d of %d %s: %s", p.Index, p.Of, p.Policy, what)
		if label != phase {
			l.Restart() // each phase has its own pace: estimate it afresh
			phase = label
		}
		l.Set(label, frac)
	}
}

// SimProgress sets o's hooks: before the first run, a note on stderr when the comparison is
// expected to be long (the time and memory it will take), and on a terminal a line per run
// with the estimate for the whole comparison (run i of n, sweep points included).
func SimProgress(o *sim.Options) (finish func()) {
	l := progress.New(os.Stderr)
	o.Plan = func(e sim.Estimate) {
		if e.Time > sim.Long {
			l.Done()
			fmt.Fprintf(os.Stderr, "simulate: %s, estimated %s and %s of memory at most (a rough figure; Ctrl-C stops with a partial result)\n",
				reports.Count(int64(e.Runs), "run", "runs"), progress.Duration(e.Time), units.FormatHuman(e.MemoryBytes))
		}
	}
	if l == nil {
		return func() {}
	}
	o.Step = func(s sim.Step) {
		what := "measuring"
		if s.Warm {
			what = "warm-up"
		}
		l.Set(fmt.Sprintf("run %d of %d %s: %s", s.I+1, s.N, s.Run, what), (float64(s.I)+min(s.Frac, 1))/float64(s.N))
	}
	return l.Done
}

// ClusterProgress draws cluster-bench's runs (mode, run i of n) with the estimate for all.
func ClusterProgress(o *clusterbench.Options) (finish func()) {
	l := progress.New(os.Stderr)
	if l == nil {
		return func() {}
	}
	o.Step = func(m clusterbench.Mode, i, n int, frac float64) {
		l.Set(fmt.Sprintf("run %d of %d, mode %s", i+1, n, m), (float64(i)+frac)/float64(n))
	}
	return l.Done
}

// TortureProgress draws the kills done of the run's, unless verbose lines go to stderr.
func TortureProgress(o *torture.Options, verbose bool) (finish func()) {
	l := progress.New(os.Stderr)
	if l == nil || verbose {
		return func() {}
	}
	o.Step = func(kills, of int) {
		l.Set(fmt.Sprintf("torture: %d of %d kills", kills, of), float64(kills)/float64(max(of, 1)))
	}
	return l.Done
}
