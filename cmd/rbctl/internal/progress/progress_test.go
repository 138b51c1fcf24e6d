package progress

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestRender(t *testing.T) {
	for _, c := range []struct {
		label   string
		frac    float64
		elapsed time.Duration
		width   int
		want    string
	}{
		{"bench none, policy 1 of 2", 0.5, 10 * time.Second, 80, "bench none, policy 1 of 2 [===============>              ]  50%  ETA 10s"},
		{"x", 0.25, time.Minute, 80, "x [=======>                      ]  25%  ETA 3m00s"},
		{"x", 0, time.Minute, 80, "x [>                             ]   0%  ETA --"},
		{"x", 1, time.Hour, 80, "x [==============================] 100%  ETA 0s"},
		{"x", 0.5, 3 * time.Hour, 80, "x [===============>              ]  50%  ETA 3h00m"},
	} {
		if got := Render(c.label, c.frac, c.elapsed, c.width); got != c.want {
			t.Errorf("Render(%q, %g, %v, %d)\n got %q\nwant %q", c.label, c.frac, c.elapsed, c.width, got, c.want)
		}
	}
	// A narrow terminal: the bar goes, then the label is cut; the line never wraps.
	long := strings.Repeat("policy ", 20)
	for _, w := range []int{20, 40, 60, 100} {
		got := Render(long, 0.5, time.Second, w)
		if n := utf8.RuneCountInString(got); n > w-1 {
			t.Errorf("width %d: %d runes: %q", w, n, got)
		}
		if !strings.HasSuffix(got, "ETA 1s") {
			t.Errorf("width %d: no estimate: %q", w, got)
		}
	}
}

// A Line that is not on a terminal draws nothing; one that is throttles its draws and clears
// itself when done.
func TestLine(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	if l := New(f); l != nil {
		t.Fatal("a Line on a regular file")
	}
	var nilLine *Line
	nilLine.Set("x", 0.5) // no panic
	nilLine.Done()

	var buf bytes.Buffer
	now := time.Unix(0, 0)
	l := newLine(&buf, func() int { return 80 }, func() time.Time { return now })
	now = now.Add(time.Second)
	l.Set("a", 0.5)
	l.Set("a", 0.6) // within 200 ms: not drawn
	now = now.Add(time.Second)
	l.Set("a", 0.75)
	l.Done()
	out := buf.String()
	if strings.Count(out, "\r\x1b[K") != 3 || strings.Contains(out, " 60%") || !strings.Contains(out, " 75%  ETA 1s") || !strings.HasSuffix(out, "\r\x1b[K") {
		t.Fatalf("drew %q", out)
	}
}

// After Restart the estimate runs from the next report's fraction: a phase first reported
// at 40 % that reaches 60 % one second later has two seconds left, not a fraction of one.
func TestRestartReckonsFromTheNextReport(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	l := newLine(&buf, func() int { return 80 }, func() time.Time { return now })
	l.Restart()
	now = now.Add(5 * time.Second)
	l.Set("b", 0.4)
	now = now.Add(time.Second)
	l.Set("b", 0.6)
	if out := buf.String(); !strings.Contains(out, " 40%  ETA --") || !strings.Contains(out, " 60%  ETA 2s") {
		t.Fatalf("drew %q", out)
	}
}
