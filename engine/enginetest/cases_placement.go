package enginetest

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/placement"
)

// The async API, checkpoint forcing, deallocation, and what placement handles reach the
// device: slot affinity, slot groups, metadata handles.
var placementCases = []suiteCase{
	{"AsyncStoreLookupLoad", func(t *testing.T, v *env) {
		e := v.format(Config())
		defer e.Close()
		keys := []engine.Key{K(1, ""), K(2, "")}
		id := e.SubmitStore(keys, [][]byte{Payload(1, 50), Payload(2, 60)})
		r, err := e.WaitTask(id)
		if err != nil || r.Kind != engine.TaskStore || !eqBools(r.Results, []bool{true, true}) {
			t.Fatalf("store = %+v %v", r, err)
		}
		lid := e.SubmitLookup([]engine.Key{keys[0], K(3, ""), keys[1]})
		bufs := [][]byte{make([]byte, 50), make([]byte, 60)}
		did := e.SubmitLoad(keys, bufs)
		got := map[engine.TaskID]engine.TaskResult{}
		deadline := time.After(10 * time.Second)
		for len(got) < 2 {
			select {
			case <-e.Notify():
			case <-deadline:
				t.Fatal("no completion notification")
			}
			for _, r := range e.PopCompleted(0) {
				got[r.ID] = r
			}
		}
		if !eqBools(got[lid].Results, []bool{true, false, true}) {
			t.Fatalf("lookup = %+v", got[lid])
		}
		if !eqBools(got[did].Results, []bool{true, true}) || !bytes.Equal(bufs[1], Payload(2, 60)) {
			t.Fatalf("load = %+v", got[did])
		}
		if d := e.DeleteMany(keys[:1], false); d[0] {
			t.Fatal("async lookup should have locked the key")
		}
	}},
	{"ForcedCheckpointUnderSustainedWrites", func(t *testing.T, v *env) {
		c := Config()
		c.Periodic = true
		c.CheckpointInterval = 5 * time.Millisecond
		c.IdleQuiet = time.Hour // never idle: only the forced path can checkpoint
		c.ForceAfterOps = 20
		c.ForceAfter = 0
		e := v.format(c)
		defer e.Close()
		for i := 0; i < 25; i++ {
			mustPut(t, e, []engine.Key{K(i, "")}, [][]byte{Payload(i, 10)})
		}
		deadline := time.Now().Add(10 * time.Second)
		for e.Stats().CheckpointsForced == 0 && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
		s := e.Stats()
		if s.CheckpointsForced == 0 || s.DirtyOps >= 20 {
			t.Fatalf("forced=%d dirty=%d: no checkpoint after %d dirty ops", s.CheckpointsForced, s.DirtyOps, c.ForceAfterOps)
		}
	}},
	{"DeallocateOnDeleteBatches", func(t *testing.T, v *env) {
		c := Config()
		c.DeallocateOnDelete = true
		c.DeallocateBatch = 4
		c.DeallocateAge = 0 // batches only
		e := v.format(c)
		defer e.Close()
		var ks []engine.Key
		var ps [][]byte
		for i := 1; i <= 5; i++ {
			ks, ps = append(ks, K(i, "")), append(ps, Payload(i, 10))
		}
		mustPut(t, e, ks, ps)
		e.DeleteMany(ks[:3], false)
		if u := e.Usage(); u.SlotsPending != 3 {
			t.Fatalf("freed slots should wait for their deallocate: %+v", u)
		}
		if s := e.Stats(); s.DeallocateCalls != 0 {
			t.Fatalf("%d deallocate calls before a batch was queued", s.DeallocateCalls)
		}
		e.DeleteMany(ks[3:4], false)
		// The fourth free completes a batch and wakes the deallocator, which takes all four.
		s := waitStats(e, func(s engine.Stats) bool { return s.DeallocateCalls > 0 })
		if s.DeallocatedSlots+4*s.DeallocateErrors != 4 || s.DeallocateCalls != 1 {
			t.Fatalf("deallocated %d (errors %d) in %d calls, want one batch of 4", s.DeallocatedSlots, s.DeallocateErrors, s.DeallocateCalls)
		}
		if u := e.Usage(); u.SlotsPending != 0 || u.SlotsUsed != 1 {
			t.Fatalf("after batch: used %d pending %d, want 1 and 0", u.SlotsUsed, u.SlotsPending)
		}
	}},
	{"SlotAffinityReusesSameHandleSlot", func(t *testing.T, v *env) {
		c := Config()
		c.Placer = salted{}
		c.SlotAffinity = true
		e := v.format(c)
		defer e.Close()
		mustPut(t, e, []engine.Key{K(1, "a"), K(2, "b"), K(3, "a")}, [][]byte{Payload(1, 1), Payload(2, 1), Payload(3, 1)})
		mb, _ := e.Lookup(K(2, "b"))
		e.DeleteMany([]engine.Key{K(2, "b"), K(3, "a")}, false) // global LIFO top would be K3's slot
		mustPut(t, e, []engine.Key{K(4, "b")}, [][]byte{Payload(4, 1)})
		if m, _ := e.Lookup(K(4, "b")); m.Slot != mb.Slot {
			t.Fatalf("handle-1 write got slot %d, want handle 1's freed slot %d", m.Slot, mb.Slot)
		}
		if s := e.Stats(); s.AffinityHits != 1 {
			t.Fatalf("affinity hits = %d", s.AffinityHits)
		}
	}},
	{"SlotGroupsKeepHandlesApart", func(t *testing.T, v *env) {
		c := Config()
		c.Placer = salted{}
		c.SlotGroupBytes = 4 * c.SlotBytes
		c.CapacityBytes = c.MetaTotalBytes + 8*c.SlotBytes // two groups
		e := v.format(c)
		defer e.Close()
		var keys []engine.Key
		var p [][]byte
		for i := 0; i < 8; i++ {
			salt := "a"
			if i%2 == 1 {
				salt = "b"
			}
			keys, p = append(keys, K(i, salt)), append(p, Payload(i, 1))
		}
		mustPut(t, e, keys, p)
		groupOf := map[uint32]placement.Handle{}
		e.Entries(func(k engine.Key, m engine.EntryMeta) bool {
			g := m.Slot / 4
			if h, ok := groupOf[g]; ok && h != m.Handle {
				t.Errorf("group %d holds handles %d and %d", g, h, m.Handle)
			}
			groupOf[g] = m.Handle
			return true
		})
		if len(groupOf) != 2 {
			t.Fatalf("groups used: %v", groupOf)
		}
	}},
	{"SlotHeaderAndPayloadShareTheHandle", func(t *testing.T, v *env) {
		// H1/H2: header and payload of a slot go out in one write (adjacent slots of one
		// handle may share it) with the handle the Placer chose for that key (salt "b" → 1,
		// others → 0).
		e, rec, c := formatRecorded(t, v)
		defer e.Close()
		rec.reset()
		keys := []engine.Key{K(1, "a"), K(2, "b"), K(3, "b"), K(4, "a")}
		mustPut(t, e, keys, [][]byte{Payload(1, 5000), Payload(2, 10), Payload(3, 60000), Payload(4, 1)})
		ws := rec.writes()
		for i, k := range keys {
			m, ok := e.Lookup(k)
			if !ok {
				t.Fatalf("%v not stored", k)
			}
			want := placement.Handle(0)
			if k.CacheSalt() == "b" {
				want = 1
			}
			if m.Handle != want {
				t.Fatalf("%v: entry handle %d, want %d", k, m.Handle, want)
			}
			end := m.Offset + int64(c.HeaderBytes+m.Size)
			var cover []recWrite
			for _, w := range ws {
				if w.off < end && w.off+int64(w.n) > m.Offset {
					cover = append(cover, w)
				}
			}
			if len(cover) != 1 || cover[0].off > m.Offset || cover[0].off+int64(cover[0].n) < end || cover[0].handle != want {
				t.Fatalf("put %d (slot [%d, %d), handle %d): the writes touching it are %+v, want one covering it with handle %d",
					i, m.Offset, end, want, cover, want)
			}
		}
	}},
	{"CheckpointUsesMetadataHandle", func(t *testing.T, v *env) {
		e, rec, _ := formatRecorded(t, v)
		defer e.Close()
		mustPut(t, e, []engine.Key{K(1, "b")}, [][]byte{Payload(1, 10)})
		rec.reset()
		if err := e.CheckpointNow(); err != nil {
			t.Fatal(err)
		}
		hs := rec.handles()
		if len(hs) != 2 || hs[0] != 7 || hs[1] != 7 {
			t.Fatalf("checkpoint write handles = %v, want [7 7]", hs)
		}
	}},
	{"EntriesAndObjMetaRoundTrip", func(t *testing.T, v *env) {
		e := v.format(Config())
		meta := &engine.ObjMeta{Shape: []int{2, 32, 256, 1024}, Dtype: "torch.complex64", Fmt: "KV_2LTD", CachedPositions: []int{0, 1}}
		if _, err := e.PutManyMeta([]engine.Key{K(1, "s")}, [][]byte{Payload(1, 10)}, []*engine.ObjMeta{meta}); err != nil {
			t.Fatal(err)
		}
		e.Close()
		e = v.open(Config())
		defer e.Close()
		n := 0
		e.Entries(func(k engine.Key, m engine.EntryMeta) bool {
			n++
			if k.String() != K(1, "s").String() || m.Dtype != "torch.complex64" || len(m.Shape) != 4 || m.Fmt != "KV_2LTD" || len(m.CachedPositions) != 2 {
				t.Errorf("entry %q %+v", k, m)
			}
			return true
		})
		if n != 1 {
			t.Fatalf("%d entries", n)
		}
	}},
}

// formatRecorded formats the suite's config with the salted Placer on a recorder over
// v's device.
func formatRecorded(t *testing.T, v *env) (*engine.Engine, *recorder, engine.Config) {
	rec := &recorder{Device: v.dev}
	c := Config()
	c.Placer = salted{}
	e, err := engine.Format(keepOpen{rec}, c)
	if err != nil {
		t.Fatal(err)
	}
	return e, rec, c
}

type recorder struct {
	blockdev.Device
	mu  sync.Mutex
	hs  []placement.Handle
	ops []recWrite
}

// recWrite is one recorded write: where, how long, with which handle.
type recWrite struct {
	off    int64
	n      int
	handle placement.Handle
}

func (r *recorder) RegisterBuffers(bufs [][]byte) error { return forwardRegister(r.Device, bufs) }
func (r *recorder) VectoredWrites() bool                { return blockdev.WritesTail(r.Device) }

func (r *recorder) Submit(ops []blockdev.Op) error {
	r.mu.Lock()
	for _, op := range ops {
		if op.Write {
			r.hs = append(r.hs, op.Handle)
			r.ops = append(r.ops, recWrite{op.Off, op.Len(), op.Handle})
		}
	}
	r.mu.Unlock()
	return r.Device.Submit(ops)
}

func (r *recorder) reset() { r.mu.Lock(); r.hs, r.ops = nil, nil; r.mu.Unlock() }

// writes returns the recorded writes.
func (r *recorder) writes() []recWrite {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recWrite(nil), r.ops...)
}
func (r *recorder) handles() []placement.Handle {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]placement.Handle(nil), r.hs...)
}
