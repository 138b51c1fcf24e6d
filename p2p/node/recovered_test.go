package node

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/engine"
)

// A node's start says what recovery found: "cache recovered" at info with the entries kept;
// after one entry's slot header is overwritten, a warning with one dropped and which.
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
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		return log.String()
	}
	if got := start(); !strings.Contains(got, `level=INFO msg="cache recovered" device=`+dev+" entries=5 ") {
		t.Fatalf("a clean start does not log its 5 entries:\n%s", got)
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
