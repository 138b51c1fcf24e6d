package flagsets

import (
	"context"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"
)

// TestHangUpStaysHarmlessAfterShutdownBegins: once the node's context ends (SIGTERM, a
// final checkpoint under way) a SIGHUP must not kill the process with its default action
// (fourth hostile battery: SIGHUP one second after SIGTERM killed the node before its
// final checkpoint, exit 129, 21 acknowledged writes lost). Without the fix this test
// binary dies of the signal.
func TestHangUpStaysHarmlessAfterShutdownBegins(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	HangUp(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), func() string { return "" })
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	cancel()
	time.Sleep(50 * time.Millisecond) // HangUp's goroutine sees the end
	for range 3 {
		if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
