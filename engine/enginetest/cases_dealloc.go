package enginetest

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/blockdev/faultdev"
	"github.com/rbctl/rbctl/engine"
)

// The background deallocator (DeallocateOnDelete): ordering against reuse, a full cache
// discarding before it rewrites, coalescing, and draining on checkpoint and close.
var deallocCases = []suiteCase{
	{"DeallocateReuseWaitsForIssuedBatch", func(t *testing.T, v *env) {
		d := &deallocGate{Device: v.dev, entered: make(chan struct{}, 1), release: make(chan struct{})}
		d.block = true
		c := deallocConfig(v, 4)
		c.DeallocateBatch = 1 // every freed slot wakes the deallocator
		e := formatOn(t, d, c)
		defer e.Close()
		var releaseOnce sync.Once
		release := func() { releaseOnce.Do(func() { close(d.release) }) }
		defer release() // before Close, so a failing run does not hang in the discard
		putKeys(t, e, 0, 4)
		e.DeleteMany([]engine.Key{K(0, ""), K(1, "")}, false)
		<-d.entered // the deallocator holds the freed slots in an issued discard
		done := make(chan engine.PutResult, 1)
		go func() {
			r, _ := e.PutMany([]engine.Key{K(10, ""), K(11, "")}, [][]byte{Payload(10, 3000), Payload(11, 3000)})
			done <- r
		}()
		select {
		case r := <-done:
			t.Fatalf("put reused a slot whose discard is still running: %v", r.Results)
		case <-time.After(50 * time.Millisecond):
		}
		release()
		r := <-done
		if !eqBools(r.Results, []bool{true, true}) {
			t.Fatalf("put after the discard ended = %v", r.Results)
		}
		e.FlushDeallocates()
		checkLoads(t, e, []int{2, 3, 10, 11})
		if s := e.Stats(); s.DeallocatedSlots != 2 {
			t.Fatalf("deallocated %d slots, want both freed ones before their reuse", s.DeallocatedSlots)
		}
	}},
	{"DeallocateDelayedNeverHitsNewData", func(t *testing.T, v *env) {
		// Deallocates take 2 ms while three writers keep freeing and refilling a cache of
		// 12 slots: every load must return the bytes of the put that stored the key.
		fd := faultdev.New(keepOpen{v.dev}, 1, faultdev.Rule{Name: "slow-discard", Class: faultdev.ClassDeallocate,
			Fault: faultdev.Fault{Kind: faultdev.FaultLatency, Delay: 2 * time.Millisecond}})
		c := deallocConfig(v, 12)
		c.DeallocateBatch = 2
		e, err := engine.Format(fd, c)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		var wg sync.WaitGroup
		errs := make(chan error, 3)
		for w := 0; w < 3; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for round := 0; round < 40; round++ {
					ks, ps := roundKeys(w, round)
					res, err := e.PutMany(ks, ps)
					if err != nil {
						errs <- err
						return
					}
					for i, ok := range res.Results {
						if !ok {
							continue
						}
						buf := make([]byte, len(ps[i]))
						got, _ := e.LoadManyInto(ks[i:i+1], [][]byte{buf})
						if !got[0] || !bytes.Equal(buf, ps[i]) {
							errs <- fmt.Errorf("writer %d round %d key %d: stored, then load = %v (bytes equal %v)", w, round, i, got[0], bytes.Equal(buf, ps[i]))
							return
						}
					}
					e.DeleteMany(ks, false)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		// The last round of each writer is stored again and must survive the drain.
		for w := 0; w < 3; w++ {
			ks, ps := roundKeys(w, 1000)
			mustPut(t, e, ks, ps)
		}
		e.FlushDeallocates()
		for w := 0; w < 3; w++ {
			ks, ps := roundKeys(w, 1000)
			for i := range ks {
				if got, ok := load(t, e, ks[i], len(ps[i])); !ok || !bytes.Equal(got, ps[i]) {
					t.Fatalf("writer %d key %d lost after the drain", w, i)
				}
			}
		}
		// Free writer 0's keys and drain: that must issue a discard even if the run had not.
		ks0, _ := roundKeys(0, 1000)
		e.DeleteMany(ks0, false)
		e.FlushDeallocates()
		s := e.Stats()
		if s.DeallocateCalls == 0 || s.DeallocateErrors != 0 || fd.Counts().ByRule["slow-discard"] == 0 {
			t.Fatalf("calls %d errors %d delayed %d: the discards did not run", s.DeallocateCalls, s.DeallocateErrors, fd.Counts().ByRule["slow-discard"])
		}
		for w := 1; w < 3; w++ {
			ks, ps := roundKeys(w, 1000)
			for i := range ks {
				if got, ok := load(t, e, ks[i], len(ps[i])); !ok || !bytes.Equal(got, ps[i]) {
					t.Fatalf("writer %d key %d lost after writer 0's keys were discarded", w, i)
				}
			}
		}
	}},
	{"DeallocateBeforeReuseWhenFull", func(t *testing.T, v *env) {
		// A full cache whose freed slots are still queued (no batch reached) discards them
		// before a put rewrites them: one call, both slots, then the puts succeed.
		d := &deallocGate{Device: v.dev}
		c := deallocConfig(v, 4)
		c.DeallocateBatch = 100 // never reached: the freed slots stay queued
		c.DeallocateAge = 0
		e := formatOn(t, d, c)
		defer e.Close()
		putKeys(t, e, 0, 4)
		var freed []int32
		for _, i := range []int{1, 2} {
			m, ok := e.Lookup(K(i, ""))
			if !ok {
				t.Fatalf("key %d not indexed", i)
			}
			freed = append(freed, int32(m.Slot))
		}
		e.DeleteMany([]engine.Key{K(1, ""), K(2, "")}, false)
		if u := e.Usage(); u.SlotsPending != 2 || len(d.calls()) != 0 {
			t.Fatalf("pending %d, device calls %d, want 2 and 0", u.SlotsPending, len(d.calls()))
		}
		putKeys(t, e, 20, 2) // the cache is full: both puts wait for the queued discards
		s := e.Stats()
		if s.DeallocatedSlots != 2 || s.DeallocateCalls != 1 {
			t.Fatalf("deallocated %d slots in %d calls, want 2 in 1", s.DeallocatedSlots, s.DeallocateCalls)
		}
		slices.Sort(freed)
		l, sb := e.Layout(), c.SlotBytes
		want := []blockdev.Range{{Off: l.SlotOffset(int64(freed[0])), Len: sb}, {Off: l.SlotOffset(int64(freed[1])), Len: sb}}
		if freed[1] == freed[0]+1 {
			want = []blockdev.Range{{Off: want[0].Off, Len: 2 * sb}}
		}
		if got := d.calls(); len(got) != 1 || !slices.Equal(got[0], want) {
			t.Fatalf("device saw %v, want one call %v", got, want)
		}
		if u := e.Usage(); u.SlotsPending != 0 || u.SlotsUsed != 4 {
			t.Fatalf("usage after reuse: %+v", u)
		}
		checkLoads(t, e, []int{0, 3, 20, 21})
	}},
	{"DeallocateCoalescesAdjacentSlots", func(t *testing.T, v *env) {
		d := &deallocGate{Device: v.dev}
		c := deallocConfig(v, 16)
		c.DeallocateBatch = 8 // 8 queued wake the deallocator; it takes them all
		e := formatOn(t, d, c)
		defer e.Close()
		putKeys(t, e, 0, 16)
		bySlot := map[uint32]engine.Key{}
		for i := 0; i < 16; i++ {
			m, ok := e.Lookup(K(i, ""))
			if !ok {
				t.Fatalf("key %d not indexed", i)
			}
			bySlot[m.Slot] = K(i, "")
		}
		var del []engine.Key
		// Eight freed out of order: runs 0-3 and 8-9, singles 12 and 14.
		for _, s := range []uint32{14, 0, 9, 2, 12, 1, 8, 3} {
			del = append(del, bySlot[s])
		}
		e.DeleteMany(del[:7], false)
		if len(d.calls()) != 0 {
			t.Fatal("a discard was issued before a batch was queued")
		}
		e.DeleteMany(del[7:], false) // 8 queued: all go in one call
		s := waitStats(e, func(s engine.Stats) bool { return s.DeallocateCalls > 0 })
		if s.DeallocateCalls != 1 || s.DeallocateRanges != 4 || s.DeallocatedSlots != 8 {
			t.Fatalf("calls %d ranges %d slots %d, want 1, 4, 8", s.DeallocateCalls, s.DeallocateRanges, s.DeallocatedSlots)
		}
		if u := e.Usage(); u.SlotsPending != 0 {
			t.Fatalf("pending %d after the batch", u.SlotsPending)
		}
		l, sb := e.Layout(), c.SlotBytes
		want := []blockdev.Range{{Off: l.SlotOffset(0), Len: 4 * sb}, {Off: l.SlotOffset(8), Len: 2 * sb},
			{Off: l.SlotOffset(12), Len: sb}, {Off: l.SlotOffset(14), Len: sb}}
		if got := d.calls(); len(got) != 1 || !slices.Equal(got[0], want) {
			t.Fatalf("device saw %v, want one call %v", got, want)
		}
	}},
	{"DeallocateAgedSlotsWithoutBatch", func(t *testing.T, v *env) {
		d := &deallocGate{Device: v.dev}
		c := deallocConfig(v, 8)
		c.DeallocateBatch = 100 // never reached
		c.DeallocateAge = 2 * time.Millisecond
		e := formatOn(t, d, c)
		defer e.Close()
		putKeys(t, e, 0, 4)
		e.DeleteMany([]engine.Key{K(1, "")}, false)
		s := waitStats(e, func(s engine.Stats) bool { return s.DeallocateCalls > 0 })
		if s.DeallocatedSlots != 1 {
			t.Fatalf("deallocated %d, want the aged slot deallocated", s.DeallocatedSlots)
		}
		if u := e.Usage(); u.SlotsPending != 0 {
			t.Fatalf("pending %d after the age tick", u.SlotsPending)
		}
		checkLoads(t, e, []int{0, 2, 3})
	}},
	{"DeallocateInlineIssuesOnTheDeletePath", func(t *testing.T, v *env) {
		// Inline: the delete that queues the batch's last slot has issued it when it
		// returns; no age tick issues a lone slot.
		d := &deallocGate{Device: v.dev}
		c := deallocConfig(v, 8)
		c.DeallocateBatch = 4
		c.DeallocateInline = true
		c.DeallocateAge = time.Millisecond // ignored inline
		e := formatOn(t, d, c)
		defer e.Close()
		putKeys(t, e, 0, 6)
		e.DeleteMany([]engine.Key{K(0, ""), K(1, ""), K(2, "")}, false)
		time.Sleep(20 * time.Millisecond)
		if n := len(d.calls()); n != 0 {
			t.Fatalf("%d deallocate calls before a batch was queued (an age tick ran?)", n)
		}
		e.DeleteMany([]engine.Key{K(3, "")}, false)
		if s := e.Stats(); len(d.calls()) != 1 || s.DeallocatedSlots != 4 || s.DeallocateCalls != 1 {
			t.Fatalf("after the batch's last delete returned: device calls %d, deallocated %d in %d calls; want 1, 4, 1",
				len(d.calls()), s.DeallocatedSlots, s.DeallocateCalls)
		}
		if u := e.Usage(); u.SlotsPending != 0 {
			t.Fatalf("pending %d", u.SlotsPending)
		}
		checkLoads(t, e, []int{4, 5})
	}},
	{"DeallocateDrainedByCheckpointAndClose", func(t *testing.T, v *env) {
		d := &deallocGate{Device: v.dev}
		c := deallocConfig(v, 8)
		c.DeallocateBatch = 100
		e := formatOn(t, d, c)
		putKeys(t, e, 0, 6)
		e.DeleteMany([]engine.Key{K(0, ""), K(1, "")}, false)
		if err := e.CheckpointNow(); err != nil {
			t.Fatal(err)
		}
		if u := e.Usage(); u.SlotsPending != 0 || len(d.calls()) != 1 {
			t.Fatalf("after a checkpoint: pending %d, device calls %d, want 0 and 1", u.SlotsPending, len(d.calls()))
		}
		e.DeleteMany([]engine.Key{K(4, "")}, false)
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		calls := d.calls()
		if len(calls) != 2 || len(calls[1]) != 1 || calls[1][0].Len != c.SlotBytes {
			t.Fatalf("close did not drain the queued slot: %v", calls)
		}
		e = v.open(c)
		defer e.Close()
		checkLoads(t, e, []int{2, 3, 5})
	}},
}

// deallocConfig is the suite config on DeallocateOnDelete with room for exactly slots slots.
func deallocConfig(v *env, slots int64) engine.Config {
	c := Config()
	c.DeallocateOnDelete = true
	c.DeallocateAge = 0 // batches only, unless a case sets it
	c.CapacityBytes = c.MetaTotalBytes + slots*c.SlotBytes
	if c.CapacityBytes > v.dev.Info().Size {
		v.t.Fatalf("device too small for %d slots", slots)
	}
	return c
}

func formatOn(t *testing.T, d blockdev.Device, c engine.Config) *engine.Engine {
	t.Helper()
	e, err := engine.Format(d, c)
	if err != nil {
		t.Fatalf("Format: %v", err)
	}
	return e
}

// putKeys stores keys first..first+n-1 with 3000-byte payloads, all of which must succeed.
func putKeys(t *testing.T, e *engine.Engine, first, n int) {
	t.Helper()
	var ks []engine.Key
	var ps [][]byte
	for i := first; i < first+n; i++ {
		ks = append(ks, K(i, ""))
		ps = append(ps, Payload(i, 3000))
	}
	mustPut(t, e, ks, ps)
}

// checkLoads loads each key of putKeys and compares its bytes.
func checkLoads(t *testing.T, e *engine.Engine, ids []int) {
	t.Helper()
	for _, i := range ids {
		if got, ok := load(t, e, K(i, ""), 3000); !ok || !bytes.Equal(got, Payload(i, 3000)) {
			t.Fatalf("key %d: loaded %v, bytes equal %v", i, ok, ok && bytes.Equal(got, Payload(i, 3000)))
		}
	}
}

// roundKeys are writer w's four keys of one round, with payloads unique to the round.
func roundKeys(w, round int) ([]engine.Key, [][]byte) {
	var ks []engine.Key
	var ps [][]byte
	for i := 0; i < 4; i++ {
		id := w*100000 + round*10 + i
		ks = append(ks, K(id, fmt.Sprintf("w%d", w)))
		ps = append(ps, Payload(id, 1000+i*1500))
	}
	return ks, ps
}

// waitStats polls the engine's stats until cond holds (the deallocator runs in the
// background), failing after 10 s.
func waitStats(e *engine.Engine, cond func(engine.Stats) bool) engine.Stats {
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := e.Stats()
		if cond(s) || time.Now().After(deadline) {
			return s
		}
		time.Sleep(time.Millisecond)
	}
}

// deallocGate records the device's Deallocate calls; with block set, the first call
// signals entered and waits for release. Close is hidden like keepOpen's.
type deallocGate struct {
	blockdev.Device
	block   bool
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	seen    [][]blockdev.Range
}

func (d *deallocGate) Close() error                        { return nil }
func (d *deallocGate) RegisterBuffers(bufs [][]byte) error { return forwardRegister(d.Device, bufs) }
func (d *deallocGate) VectoredWrites() bool                { return blockdev.WritesTail(d.Device) }

func (d *deallocGate) Deallocate(r []blockdev.Range) error {
	d.mu.Lock()
	d.seen = append(d.seen, slices.Clone(r))
	first := len(d.seen) == 1
	d.mu.Unlock()
	if d.block && first {
		d.entered <- struct{}{}
		<-d.release
	}
	return d.Device.Deallocate(r)
}

func (d *deallocGate) calls() [][]blockdev.Range {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.seen)
}
