// Package progress draws the one status line rbctl's long commands (bench, simulate,
// cluster-bench, torture) keep on stderr while they run: what is running, a bar, the
// fraction done and an estimate of the time left. It draws only on a terminal; on a pipe or a
// file a Line is nil and every method does nothing, so output that is saved or parsed never
// carries a progress line.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"
)

// Line is a status line on a terminal. The zero of *Line (nil) draws nothing.
type Line struct {
	mu    sync.Mutex
	w     io.Writer
	width func() int
	now   func() time.Time
	start time.Time // of the current task, for its estimate
	f0    float64   // the fraction done at start
	fresh bool      // Restart was called: the next Set starts the estimate
	last  time.Time // of the last draw (draws are throttled)
	drawn bool
}

// throttle is the shortest time between two draws.
const throttle = 200 * time.Millisecond

// New returns a Line drawing on f when f is a terminal, else nil.
func New(f *os.File) *Line {
	if f == nil || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return newLine(f, func() int {
		w, _, err := term.GetSize(int(f.Fd()))
		if err != nil || w <= 0 {
			return 80
		}
		return w
	}, time.Now)
}

func newLine(w io.Writer, width func() int, now func() time.Time) *Line {
	return &Line{w: w, width: width, now: now, start: now()}
}

// Restart starts a new estimate: the time left is reckoned from the next Set on, from the
// pace between that Set's fraction and the later ones' (a task's first report may come when
// it is already under way).
func (l *Line) Restart() {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.fresh = true
	l.mu.Unlock()
}

// Set shows label and frac (done, in [0, 1]) with the time left, reckoned from the time
// elapsed since New or Restart. Calls closer together than 200 ms draw nothing but the last.
func (l *Line) Set(label string, frac float64) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if l.fresh {
		l.start, l.f0, l.fresh = now, frac, false
	}
	if l.drawn && now.Sub(l.last) < throttle && frac < 1 {
		return
	}
	l.last, l.drawn = now, true
	fmt.Fprint(l.w, "\r\x1b[K"+render(label, frac, eta(frac-l.f0, 1-frac, now.Sub(l.start)), l.width()))
}

// eta is the time left when done of the work took elapsed and left remains, at that pace;
// "--" until 1 % is done.
func eta(done, left float64, elapsed time.Duration) string {
	if done < 0.01 {
		return "ETA --"
	}
	return "ETA " + Duration(time.Duration(float64(elapsed)*max(left, 0)/done))
}

// Done clears the line, so that what the command prints next starts on a clean one.
func (l *Line) Done() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.drawn {
		fmt.Fprint(l.w, "\r\x1b[K")
	}
	l.drawn = false
}

// Print writes a note above the line (the line is redrawn by the next Set).
func (l *Line) Print(format string, a ...any) {
	if l == nil {
		return
	}
	l.Done()
	fmt.Fprintf(l.w, format+"\n", a...)
}

// Render is one status line, at most width-1 columns:
//
//	simulate none (util 0.9), run 2 of 4 [=========>          ]  48%  ETA 12s
//
// The estimate assumes the rest goes as fast as what is done; below 1 % it is not given.
func Render(label string, frac float64, elapsed time.Duration, width int) string {
	frac = min(max(frac, 0), 1)
	return render(label, frac, eta(frac, 1-frac, elapsed), width)
}

func render(label string, frac float64, eta string, width int) string {
	frac = min(max(frac, 0), 1)
	tail := fmt.Sprintf(" %3.0f%%  %s", 100*frac, eta)
	room := width - 1 - utf8.RuneCountInString(tail)
	bar := ""
	if n := min(30, room-utf8.RuneCountInString(label)-3); n >= 10 {
		full := int(frac * float64(n))
		arrow := ""
		if full < n {
			arrow = ">"
		}
		bar = " [" + strings.Repeat("=", full) + arrow + strings.Repeat(" ", max(n-full-len(arrow), 0)) + "]"
	}
	if r := []rune(label); len(r) > room-len(bar) {
		label = string(r[:max(room-len(bar)-1, 0)]) + "…"
	}
	return label + bar + tail
}

// Duration prints d the way a person reads a time left: 45s, 3m05s, 2h10m.
func Duration(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
}
