package sys

import (
	"os"
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
