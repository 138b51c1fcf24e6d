package engine_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
)

// TestEntriesWalksInChunks: Entries over more slots than one chunk (1024) visits every live
// entry exactly once, in slot order, skips deleted ones, stops when fn says so, and lets fn
// call the engine (the index lock is not held while fn runs).
func TestEntriesWalksInChunks(t *testing.T) {
	c := engine.DefaultConfig()
	c.SlotBytes = 8 << 10
	c.MetaTotalBytes = 4 << 20
	c.Periodic = false
	const n = 2600 // three chunks, the last one partial
	e, err := engine.Format(blockdev.NewMem(int64(c.MetaTotalBytes)+int64(n+10)*c.SlotBytes, 4096), c)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	keys := make([]engine.Key, n)
	pay := make([][]byte, n)
	for i := range keys {
		keys[i] = engine.ObjectKey("entries/model", 0, []byte(fmt.Sprintf("chunk-%05d", i)), "")
		pay[i] = []byte(fmt.Sprint(i))
	}
	for i := 0; i < n; i += 64 {
		if r, err := e.PutMany(keys[i:min(i+64, n)], pay[i:min(i+64, n)]); err != nil || len(r.Stored) != min(64, n-i) {
			t.Fatalf("PutMany at %d: %v", i, err)
		}
	}
	var gone []engine.Key
	for i := 0; i < n; i += 3 {
		gone = append(gone, keys[i])
	}
	e.DeleteMany(gone, false)
	seen := map[string]int{}
	last := int64(-1)
	e.Entries(func(k engine.Key, m engine.EntryMeta) bool {
		seen[k.String()]++
		if int64(m.Slot) <= last {
			t.Fatalf("slot %d after slot %d: not in slot order", m.Slot, last)
		}
		last = int64(m.Slot)
		if !e.ExistsMany([]engine.Key{k}, false)[0] { // fn calls the engine
			t.Fatalf("%s visited but not indexed", k)
		}
		return true
	})
	for i, k := range keys {
		want := 1
		if i%3 == 0 {
			want = 0
		}
		if seen[k.String()] != want {
			t.Fatalf("key %d visited %d times, want %d", i, seen[k.String()], want)
		}
	}
	if len(seen) != n-len(gone) {
		t.Fatalf("%d entries visited, want %d", len(seen), n-len(gone))
	}
	calls := 0
	e.Entries(func(engine.Key, engine.EntryMeta) bool { calls++; return calls < 1500 })
	if calls != 1500 {
		t.Fatalf("fn called %d times after asking to stop at 1500", calls)
	}

	// Identities walks the same entries in the same order, without their keys.
	var want []uint64
	e.Entries(func(k engine.Key, _ engine.EntryMeta) bool { want = append(want, k.Identity()); return true })
	var ids []uint64
	e.Identities(func(id uint64) bool { ids = append(ids, id); return true })
	if !slices.Equal(ids, want) {
		t.Fatalf("Identities gave %d identities, Entries %d keys: not the same in the same order", len(ids), len(want))
	}
	calls = 0
	e.Identities(func(uint64) bool { calls++; return calls < 1500 })
	if calls != 1500 {
		t.Fatalf("Identities called fn %d times after asking to stop at 1500", calls)
	}
}
