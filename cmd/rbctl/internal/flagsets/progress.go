package flagsets

import (
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/rbctl/rbctl/bench"
)

// BenchProgress draws each policy's measured window of a bench on stderr when stderr is a
// terminal and quiet is unset; nil otherwise (bench.Options.Progress).
func BenchProgress(quiet bool) func(bench.Progress) {
	if quiet || !term.IsTerminal(int(os.Stderr.Fd())) {
		return nil
	}
	var mu sync.Mutex
	var bar *progressbar.ProgressBar
	return func(p bench.Progress) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case p.Done && bar != nil:
			bar.Finish()
			bar = nil
		case p.Done || !p.Warm:
		case bar == nil:
			bar = progressbar.NewOptions64(int64(p.Window/time.Millisecond), progressbar.OptionSetWriter(os.Stderr),
				progressbar.OptionSetDescription(p.Policy), progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(200*time.Millisecond))
			fallthrough
		default:
			bar.Set64(int64(p.Elapsed / time.Millisecond))
		}
	}
}
