package node

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/blockdev/faultdev"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/p2p/client"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestCheckpointFailuresAreLoggedAndUnhealthy: a node whose metadata writes fail logs the
// failure at once and at every retry, reports healthy 0 in Stats (and so /metrics and INFO),
// and says so again when a checkpoint succeeds.
func TestCheckpointFailuresAreLoggedAndUnhealthy(t *testing.T) {
	cfg := cacheConfig()
	cfg.Periodic, cfg.CheckpointInterval, cfg.IdleQuiet = true, 20*time.Millisecond, time.Millisecond
	fd := faultdev.New(blockdev.NewMem(32<<20, 512), 1)
	e, err := engine.Format(fd, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.CloseNoCheckpoint() })
	var logs syncBuf
	o := fastOptions("a", nil)
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	n := startNode(t, e, o)
	c := dial(t, n)
	fd.Add(faultdev.Rule{Name: "meta", Class: faultdev.ClassWrite, OffHi: cfg.MetaTotalBytes, Fault: faultdev.Fault{Kind: faultdev.FaultEIO}})
	put(t, c, 1, 1000)
	eventually(t, "two failed checkpoint attempts logged", func() bool { return strings.Count(logs.String(), "checkpoint failed") >= 2 })
	if s := n.Stats().Counters; s["healthy"] != 0 || s["checkpoint_errors"] < 2 {
		t.Fatalf("while failing: healthy %d, checkpoint_errors %d", s["healthy"], s["checkpoint_errors"])
	}
	if !strings.Contains(logs.String(), "attempt=2") {
		t.Fatalf("retries not numbered:\n%s", logs.String())
	}
	fd.Clear()
	eventually(t, "recovery logged", func() bool { return strings.Contains(logs.String(), "checkpoint written again") })
	if s := n.Stats().Counters; s["healthy"] != 1 {
		t.Fatalf("after a good checkpoint: healthy %d", s["healthy"])
	}
}

// TestLongKeysOfOneTenantDoNotTakeAnothersRoom is issue 35's gRPC case: tenant A's puts with
// 60,000-byte model names are refused once they would not fit the checkpoint (an error: a
// gRPC put keeps the strict promise), tenant B then fills every slot, and a checkpoint holds
// every acknowledged key.
func TestLongKeysOfOneTenantDoNotTakeAnothersRoom(t *testing.T) {
	e := newEngine(t, nil)
	n := startNode(t, e, fastOptions("a", nil))
	c := dial(t, n)
	ctx := context.Background()
	refused := 0
	for i := 0; i < 12; i++ {
		k := client.Key(strings.Repeat(string(rune('a'+i)), 60000), 0, hashOf(i), "tenant-a")
		_, err := c.Put(ctx, k, payloadN(i, 100))
		if err != nil {
			if !strings.Contains(err.Error(), engine.ErrIndexFull.Error()) {
				t.Fatalf("long key %d: %v", i, err)
			}
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("every 60,000-byte model name was acknowledged into a 1 MiB metadata region")
	}
	stored := 0
	for i := 100; ; i++ {
		out, err := c.Put(ctx, client.Key("m/odel", 0, hashOf(i), "tenant-b"), payloadN(i, 100))
		if err != nil {
			t.Fatalf("tenant B's put %d: %v", i, err)
		}
		if !out.Stored {
			break // full: every slot is used
		}
		stored++
	}
	if u := e.Usage(); u.SlotsUsed != u.SlotsTotal {
		t.Fatalf("tenant B stopped at %d of %d slots", u.SlotsUsed, u.SlotsTotal)
	}
	if err := e.CheckpointNow(); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	if s := n.Stats().Counters; s["index_room_refused"] != int64(refused) {
		t.Fatalf("index_room_refused %d, refused %d", s["index_room_refused"], refused)
	}
	t.Logf("tenant A: %d of 12 long keys refused; tenant B stored %d", refused, stored)
}
