// Package enginetest is the engine's behaviour suite, runnable against any blockdev.Device
// backend: posix files, io_uring, NVMe passthrough, the emulated FDP SSD.
//
//	func TestEngineOnMyBackend(t *testing.T) {
//		enginetest.RunEngineSuite(t, func(t *testing.T) blockdev.Device { return openMine(t) })
//	}
//
// newDev must return a fresh, zeroed device of at least MinDeviceBytes whose logical block
// size divides 4096. The suite never closes it through the engine (it wraps it), and closes
// it itself at the end of each subtest.
package enginetest

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
)

// MinDeviceBytes is the smallest device the suite needs.
const MinDeviceBytes = 32 << 20

// Config returns the suite's base config (LMCache's raw_block_test_utils values: align
// 4096, header 4096, slot 64 KiB, meta 1 MiB), with the periodic checkpoint off.
func Config() engine.Config {
	c := engine.DefaultConfig()
	c.SlotBytes = 64 << 10
	c.MetaTotalBytes = 1 << 20
	c.Periodic = false
	c.RecoveryReaders = 3
	c.QueueDepth = 8
	return c
}

// keepOpen hides Close so that the engine can be closed and reopened on the same device.
type keepOpen struct{ blockdev.Device }

func (keepOpen) Close() error { return nil }

// RegisterBuffers forwards the engine's buffer registration, so the suite on io_uring runs
// with fixed I/O as the engine would in production.
func (k keepOpen) RegisterBuffers(bufs [][]byte) error { return forwardRegister(k.Device, bufs) }

// forwardRegister registers bufs with inner when it can (blockdev.ErrNotSupported otherwise).
func forwardRegister(inner blockdev.Device, bufs [][]byte) error {
	r, ok := inner.(blockdev.BufferRegistrar)
	if !ok {
		return fmt.Errorf("suite wrapper over %s: %w", inner.Info().Kind, blockdev.ErrNotSupported)
	}
	return r.RegisterBuffers(bufs)
}

// gate blocks writes while closed (to hold puts in flight).
type gate struct {
	blockdev.Device
	mu      sync.Mutex
	blocked bool
	entered chan struct{}
	release chan struct{}
}

func (g *gate) RegisterBuffers(bufs [][]byte) error { return forwardRegister(g.Device, bufs) }

func (g *gate) Submit(ops []blockdev.Op) error {
	g.mu.Lock()
	blocked := g.blocked && len(ops) > 0 && ops[0].Write
	g.mu.Unlock()
	if blocked {
		g.entered <- struct{}{}
		<-g.release
	}
	return g.Device.Submit(ops)
}

type env struct {
	t   *testing.T
	dev blockdev.Device
}

func (v *env) format(c engine.Config) *engine.Engine {
	v.t.Helper()
	e, err := engine.Format(keepOpen{v.dev}, c)
	if err != nil {
		v.t.Fatalf("Format: %v", err)
	}
	return e
}

func (v *env) open(c engine.Config) *engine.Engine {
	v.t.Helper()
	e, err := engine.Open(keepOpen{v.dev}, c)
	if err != nil {
		v.t.Fatalf("Open: %v", err)
	}
	return e
}

// K returns a deterministic object key.
func K(i int, salt string) engine.Key {
	return engine.ObjectKey("test/model", uint32(i%4), []byte(fmt.Sprintf("chunk-%08d", i)), salt)
}

// Payload returns a deterministic payload for key i.
func Payload(i, n int) []byte {
	b := make([]byte, n)
	x := uint32(i*2654435761 + 1)
	for j := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[j] = byte(x)
	}
	return b
}

func mustPut(t *testing.T, e *engine.Engine, keys []engine.Key, p [][]byte) engine.PutResult {
	t.Helper()
	r, err := e.PutMany(keys, p)
	if err != nil {
		t.Fatalf("PutMany: %v", err)
	}
	return r
}

func load(t *testing.T, e *engine.Engine, k engine.Key, n int) ([]byte, bool) {
	t.Helper()
	buf := make([]byte, n)
	ok, err := e.LoadManyInto([]engine.Key{k}, [][]byte{buf})
	if err != nil {
		t.Fatalf("LoadManyInto: %v", err)
	}
	return buf, ok[0]
}

func eqBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// writeRaw overwrites device bytes at off (aligned, read-modify-write of whole blocks).
func writeRaw(t *testing.T, dev blockdev.Device, off int64, data []byte) {
	t.Helper()
	const blk = 4096
	start := off / blk * blk
	end := (off + int64(len(data)) + blk - 1) / blk * blk
	b, err := blockdev.Alloc(int(end - start))
	if err != nil {
		t.Fatal(err)
	}
	defer blockdev.Free(b)
	if err := blockdev.ReadAt(dev, b, start); err != nil {
		t.Fatal(err)
	}
	copy(b[off-start:], data)
	if err := blockdev.WriteAt(dev, b, start, blockdev.NoPlacement); err != nil {
		t.Fatal(err)
	}
}

type salted struct{}

func (salted) Place(w engine.WriteInfo) blockdev.Placement {
	if w.Metadata {
		return 7
	}
	if w.Key.CacheSalt() == "b" {
		return 1
	}
	return 0
}

// RunEngineSuite runs every behaviour test against devices from newDev.
func RunEngineSuite(t *testing.T, newDev func(t *testing.T) blockdev.Device) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dev := newDev(t)
			if dev.Info().Size < MinDeviceBytes {
				t.Fatalf("device of %d bytes, the suite needs %d", dev.Info().Size, MinDeviceBytes)
			}
			defer dev.Close()
			tc.fn(t, &env{t: t, dev: dev})
		})
	}
}

var cases = []struct {
	name string
	fn   func(t *testing.T, v *env)
}{
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
	{"LayoutMismatchRejected", func(t *testing.T, v *env) {
		e := v.format(Config())
		e.Close()
		for _, c := range []struct {
			name string
			mod  func(*engine.Config)
		}{
			{"header_bytes 8192", func(c *engine.Config) { c.HeaderBytes = 8192 }},
			{"block_align 8192", func(c *engine.Config) { c.BlockAlign = 8192; c.HeaderBytes = 8192 }},
			{"slot_bytes", func(c *engine.Config) { c.SlotBytes = 128 << 10 }},
			{"namespace", func(c *engine.Config) { c.Namespace = engine.NamespaceLegacy }},
		} {
			cfg := Config()
			c.mod(&cfg)
			if _, err := engine.Open(keepOpen{v.dev}, cfg); !errors.Is(err, engine.ErrLayoutMismatch) {
				t.Errorf("%s: err = %v, want ErrLayoutMismatch", c.name, err)
			}
		}
	}},
	{"OpenUnformattedFailsClearly", func(t *testing.T, v *env) {
		if _, err := engine.Open(keepOpen{v.dev}, Config()); !errors.Is(err, engine.ErrNoCheckpoint) {
			t.Fatalf("err = %v, want ErrNoCheckpoint", err)
		}
	}},
	{"FreeSlotsRebuiltFromCheckpoint", func(t *testing.T, v *env) {
		e := v.format(Config())
		mustPut(t, e, []engine.Key{K(1, ""), K(2, ""), K(3, "")}, [][]byte{Payload(1, 10), Payload(2, 10), Payload(3, 10)})
		m2, _ := e.Lookup(K(2, ""))
		e.DeleteMany([]engine.Key{K(2, "")}, false)
		if err := e.CheckpointNow(); err != nil {
			t.Fatal(err)
		}
		e.CloseNoCheckpoint()
		e = v.open(Config())
		defer e.Close()
		if u := e.Usage(); u.SlotsFree != 1 || u.SlotsUsed != 2 || u.NextSlot != 3 {
			t.Fatalf("usage after reopen = %+v, want 1 free of next_slot 3", u)
		}
		mustPut(t, e, []engine.Key{K(9, "")}, [][]byte{Payload(9, 10)})
		if m, _ := e.Lookup(K(9, "")); m.Slot != m2.Slot {
			t.Fatalf("new key got slot %d, want the freed slot %d", m.Slot, m2.Slot)
		}
	}},
	{"StaleSlotHeaderDroppedOnRecovery", func(t *testing.T, v *env) {
		e := v.format(Config())
		mustPut(t, e, []engine.Key{K(1, ""), K(2, "")}, [][]byte{Payload(1, 10), Payload(2, 10)})
		m, _ := e.Lookup(K(1, ""))
		e.Close()
		writeRaw(t, v.dev, m.Offset+8, []byte{0xde, 0xad}) // identity no longer matches the key
		e = v.open(Config())
		defer e.Close()
		rep := e.Stats().Recovery
		if rep.Kept != 1 || len(rep.Dropped) != 1 || rep.Dropped[0].Key != K(1, "").String() {
			t.Fatalf("recovery = %+v", rep)
		}
		if got := e.ExistsMany([]engine.Key{K(1, ""), K(2, "")}, false); got[0] || !got[1] {
			t.Fatalf("exists = %v", got)
		}
	}},
	{"PayloadChecksumMismatchDetectedOnLoad", func(t *testing.T, v *env) {
		c := Config()
		e := v.format(c)
		defer e.Close()
		k := K(1, "")
		mustPut(t, e, []engine.Key{k}, [][]byte{Payload(1, 300)})
		m, _ := e.Lookup(k)
		writeRaw(t, v.dev, m.Offset+int64(c.HeaderBytes)+100, []byte{0x55})
		if _, ok := load(t, e, k, 300); ok {
			t.Fatal("corrupt payload loaded")
		}
		if s := e.Stats(); s.ChecksumErrors != 1 {
			t.Fatalf("ChecksumErrors = %d", s.ChecksumErrors)
		}
	}},
	{"CorruptPayloadDroppedByPayloadVerify", func(t *testing.T, v *env) {
		c := Config()
		e := v.format(c)
		mustPut(t, e, []engine.Key{K(1, ""), K(2, "")}, [][]byte{Payload(1, 300), Payload(2, 300)})
		m, _ := e.Lookup(K(2, ""))
		e.Close()
		writeRaw(t, v.dev, m.Offset+int64(c.HeaderBytes)+5, []byte{0xaa})
		c.VerifyPayloadOnRecover = true
		e = v.open(c)
		defer e.Close()
		if rep := e.Stats().Recovery; len(rep.Dropped) != 1 || rep.Dropped[0].Key != K(2, "").String() {
			t.Fatalf("dropped = %+v", rep.Dropped)
		}
	}},
	{"RestartThousandKeysByteExact", func(t *testing.T, v *env) {
		c := Config()
		c.SlotBytes = 8 << 10
		e := v.format(c)
		const n = 1000
		keys := make([]engine.Key, n)
		p := make([][]byte, n)
		for i := range keys {
			keys[i], p[i] = K(i, fmt.Sprintf("t%d", i%3)), Payload(i, 1+i*37%4096)
		}
		for lo := 0; lo < n; lo += 100 {
			if r := mustPut(t, e, keys[lo:lo+100], p[lo:lo+100]); len(r.Stored) != 100 {
				t.Fatalf("stored %d of 100", len(r.Stored))
			}
		}
		if err := e.CheckpointNow(); err != nil {
			t.Fatal(err)
		}
		if err := e.CloseNoCheckpoint(); err != nil {
			t.Fatal(err)
		}
		e = v.open(c)
		defer e.Close()
		if rep := e.Stats().Recovery; rep.Kept != n || len(rep.Dropped) != 0 {
			t.Fatalf("recovery kept %d dropped %v", rep.Kept, rep.Dropped)
		}
		bufs := make([][]byte, n)
		for i := range bufs {
			bufs[i] = make([]byte, len(p[i]))
		}
		ok, err := e.LoadManyInto(keys, bufs)
		if err != nil {
			t.Fatal(err)
		}
		for i := range keys {
			if !ok[i] || !bytes.Equal(bufs[i], p[i]) {
				t.Fatalf("key %d: ok=%v bytes equal=%v", i, ok[i], bytes.Equal(bufs[i], p[i]))
			}
		}
	}},
	{"PutsAfterLastCheckpointAreLostWithoutFinal", func(t *testing.T, v *env) {
		e := v.format(Config())
		mustPut(t, e, []engine.Key{K(1, "")}, [][]byte{Payload(1, 10)})
		e.CheckpointNow()
		mustPut(t, e, []engine.Key{K(2, "")}, [][]byte{Payload(2, 10)})
		e.CloseNoCheckpoint()
		e = v.open(Config())
		if got := e.ExistsMany([]engine.Key{K(1, ""), K(2, "")}, false); !got[0] || got[1] {
			t.Fatalf("after crash: %v, want [true false]", got)
		}
		mustPut(t, e, []engine.Key{K(3, "")}, [][]byte{Payload(3, 10)})
		e.Close() // final checkpoint
		e = v.open(Config())
		defer e.Close()
		if got := e.ExistsMany([]engine.Key{K(3, "")}, false); !got[0] {
			t.Fatal("final checkpoint on Close lost a key")
		}
	}},
	{"ContainersAlternateAndRecoveryPicksHighestValid", func(t *testing.T, v *env) {
		c := Config()
		e := v.format(c) // seq 1 → container 0
		mustPut(t, e, []engine.Key{K(1, "")}, [][]byte{Payload(1, 10)})
		e.CheckpointNow() // seq 2 → container 1
		mustPut(t, e, []engine.Key{K(2, "")}, [][]byte{Payload(2, 10)})
		e.CheckpointNow() // seq 3 → container 0
		e.CloseNoCheckpoint()
		infos, err := engine.ReadContainers(v.dev, c)
		if err != nil {
			t.Fatal(err)
		}
		if !infos[0].Valid || infos[0].Seq != 3 || !infos[1].Valid || infos[1].Seq != 2 {
			t.Fatalf("containers = %+v", infos)
		}
		writeRaw(t, v.dev, infos[0].Offset+int64(c.BlockAlign)+20, []byte{0xff}) // corrupt seq 3's payload
		e = v.open(c)
		defer e.Close()
		rep := e.Stats().Recovery
		if rep.Container != 1 || rep.Seq != 2 {
			t.Fatalf("recovered from container %d seq %d, want 1/2", rep.Container, rep.Seq)
		}
		if got := e.ExistsMany([]engine.Key{K(1, ""), K(2, "")}, false); !got[0] || got[1] {
			t.Fatalf("exists = %v", got)
		}
		if err := e.CheckpointNow(); err == nil { // clean: nothing to write
			mustPut(t, e, []engine.Key{K(5, "")}, [][]byte{Payload(5, 10)})
			if err := e.CheckpointNow(); err != nil {
				t.Fatal(err)
			}
		}
		// The next checkpoint (seq 3) overwrites the corrupt container 0, never the valid one.
		if s := e.Stats(); s.CheckpointSeq != 3 {
			t.Fatalf("next seq = %d, want 3", s.CheckpointSeq)
		}
		infos, _ = engine.ReadContainers(v.dev, c)
		if !infos[0].Valid || infos[0].Seq != 3 || !infos[1].Valid || infos[1].Seq != 2 {
			t.Fatalf("containers after repair = %+v", infos)
		}
	}},
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
		c.DeallocateBatch = 2
		e := v.format(c)
		defer e.Close()
		mustPut(t, e, []engine.Key{K(1, ""), K(2, ""), K(3, "")}, [][]byte{Payload(1, 10), Payload(2, 10), Payload(3, 10)})
		e.DeleteMany([]engine.Key{K(1, "")}, false)
		if u := e.Usage(); u.SlotsPending != 1 {
			t.Fatalf("slot should wait for its deallocate: %+v", u)
		}
		e.DeleteMany([]engine.Key{K(2, "")}, false)
		s := e.Stats()
		if s.DeallocatedSlots+2*s.DeallocateErrors != 2 {
			t.Fatalf("deallocated %d (errors %d), want a batch of 2", s.DeallocatedSlots, s.DeallocateErrors)
		}
		if u := e.Usage(); u.SlotsFree != 2 {
			t.Fatalf("after batch: free %d", u.SlotsFree)
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
		groupOf := map[uint32]blockdev.Placement{}
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
			want := blockdev.Placement(0)
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
	hs  []blockdev.Placement
	ops []recWrite
}

// recWrite is one recorded write: where, how long, with which handle.
type recWrite struct {
	off    int64
	n      int
	handle blockdev.Placement
}

func (r *recorder) RegisterBuffers(bufs [][]byte) error { return forwardRegister(r.Device, bufs) }

func (r *recorder) Submit(ops []blockdev.Op) error {
	r.mu.Lock()
	for _, op := range ops {
		if op.Write {
			r.hs = append(r.hs, op.Handle)
			r.ops = append(r.ops, recWrite{op.Off, len(op.Buf), op.Handle})
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
func (r *recorder) handles() []blockdev.Placement {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]blockdev.Placement(nil), r.hs...)
}
