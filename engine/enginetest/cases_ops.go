package enginetest

import (
	"bytes"
	"testing"

	"github.com/rbctl/rbctl/engine"
)

// Puts, loads, lookups, locks, deletes and usage on one open engine.
var opCases = []suiteCase{
	{"StoreLoadAndExists", func(t *testing.T, v *env) {
		e := v.format(Config())
		defer e.Close()
		keys := []engine.Key{K(0, ""), K(1, ""), K(2, "")}
		r := mustPut(t, e, []engine.Key{keys[0], keys[2]}, [][]byte{Payload(0, 5000), Payload(2, 70)})
		if !eqBools(r.Results, []bool{true, true}) || len(r.Stored) != 2 {
			t.Fatalf("put = %+v", r)
		}
		if got := e.ExistsMany(keys, false); !eqBools(got, []bool{true, false, true}) {
			t.Fatalf("exists = %v, want [true false true]", got)
		}
		bufs := [][]byte{make([]byte, 5000), make([]byte, 100), make([]byte, 70)}
		ok, err := e.LoadManyInto(keys, bufs)
		if err != nil || !eqBools(ok, []bool{true, false, true}) {
			t.Fatalf("load = %v %v", ok, err)
		}
		if !bytes.Equal(bufs[0], Payload(0, 5000)) || !bytes.Equal(bufs[2], Payload(2, 70)) {
			t.Fatal("loaded bytes differ")
		}
		if !bytes.Equal(bufs[1], make([]byte, 100)) {
			t.Fatal("miss buffer was written")
		}
	}},
	{"DuplicatePutKeepsOriginalPayload", func(t *testing.T, v *env) {
		e := v.format(Config())
		defer e.Close()
		k := K(1, "")
		mustPut(t, e, []engine.Key{k}, [][]byte{Payload(1, 100)})
		r := mustPut(t, e, []engine.Key{k}, [][]byte{Payload(99, 100)})
		if !r.Results[0] || len(r.Stored) != 0 {
			t.Fatalf("second put = %+v, want true and nothing stored", r)
		}
		if b, ok := load(t, e, k, 100); !ok || !bytes.Equal(b, Payload(1, 100)) {
			t.Fatal("original payload not kept")
		}
		r = mustPut(t, e, []engine.Key{K(2, ""), K(2, "")}, [][]byte{Payload(2, 10), Payload(3, 10)})
		if !eqBools(r.Results, []bool{true, true}) || len(r.Stored) != 1 || r.Stored[0] != 0 {
			t.Fatalf("duplicate in batch = %+v, want first stored, both true", r)
		}
	}},
	{"PayloadTooLargeOrEmptyFails", func(t *testing.T, v *env) {
		c := Config()
		e := v.format(c)
		defer e.Close()
		max := int(c.SlotBytes) - c.HeaderBytes
		r := mustPut(t, e, []engine.Key{K(1, ""), K(2, ""), K(3, "")}, [][]byte{make([]byte, max+1), make([]byte, max), nil})
		if !eqBools(r.Results, []bool{false, true, false}) {
			t.Fatalf("results = %v, want [false true false]", r.Results)
		}
	}},
	{"NoFreeSlotFailsOnlyThoseKeys", func(t *testing.T, v *env) {
		c := Config()
		c.CapacityBytes = c.MetaTotalBytes + 3*c.SlotBytes
		e := v.format(c)
		defer e.Close()
		var keys []engine.Key
		var p [][]byte
		for i := 0; i < 5; i++ {
			keys, p = append(keys, K(i, "")), append(p, Payload(i, 10))
		}
		r := mustPut(t, e, keys, p)
		if !eqBools(r.Results, []bool{true, true, true, false, false}) {
			t.Fatalf("results = %v, want [T T T F F]", r.Results)
		}
		if u := e.Usage(); u.SlotsTotal != 3 || u.SlotsUsed != 3 || u.Fraction != 1 {
			t.Fatalf("usage = %+v", u)
		}
	}},
	{"InflightPutSkippedAndCancelledByDelete", func(t *testing.T, v *env) {
		g := &gate{Device: v.dev, entered: make(chan struct{}), release: make(chan struct{})}
		e, err := engine.Format(keepOpen{g}, Config())
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		k := K(7, "")
		g.mu.Lock()
		g.blocked = true
		g.mu.Unlock()
		done := make(chan engine.PutResult)
		go func() {
			r, _ := e.PutMany([]engine.Key{k}, [][]byte{Payload(7, 100)})
			done <- r
		}()
		<-g.entered
		g.mu.Lock()
		g.blocked = false
		g.mu.Unlock()
		if r, _ := e.PutMany([]engine.Key{k}, [][]byte{Payload(8, 100)}); r.Results[0] {
			t.Fatal("put of an in-flight key returned true")
		}
		if u := e.Usage(); u.SlotsInflight != 1 {
			t.Fatalf("inflight = %d, want 1", u.SlotsInflight)
		}
		if got := e.ExistsMany([]engine.Key{k}, false); got[0] {
			t.Fatal("in-flight key reported as existing")
		}
		if got := e.DeleteMany([]engine.Key{k}, false); !got[0] {
			t.Fatal("delete of an in-flight key should return true (cancel)")
		}
		close(g.release)
		r := <-done
		if r.Results[0] || len(r.Stored) != 0 {
			t.Fatalf("cancelled put = %+v, want false", r)
		}
		u := e.Usage()
		if u.SlotsUsed != 0 || u.SlotsInflight != 0 || u.SlotsFree != 1 {
			t.Fatalf("after cancel usage = %+v, want the slot back on the free list", u)
		}
	}},
	{"DeleteFourCases", func(t *testing.T, v *env) {
		e := v.format(Config())
		defer e.Close()
		free, locked, missing := K(1, ""), K(2, ""), K(3, "")
		mustPut(t, e, []engine.Key{free, locked}, [][]byte{Payload(1, 10), Payload(2, 10)})
		e.ExistsMany([]engine.Key{locked}, true)
		for _, c := range []struct {
			name  string
			k     engine.Key
			force bool
			want  bool
		}{
			{"missing key is false", missing, false, false},
			{"unlocked entry is deleted", free, false, true},
			{"locked entry is kept without force", locked, false, false},
			{"locked entry is deleted with force", locked, true, true},
		} {
			if got := e.DeleteMany([]engine.Key{c.k}, c.force); got[0] != c.want {
				t.Errorf("%s: got %v", c.name, got[0])
			}
		}
		if got := e.ExistsMany([]engine.Key{free, locked}, false); got[0] || got[1] {
			t.Fatalf("deleted keys still exist: %v", got)
		}
		// the fourth case (in-flight → cancelled) is InflightPutSkippedAndCancelledByDelete
		ok, _ := e.LoadManyInto([]engine.Key{free, missing}, [][]byte{make([]byte, 10), make([]byte, 10)})
		if ok[0] || ok[1] {
			t.Fatal("load of deleted/missing key succeeded")
		}
	}},
	{"MetadataPrefixStopsAtFirstMissAndLocks", func(t *testing.T, v *env) {
		e := v.format(Config())
		defer e.Close()
		a, b, c, miss := K(1, ""), K(2, ""), K(3, ""), K(4, "")
		mustPut(t, e, []engine.Key{a, b, c}, [][]byte{Payload(1, 10), Payload(2, 20), Payload(3, 30)})
		got := e.MetadataPrefix([]engine.Key{a, b, miss, c}, true)
		if len(got) != 2 || got[0].Size != 10 || got[1].Size != 20 || got[0].Locks != 1 {
			t.Fatalf("prefix = %+v", got)
		}
		if d := e.DeleteMany([]engine.Key{a, c}, false); d[0] || !d[1] {
			t.Fatalf("delete after prefix lock = %v, want [false true]", d)
		}
		if got := e.MetadataPrefix([]engine.Key{miss, a}, false); len(got) != 0 {
			t.Fatalf("prefix starting with a miss = %d entries", len(got))
		}
	}},
	{"UnlockHasFloorZero", func(t *testing.T, v *env) {
		e := v.format(Config())
		defer e.Close()
		k := K(1, "")
		mustPut(t, e, []engine.Key{k}, [][]byte{Payload(1, 10)})
		e.UnlockMany([]engine.Key{k, k, K(99, "")}) // below zero and missing: no-ops
		e.ExistsMany([]engine.Key{k}, true)
		if d := e.DeleteMany([]engine.Key{k}, false); d[0] {
			t.Fatal("locked once after extra unlocks: delete should be refused")
		}
		e.UnlockMany([]engine.Key{k})
		if d := e.DeleteMany([]engine.Key{k}, false); !d[0] {
			t.Fatal("unlocked: delete should succeed")
		}
	}},
	{"UsageCountsSlotsSaltsAndHandles", func(t *testing.T, v *env) {
		c := Config()
		c.Placer = salted{}
		e := v.format(c)
		defer e.Close()
		mustPut(t, e, []engine.Key{K(1, "a"), K(2, "a"), K(3, "b"), K(4, "")}, [][]byte{Payload(1, 1), Payload(2, 1), Payload(3, 1), Payload(4, 1)})
		e.DeleteMany([]engine.Key{K(2, "a")}, false)
		u := e.Usage()
		if u.SlotsUsed != 3 || u.SlotsFree != 1 || u.NextSlot != 4 {
			t.Fatalf("usage = %+v", u)
		}
		if u.BytesBySalt["a"] != c.SlotBytes || u.BytesBySalt["b"] != c.SlotBytes || u.BytesBySalt[""] != c.SlotBytes {
			t.Fatalf("bytes by salt = %v", u.BytesBySalt)
		}
		if u.SlotsByHandle[0] != 2 || u.SlotsByHandle[1] != 1 {
			t.Fatalf("slots by handle = %v", u.SlotsByHandle)
		}
		if m, ok := e.Lookup(K(3, "b")); !ok || m.Handle != 1 {
			t.Fatalf("lookup = %+v %v", m, ok)
		}
	}},
}
