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
// walkEngine formats a memory device with room for n entries of 8 KiB slots in namespace ns
// (no periodic checkpoints): the cache the walks' tests fill.
func walkEngine(t *testing.T, ns engine.Namespace, n int) (*engine.Engine, *blockdev.Mem, engine.Config) {
	t.Helper()
	c := engine.DefaultConfig()
	c.SlotBytes = 8 << 10
	c.MetaTotalBytes = 4 << 20
	c.Periodic = false
	c.Namespace = ns
	mem := blockdev.NewMem(int64(c.MetaTotalBytes)+int64(n+10)*c.SlotBytes, 4096)
	e, err := engine.Format(mem, c)
	if err != nil {
		t.Fatal(err)
	}
	return e, mem, c
}

func TestEntriesWalksInChunks(t *testing.T) {
	const n = 2600 // three chunks, the last one partial
	e, _, _ := walkEngine(t, engine.DefaultConfig().Namespace, n)
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

// TestKeysOfSpellsEveryKeyOfAnIdentity: KeysOf(id) gives exactly the indexed keys of
// identity id, with legacy keys of one chunk on four workers sharing it, after deletions
// (the table's backward shifts move cells along their probe sequences), and none for an
// identity nobody holds.
func TestKeysOfSpellsEveryKeyOfAnIdentity(t *testing.T) {
	const chunks, workers = 500, 4
	e, _, _ := walkEngine(t, engine.NamespaceLegacy, chunks*workers)
	defer e.Close()
	var keys []engine.Key
	for ch := range chunks {
		for w := range workers {
			keys = append(keys, engine.LegacyKey(fmt.Sprintf("vllm@m@%d@%d@%x@bfloat16", workers, w, 0x1000+ch), uint64(0x1000+ch)))
		}
	}
	for i := 0; i < len(keys); i += 64 {
		end := min(i+64, len(keys))
		pay := make([][]byte, end-i)
		for j := range pay {
			pay[j] = []byte{byte(i + j)}
		}
		if _, err := e.PutMany(keys[i:end], pay); err != nil {
			t.Fatal(err)
		}
	}
	var gone []engine.Key
	for i := 0; i < len(keys); i += 3 {
		gone = append(gone, keys[i])
	}
	e.DeleteMany(gone, false)
	want := map[uint64][]string{}
	e.Entries(func(k engine.Key, _ engine.EntryMeta) bool {
		want[k.Identity()] = append(want[k.Identity()], k.String())
		return true
	})
	if len(want) != chunks {
		t.Fatalf("%d identities indexed, want %d", len(want), chunks)
	}
	for id, w := range want {
		var got []string
		for _, k := range e.KeysOf(id) {
			if k.Identity() != id || k.Namespace() != engine.NamespaceLegacy {
				t.Fatalf("KeysOf(%#x) gave %s of identity %#x, namespace %q", id, k, k.Identity(), k.Namespace())
			}
			got = append(got, k.String())
		}
		slices.Sort(got)
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Fatalf("KeysOf(%#x) = %q, want %q", id, got, w)
		}
	}
	if k := e.KeysOf(0x1000 + chunks); len(k) != 0 {
		t.Fatalf("KeysOf of an identity nobody holds = %v", k)
	}
}

// TestInStoreOrderKeepsStoreOrderAcrossARestart: entries are walked in the order they were
// stored, both ways, although slot order differs (deleted slots are taken again by later
// stores), a key stored again counts from its new store, and a restart keeps the order.
func TestInStoreOrderKeepsStoreOrderAcrossARestart(t *testing.T) {
	const n = 1500 // beyond one chunk of the walk (1024)
	e, mem, c := walkEngine(t, engine.DefaultConfig().Namespace, n)
	key := func(i int) engine.Key {
		return engine.ObjectKey("order/model", 0, []byte(fmt.Sprintf("chunk-%05d", i)), "")
	}
	var stored []string // store order, oldest first
	store := func(i int) {
		if r, err := e.PutMany([]engine.Key{key(i)}, [][]byte{[]byte(fmt.Sprint(i))}); err != nil || len(r.Stored) != 1 {
			t.Fatalf("put %d: %+v %v", i, r, err)
		}
		stored = slices.DeleteFunc(stored, func(s string) bool { return s == key(i).String() })
		stored = append(stored, key(i).String())
	}
	for i := range n - 100 {
		store(i)
	}
	var gone []engine.Key
	for i := 0; i < 300; i += 2 { // frees slots low in the order
		gone = append(gone, key(i))
		stored = slices.DeleteFunc(stored, func(s string) bool { return s == key(i).String() })
	}
	e.DeleteMany(gone, false)
	e.FlushDeallocates()
	for i := n - 100; i < n; i++ { // new keys, some into the freed slots
		store(i)
	}
	for i := 1; i < 200; i += 10 { // stored again: now among the newest
		if del := e.DeleteMany([]engine.Key{key(i)}, false); !del[0] {
			t.Fatalf("delete %d refused", i)
		}
		store(i)
	}
	check := func(e *engine.Engine, when string) {
		t.Helper()
		var bySlot []string
		e.Entries(func(k engine.Key, _ engine.EntryMeta) bool { bySlot = append(bySlot, k.String()); return true })
		if slices.Equal(bySlot, stored) {
			t.Fatalf("%s: slot order is store order: the test does not tell them apart", when)
		}
		for _, newest := range []bool{false, true} {
			var got []string
			e.InStoreOrder(newest, true, func(id uint64, k engine.Key) bool {
				if id != k.Identity() {
					t.Fatalf("%s: identity %#x given with key %s of identity %#x", when, id, k, k.Identity())
				}
				got = append(got, k.String())
				return true
			})
			want := slices.Clone(stored)
			if newest {
				slices.Reverse(want)
			}
			if !slices.Equal(got, want) {
				i := 0
				for i < min(len(got), len(want)) && got[i] == want[i] {
					i++
				}
				t.Fatalf("%s, newest first %v: %d entries walked, want %d; first difference at %d", when, newest, len(got), len(want), i)
			}
		}
		var ids int
		e.InStoreOrder(false, false, func(id uint64, k engine.Key) bool {
			if !k.IsZero() {
				t.Fatalf("%s: a key spelled (%s) without spell", when, k)
			}
			ids++
			return ids < 10
		})
		if ids != 10 {
			t.Fatalf("%s: fn called %d times after asking to stop at 10", when, ids)
		}
	}
	check(e, "before the restart")
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	re, err := engine.Open(mem.Reopen(), c)
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	check(re, "after the restart")
}
