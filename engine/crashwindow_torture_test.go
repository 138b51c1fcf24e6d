package engine_test

// Bounded crash window under sustained writes (LMCache C5: its checkpoint thread waits for
// idleness, so a cache that never goes idle never checkpoints). These tests count
// checkpoints against operations through Stats — never wall-clock time.

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
)

// waitFor polls cond (a count condition, not a timing assertion) with a generous limit.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 2000; i++ { // up to ~20 s on a loaded machine
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestCrashWindowOpsBound: with the periodic thread effectively asleep (1 h interval) and
// the cache never idle (1 h quiet time), continuous writes still produce forced checkpoints
// every ForceAfterOps dirty operations, and a crash after writes stop loses fewer than
// ForceAfterOps operations.
func TestCrashWindowOpsBound(t *testing.T) {
	const n = 32 // ForceAfterOps
	const ops = 40 * n
	cfg := relConfig()
	cfg.Periodic = true
	cfg.CheckpointInterval = time.Hour
	cfg.IdleQuiet = time.Hour
	cfg.ForceAfterOps = n
	cfg.ForceAfter = 0
	mem := blockdev.NewMem(relDevSize(), 0)
	e, err := engine.Format(mem, cfg)
	if err != nil {
		t.Fatal(err)
	}
	base := e.Stats()
	present := map[int]bool{}
	var maxDirty int64
	for i := 0; i < ops; i++ {
		k := i % 16 // put k, later delete it: the cache never fills
		if present[k] {
			if !e.DeleteMany([]engine.Key{relKey(k)}, false)[0] {
				t.Fatalf("delete %d refused", k)
			}
			present[k] = false
		} else {
			putKeys(t, e, k)
			present[k] = true
		}
		maxDirty = max(maxDirty, e.Stats().DirtyOps)
	}
	st := e.Stats()
	forced := st.CheckpointsForced - base.CheckpointsForced
	t.Logf("%d ops, ForceAfterOps %d: %d checkpoints (%d forced), max dirty ops seen %d", ops, n, st.Checkpoints-base.Checkpoints, forced, maxDirty)
	// Continuous writes with no idle time: the C5 guarantee is that checkpoints happen at
	// all, ideally one per n ops; a checkpoint thread starved of CPU lags, so allow a fifth.
	if forced < ops/n/5 {
		t.Fatalf("%d forced checkpoints in %d ops with ForceAfterOps %d: crash window not bounded", forced, ops, n)
	}
	if st.Checkpoints-base.Checkpoints != forced {
		t.Fatalf("%d checkpoints were not forced although the cache was never idle", st.Checkpoints-base.Checkpoints-forced)
	}
	// Writes stop: the window closes below n dirty ops without any idle checkpoint.
	waitFor(t, "dirty ops below ForceAfterOps", func() bool { return e.Stats().DirtyOps < n })
	dirty := e.Stats().DirtyOps
	want := map[int]bool{}
	for k, p := range present {
		if p {
			want[k] = true
		}
	}
	if err := e.CloseNoCheckpoint(); err != nil { // crash
		t.Fatal(err)
	}
	re, err := engine.Open(mem.Reopen(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer re.CloseNoCheckpoint()
	got := audit(t, re, false)
	if bad := got.bad(); bad != "" {
		t.Fatal(bad)
	}
	diff := 0
	for k := 0; k < 16; k++ {
		if want[k] != got.keys[k] {
			diff++
		}
	}
	if int64(diff) > dirty || diff >= n {
		t.Fatalf("crash lost %d key states; %d ops were dirty, bound %d", diff, dirty, n-1)
	}
}

// TestCrashWindowTimeBound: below the op bound, a dirty cache that never goes idle is
// checkpointed once ForceAfter has passed on the engine's clock (a fake clock here).
func TestCrashWindowTimeBound(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	cfg := relConfig()
	cfg.Periodic = true
	cfg.CheckpointInterval = 5 * time.Millisecond // the thread's wake-up cadence
	cfg.IdleQuiet = time.Hour
	cfg.ForceAfterOps = 0
	cfg.ForceAfter = time.Minute
	cfg.Now = func() time.Time { return time.Unix(0, now.Load()) }
	e, err := engine.Format(blockdev.NewMem(relDevSize(), 0), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	base := e.Stats()
	for i := 0; i < 6; i++ {
		putKeys(t, e, i)
		now.Add(int64(5 * time.Second)) // 30 s of engine time in all: under ForceAfter
	}
	// Let the thread wake many times with the clock standing still: no checkpoint yet.
	waitFor(t, "the checkpoint thread to run", func() bool {
		time.Sleep(50 * time.Millisecond)
		return true
	})
	if c := e.Stats().Checkpoints - base.Checkpoints; c != 0 {
		t.Fatalf("%d checkpoints before ForceAfter elapsed on a never-idle cache", c)
	}
	now.Add(int64(2 * time.Minute))
	waitFor(t, "a forced checkpoint after ForceAfter", func() bool {
		return e.Stats().CheckpointsForced > base.CheckpointsForced
	})
	if d := e.Stats().DirtyOps; d != 0 {
		t.Fatalf("%d dirty ops after the forced checkpoint", d)
	}
}
