package node

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/engine"
)

// A node's start says what recovery found: "cache recovered" at info with the entries kept,
// and "eviction order seeded" once its LRU order holds them; after one entry's slot header
// is overwritten, a warning with one dropped and which.
func TestStartLogsWhatRecoveryFound(t *testing.T) {
	dev := filepath.Join(t.TempDir(), "c.img")
	formatDevs(t, 16<<20, 64<<10, dev)
	e, err := cache.Open(dev, cache.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	keys := []engine.Key{keyN(0), keyN(1), keyN(2), keyN(3), keyN(4)}
	vals := [][]byte{payloadN(0, 1000), payloadN(1, 1000), payloadN(2, 1000), payloadN(3, 1000), payloadN(4, 1000)}
	if r, err := e.PutMany(keys, vals); err != nil || len(r.Stored) != 5 {
		t.Fatalf("put: %+v, %v", r, err)
	}
	m, _ := e.Lookup(keyN(2))
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	start := func() string {
		var log syncBuf
		cfg := startConfig(dev)
		cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
		n, err := Start(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		n.WaitSeeded()
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		return log.String()
	}
	if got := start(); !strings.Contains(got, `level=INFO msg="cache recovered" device=`+dev+" entries=5 ") ||
		!strings.Contains(got, `level=INFO msg="recovering cache" device=`+dev+" io_engine=") ||
		!strings.Contains(got, `level=INFO msg="eviction order seeded" eviction=lru keys=5 took=`) {
		t.Fatalf("a clean start does not log its recovery, its 5 entries and the seeding of its LRU order with them:\n%s", got)
	}

	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 512), m.Offset); err != nil { // key 2's slot header
		t.Fatal(err)
	}
	f.Close()
	got := start()
	for _, want := range []string{"level=WARN", "entries=4 ", "dropped=1 ", "first_dropped=" + keyN(2).String()} {
		if !strings.Contains(got, want) {
			t.Fatalf("after a slot header was overwritten, no %q in:\n%s", want, got)
		}
	}
}

// A long verification is logged after 5 s, then every 10 s, and not once it is done.
func TestRecoveryProgressIsThrottled(t *testing.T) {
	var log syncBuf
	clock := time.Unix(1000, 0)
	p := recoveryProgress(slog.New(slog.NewTextHandler(&log, nil)), "/dev/x", func() time.Time { return clock })
	for _, step := range []struct {
		at   time.Duration // since the start
		done int
	}{{1 * time.Second, 10}, {5 * time.Second, 20}, {7 * time.Second, 30}, {14 * time.Second, 40}, {15 * time.Second, 50}, {30 * time.Second, 100}} {
		clock = time.Unix(1000, 0).Add(step.at)
		p(step.done, 100)
	}
	got := log.String()
	if n := strings.Count(got, `msg="recovering cache: verifying slot headers"`); n != 2 ||
		!strings.Contains(got, "verified=20 of=100") || !strings.Contains(got, "verified=50 of=100") {
		t.Fatalf("want the reports at 5 s and 15 s only:\n%s", got)
	}
}

// TestLogOpenedFallbacks: each note of a fallback the opener took is one log line naming
// the device and the engine that runs; an open without fallbacks logs nothing here.
func TestLogOpenedFallbacks(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	logOpened(log, &devices.Opened{Path: "c.img", IOPath: "aio"})
	if buf.Len() != 0 {
		t.Fatalf("an open without fallbacks logged:\n%s", buf.String())
	}
	logOpened(log, &devices.Opened{Path: "c.img", IOPath: "aio", Notes: []string{"the filesystem refuses O_DIRECT: opened buffered"}})
	if got := buf.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, `msg="device opened with a fallback" device=c.img io_engine=aio note="the filesystem refuses O_DIRECT: opened buffered"`) {
		t.Errorf("a buffered fallback logged:\n%s", got)
	}
}
