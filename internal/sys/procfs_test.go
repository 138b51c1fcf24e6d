package sys

import (
	"os"
	"strings"
	"testing"
)

func TestCPUTicks(t *testing.T) {
	busy := 0
	for i := 0; i < 20_000_000; i++ { // some CPU time of our own
		busy += i & 3
	}
	if n := CPUTicks(os.Getpid()); n < 0 {
		t.Errorf("our own CPU ticks: %d (%d)", n, busy)
	}
	for _, pid := range []int{0, -1, 1 << 30} {
		if n := CPUTicks(pid); n != -1 {
			t.Errorf("CPUTicks(%d) = %d, want -1", pid, n)
		}
	}
}

// TestParseCPULine: busy is everything but idle and iowait, guest time not added twice;
// a line that is not the machine's cpu line, or short, or not numbers, is refused.
func TestParseCPULine(t *testing.T) {
	busy, total, ok := parseCPULine("cpu  100 5 50 800 20 3 2 10 40 0")
	if !ok || total != 990 || busy != 170 {
		t.Errorf("got busy %d total %d ok %v, want 170 990 true", busy, total, ok)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3", "cpu a b c d e f g h", "cpu 1 2 3 -4 5 6 7 8"} {
		if _, _, ok := parseCPULine(bad); ok {
			t.Errorf("%q accepted", bad)
		}
	}
	if b, tot, ok := MachineTicks(); ok && (b < 0 || b > tot) {
		t.Errorf("this machine: busy %d of %d", b, tot)
	}
}

func TestParseLoadAvg(t *testing.T) {
	if got, ok := parseLoadAvg("0.37 1.40 1.76 2/345 6789\n"); !ok || got != "0.37 1.40 1.76" {
		t.Fatalf("got %q %v", got, ok)
	}
	for _, bad := range []string{"", "0.37 1.40", "a b c", "0.1 -1 0.2"} {
		if _, ok := parseLoadAvg(bad); ok {
			t.Errorf("%q accepted", bad)
		}
	}
	if l, ok := LoadAvg(); ok {
		if _, ok := parseLoadAvg(l); !ok {
			t.Errorf("this machine's %q does not parse again", l)
		}
	}
}

func TestKernelRelease(t *testing.T) {
	r := KernelRelease()
	if r == "" || strings.ContainsAny(r, "\x00\n ") || r[0] < '0' || r[0] > '9' {
		t.Fatalf("kernel release %q", r)
	}
}
