package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"golang.org/x/sys/unix"
)

func compatConfig() Config {
	c := DefaultConfig()
	c.SlotBytes = 64 << 10
	c.MetaTotalBytes = 1 << 20
	c.Periodic = false
	c.DevicePath = "/dev/test"
	return c
}

// expectedV1 is Python's json.dumps(state, separators=(",",":"), ensure_ascii=True) for the
// state TestV1CheckpointIsByteExact builds (generated once with Python 3).
var expectedV1 = golden("v1-dumps.json")

func containerPayload(t *testing.T, m *blockdev.Mem, c Config, idx int) []byte {
	t.Helper()
	lay, _ := computeLayout(c, m.Info().Size)
	b := m.Bytes()[lay.ContainerOffset[idx]:]
	h, err := decodeContainerHeader(b, c.MetaMagic, c.MetaVersion, lay.PayloadCap)
	if err != nil {
		t.Fatalf("container %d: %v", idx, err)
	}
	p := b[c.BlockAlign : c.BlockAlign+int(h.Len)]
	if crc32.ChecksumIEEE(p) != h.CRC {
		t.Fatalf("container %d: CRC mismatch", idx)
	}
	return p
}

func TestV1CheckpointIsByteExact(t *testing.T) {
	m := blockdev.NewMem(32<<20, 0)
	c := compatConfig()
	c.CheckpointFormat = CheckpointLMCacheV1
	c.PayloadChecksum = false
	e, err := Format(m, c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.PutMany([]Key{ObjectKey("my/model", 1, []byte{0xde, 0xad, 0xbe, 0xef}, "tenant")}, [][]byte{[]byte("hello world")}); err != nil {
		t.Fatal(err)
	}
	meta := &ObjMeta{Shape: []int{2, 3}, Dtype: "torch.bfloat16", Fmt: "KV_2LTD", CachedPositions: []int{0, 1, 2}}
	if _, err := e.PutManyMeta([]Key{RawKey("café😀@0x00000000@00ff")}, [][]byte{[]byte("abcde")}, []*ObjMeta{meta}); err != nil {
		t.Fatal(err)
	}
	if err := e.CheckpointNow(); err != nil {
		t.Fatal(err)
	}
	e.CloseNoCheckpoint()
	got := containerPayload(t, m, c, 1) // seq 2 → container 1
	if string(got) != expectedV1 {
		t.Fatalf("v1 checkpoint differs from LMCache's bytes:\n got %s\nwant %s", got, expectedV1)
	}
	// A v1 slot header is LMCache's 24 bytes followed by zeroes.
	slot := m.Bytes()[1<<20 : 1<<20+4096]
	if string(slot[:8]) != "LMCBLK01" || binary.LittleEndian.Uint64(slot[16:]) != 11 || !allZero(slot[24:]) {
		t.Fatalf("slot header %x", slot[:32])
	}
	// Our reader reads it back.
	e, err = Open(m.Reopen(), c)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.Stats().Recovery.Format != CheckpointLMCacheV1 || e.Usage().SlotsUsed != 2 {
		t.Fatalf("reopen: %+v", e.Stats().Recovery)
	}
	buf := make([]byte, 11)
	if ok, _ := e.LoadManyInto([]Key{ObjectKey("my/model", 1, []byte{0xde, 0xad, 0xbe, 0xef}, "tenant")}, [][]byte{buf}); !ok[0] || string(buf) != "hello world" {
		t.Fatalf("load after v1 reopen: %v %q", ok, buf)
	}
}

// lmcacheImage builds a device exactly as LMCache v1 leaves it: a JSON checkpoint (with an
// old free_slots field, which must be ignored) in container 0 and 24-byte slot headers.
func lmcacheImage(t *testing.T, c Config, entries map[int]Key, payloads map[int][]byte, nextSlot int, extraJSON string) *blockdev.Mem {
	t.Helper()
	m := blockdev.NewMem(32<<20, 0)
	b := m.Bytes()
	var order []int
	for s := 0; s < nextSlot; s++ {
		if _, ok := entries[s]; ok {
			order = append(order, s)
		}
	}
	js := `{"version":1,"device_path":"/dev/test","capacity_bytes":0,"block_align":4096,"header_bytes":4096,"slot_bytes":65536,"meta_total_bytes":1048576,"meta_magic":"LMCIDX01","meta_version":1,"data_base_offset":1048576,"next_slot":` + itoa(nextSlot) + extraJSON + `,"entries":{`
	for i, s := range order {
		k := entries[s]
		off := c.MetaTotalBytes + int64(s)*c.SlotBytes
		if i > 0 {
			js += ","
		}
		js += string(appendJSONString(nil, k.String())) + `:{"offset":` + itoa(int(off)) + `,"size":` + itoa(len(payloads[s])) + `,"shape":[1,2],"dtype":"complex64","fmt":null,"cached_positions":null}`
		copy(b[off:], "LMCBLK01")
		binary.LittleEndian.PutUint64(b[off+8:], k.Identity())
		binary.LittleEndian.PutUint64(b[off+16:], uint64(len(payloads[s])))
		copy(b[off+int64(c.HeaderBytes):], payloads[s])
	}
	js += "}}"
	copy(b[4096:], js)
	var h containerHeader
	copy(h.Magic[:], "LMCIDX01")
	h.Version, h.Seq, h.Len, h.CRC = 1, 5, uint64(len(js)), crc32.ChecksumIEEE([]byte(js))
	encodeContainerHeader(b[:32], h)
	return m
}

func itoa(n int) string {
	return string(appendIntList(nil, []int{n})[1 : len(appendIntList(nil, []int{n}))-1])
}

func TestReadsHandBuiltLMCacheImage(t *testing.T) {
	c := compatConfig()
	k0, k2 := ObjectKey("org/m", 0, []byte{1, 2}, "t1"), ObjectKey("org/m", 1, []byte{3}, "")
	m := lmcacheImage(t, c, map[int]Key{0: k0, 2: k2}, map[int][]byte{0: []byte("zero"), 2: bytes.Repeat([]byte{7}, 5000)}, 3, `,"free_slots":[99]`)
	dc, err := DetectConfig(m)
	if err != nil {
		t.Fatal(err)
	}
	if dc.SlotBytes != c.SlotBytes || dc.MetaTotalBytes != c.MetaTotalBytes || dc.CheckpointFormat != CheckpointLMCacheV1 {
		t.Fatalf("detected %+v", dc)
	}
	dc.Periodic = false
	dc.ReadOnly = true
	infos, _ := ReadContainers(m, dc)
	if !infos[0].Valid || infos[0].Seq != 5 || infos[1].Problem != "empty" {
		t.Fatalf("containers = %+v", infos)
	}
	e, err := Open(m, dc)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	rep := e.Stats().Recovery
	if rep.Kept != 2 || len(rep.Dropped) != 0 || rep.Seq != 5 {
		t.Fatalf("recovery = %+v", rep)
	}
	if u := e.Usage(); u.SlotsFree != 1 || u.NextSlot != 3 || u.BytesBySalt["t1"] != c.SlotBytes {
		t.Fatalf("usage = %+v (free slots rebuilt as {s<next_slot} - used, free_slots ignored)", u)
	}
	bufs := [][]byte{make([]byte, 4), make([]byte, 5000)}
	ok, err := e.LoadManyInto([]Key{k0, k2}, bufs)
	if err != nil || !ok[0] || !ok[1] || string(bufs[0]) != "zero" || bufs[1][4999] != 7 {
		t.Fatalf("load = %v %v", ok, err)
	}
	if m, _ := e.Lookup(k0); m.Dtype != "complex64" || len(m.Shape) != 2 {
		t.Fatalf("meta = %+v (unknown dtype must be kept)", m)
	}
	if _, err := e.PutMany([]Key{K(1)}, [][]byte{{1}}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only put: %v", err)
	}
}

func TestLMCacheImageRejectsBadEntriesAndMismatch(t *testing.T) {
	c := compatConfig()
	k0 := ObjectKey("org/m", 0, []byte{1}, "")
	m := lmcacheImage(t, c, map[int]Key{0: k0}, map[int][]byte{0: []byte("x")}, 1, "")
	bad := c
	bad.HeaderBytes = 8192
	if _, err := Open(m, bad); !errors.Is(err, ErrLayoutMismatch) {
		t.Fatalf("header_bytes 8192: %v", err)
	}
	// next_slot beyond max_slots is a layout mismatch
	m = lmcacheImage(t, c, map[int]Key{0: k0}, map[int][]byte{0: []byte("x")}, 100000, "")
	if _, err := Open(m, c); !errors.Is(err, ErrLayoutMismatch) {
		t.Fatalf("next_slot: %v", err)
	}
}

func TestApplyStateDropsInvalidEntries(t *testing.T) {
	c := compatConfig()
	c.VerifyOnLoad = false
	e, err := newEngine(blockdev.NewMem(32<<20, 0), c)
	if err != nil {
		t.Fatal(err)
	}
	base := c.MetaTotalBytes
	st := &ckptState{version: 1, nextSlot: 3, entries: []ckptEntry{
		{key: "a", offset: base, size: 10},
		{key: "below", offset: 0, size: 10},
		{key: "unaligned", offset: base + 100, size: 10},
		{key: "beyond", offset: base + 10000*c.SlotBytes, size: 10},
		{key: "zero", offset: base + c.SlotBytes, size: 0},
		{key: "toolarge", offset: base + c.SlotBytes, size: c.SlotBytes},
		{key: "sameslot", offset: base, size: 10},
		{key: "a", offset: base + 2*c.SlotBytes, size: 10},
		{key: "past-next", offset: base + 5*c.SlotBytes, size: 10},
	}}
	e.applyState(st)
	e.rebuildFree()
	if e.live != 2 || len(e.recovery.Dropped) != 7 {
		t.Fatalf("live %d, dropped %+v", e.live, e.recovery.Dropped)
	}
	if e.alloc.nextSlot != 6 {
		t.Fatalf("next_slot %d: must move past the live slot 5 so it is never handed out twice", e.alloc.nextSlot)
	}
	if e.alloc.nfree != 4 { // slots 1,2,3,4
		t.Fatalf("free = %d", e.alloc.nfree)
	}
}

func K(i int) Key { return ObjectKey("m", 0, []byte{byte(i), byte(i >> 8)}, "") }

func TestCompactCheckpointRoundTrip(t *testing.T) {
	m := blockdev.NewMem(32<<20, 0)
	c := compatConfig()
	e, err := Format(m, c)
	if err != nil {
		t.Fatal(err)
	}
	keys := []Key{K(1), ObjectKey("a/b", 3, []byte{9, 9}, "s1"), RawKey("opaque key"), ObjectKey("a/b", 3, []byte{1}, "s2")}
	pl := [][]byte{{1}, {2, 2}, {3, 3, 3}, {4}}
	if _, err := e.PutMany(keys, pl); err != nil {
		t.Fatal(err)
	}
	e.DeleteMany(keys[:1], false)
	e.CheckpointNow()
	e.CloseNoCheckpoint()
	st, err := decodeCheckpoint(containerPayload(t, m, c, 1))
	if err != nil {
		t.Fatal(err)
	}
	if st.format != CheckpointCompact || len(st.entries) != 3 || st.nextSlot != 4 || st.slotBytes != c.SlotBytes {
		t.Fatalf("state = %+v", st)
	}
	for i, ce := range st.entries {
		k := keys[i+1]
		if ce.key != k.String() || ce.id != k.Identity() || !ce.hasCRC || ce.crc != payloadCRC(pl[i+1]) {
			t.Errorf("entry %d = %+v", i, ce)
		}
	}
}

// tightCache is a cache whose 4 KiB containers hold far fewer entries than its slots, and
// 200 keys with their 1-byte payloads.
func tightCache(t *testing.T) (*blockdev.Mem, Config, *Engine, []Key, [][]byte) {
	t.Helper()
	m := blockdev.NewMem(64<<20, 0)
	c := compatConfig()
	c.SlotBytes = 8192
	c.MetaTotalBytes = 4 * 4096 // payload capacity 4096 per container
	e, err := Format(m, c)
	if err != nil {
		t.Fatal(err)
	}
	var keys []Key
	var pl [][]byte
	for i := 0; i < 200; i++ {
		keys, pl = append(keys, ObjectKey("model", 0, []byte{byte(i), 1, 2, 3, 4, 5, 6, 7}, "salt")), append(pl, []byte{1})
	}
	return m, c, e, keys, pl
}

// TestIndexRoomRefusesWhatACheckpointCannotHold: puts whose entries would not fit the
// checkpoint are refused up front (ErrIndexFull), every acknowledged key is in the next
// checkpoint and survives a reopen.
func TestIndexRoomRefusesWhatACheckpointCannotHold(t *testing.T) {
	m, c, e, keys, pl := tightCache(t)
	r, err := e.PutMany(keys, pl)
	if !errors.Is(err, ErrIndexFull) || len(r.Stored) == 0 || len(r.Stored) == len(keys) {
		t.Fatalf("stored %d of %d, err = %v; want some stored and ErrIndexFull", len(r.Stored), len(keys), err)
	}
	if err := e.CheckpointNow(); err != nil {
		t.Fatalf("checkpoint after the refused puts: %v", err)
	}
	if s := e.Stats(); s.Room.Refused != int64(len(keys)-len(r.Stored)) || s.Room.UsedBytes > s.Room.BudgetBytes {
		t.Fatalf("room = %+v, stored %d", s.Room, len(r.Stored))
	}
	img := append([]byte(nil), m.Bytes()...) // as a crash leaves it: no final checkpoint
	e.CloseNoCheckpoint()
	m2 := blockdev.NewMem(int64(len(img)), 0)
	copy(m2.Bytes(), img)
	e, err = Open(m2, c)
	if err != nil {
		t.Fatal(err)
	}
	defer e.CloseNoCheckpoint()
	if n := e.Usage().SlotsUsed; n != int64(len(r.Stored)) {
		t.Fatalf("reopened with %d keys, %d were acknowledged", n, len(r.Stored))
	}
}

// TestCheckpointTooBigIsAnErrorNotASkip: with the room accounting switched off (white box),
// a checkpoint that does not fit fails loudly and is counted, never skipped.
func TestCheckpointTooBigIsAnErrorNotASkip(t *testing.T) {
	_, _, e, keys, pl := tightCache(t)
	defer e.CloseNoCheckpoint()
	e.ixBudget, e.ixPerSlot = 1<<40, 0
	e.PutMany(keys, pl)
	err := e.CheckpointNow()
	if !errors.Is(err, ErrCheckpointTooBig) {
		t.Fatalf("err = %v, want ErrCheckpointTooBig", err)
	}
	if s := e.Stats(); s.CheckpointErrors != 1 || s.LastCheckpointError == "" || s.DirtyOps == 0 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestSnapshotSeesConcurrentMutations(t *testing.T) {
	m := blockdev.NewMem(64<<20, 0)
	c := compatConfig()
	c.SlotBytes = 8192
	e, err := Format(m, c)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var keys []Key
	var pl [][]byte
	for i := 0; i < 5000; i++ {
		keys, pl = append(keys, K(i)), append(pl, []byte{byte(i)})
	}
	e.PutMany(keys[:4000], pl[:4000])
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 4000; i < 5000; i += 10 {
			e.PutMany(keys[i:i+10], pl[i:i+10])
			e.DeleteMany(keys[i-4000:i-3990], false)
		}
	}()
	for i := 0; i < 5; i++ {
		e.mu.Lock()
		e.dirty++
		e.mu.Unlock()
		sn := e.takeSnapshot()
		seen := map[int32]bool{}
		for _, se := range sn.ents {
			if seen[se.slot] {
				t.Fatalf("slot %d twice in a snapshot", se.slot)
			}
			seen[se.slot] = true
		}
	}
	<-done
	e.mu.Lock()
	e.dirty++
	e.mu.Unlock()
	sn := e.takeSnapshot()
	if int64(len(sn.ents)) != e.Usage().SlotsUsed {
		t.Fatalf("final snapshot has %d entries, index %d", len(sn.ents), e.Usage().SlotsUsed)
	}
}

func memDev() *blockdev.Mem { return blockdev.NewMem(8<<20, 0) }

func TestDetectConfigFallsBackToContainer1(t *testing.T) {
	m := blockdev.NewMem(32<<20, 0)
	c := compatConfig()
	c.SlotBytes = 128 << 10
	c.HeaderBytes = 8192
	e, _ := Format(m, c)
	e.PutMany([]Key{K(1)}, [][]byte{{1}})
	e.CheckpointNow() // seq 2 → container 1
	e.PutMany([]Key{K(2)}, [][]byte{{2}})
	e.CheckpointNow() // seq 3 → container 0
	e.CloseNoCheckpoint()
	copy(m.Bytes()[0:8], "XXXXXXXX") // container 0 header destroyed
	m = m.Reopen()
	dc, err := DetectConfig(m)
	if err != nil {
		t.Fatal(err)
	}
	if dc.SlotBytes != c.SlotBytes || dc.HeaderBytes != 8192 || dc.MetaTotalBytes != c.MetaTotalBytes {
		t.Fatalf("detected %+v", dc)
	}
	dc.Periodic = false
	e, err = Open(m, dc)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if rep := e.Stats().Recovery; rep.Container != 1 || rep.Seq != 2 || rep.Kept != 1 {
		t.Fatalf("recovery = %+v", rep)
	}
}

func TestLegacyNamespaceRoundTrip(t *testing.T) {
	m := blockdev.NewMem(32<<20, 0)
	c := compatConfig()
	c.Namespace = NamespaceLegacy
	e, err := Format(m, c)
	if err != nil {
		t.Fatal(err)
	}
	// Two layer keys of one chunk share the identity (LMCache PR #4899's case).
	k1, k2 := LegacyKey("vllm@m@1@0@abc0@layer0", 0xabc0), LegacyKey("vllm@m@1@0@abc0@layer1", 0xabc0)
	if r, _ := e.PutMany([]Key{k1, k2}, [][]byte{{1}, {2}}); len(r.Stored) != 2 {
		t.Fatalf("stored %v", r)
	}
	e.Close()
	e, err = Open(m.Reopen(), c)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	rep := e.Stats().Recovery
	if rep.Kept != 2 || len(rep.Dropped) != 0 {
		t.Fatalf("recovery %+v", rep)
	}
	bufs := [][]byte{{0}, {0}}
	if ok, _ := e.LoadManyInto([]Key{k1, k2}, bufs); !ok[0] || !ok[1] || bufs[0][0] != 1 || bufs[1][0] != 2 {
		t.Fatalf("loads %v %v", ok, bufs)
	}
}

func TestEventFDCountsCompletions(t *testing.T) {
	e, err := Format(blockdev.NewMem(32<<20, 0), compatConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	fd, err := e.EventFD()
	if err != nil {
		t.Skipf("no eventfd: %v", err)
	}
	id := e.SubmitStore([]Key{K(1)}, [][]byte{{1}})
	if _, err := e.WaitTask(id); err != nil {
		t.Fatal(err)
	}
	e.WaitTask(e.SubmitLookup([]Key{K(1)}))
	var b [8]byte
	if n, err := unix.Read(fd, b[:]); err != nil || n != 8 || binary.LittleEndian.Uint64(b[:]) != 2 {
		t.Fatalf("eventfd read %d %v %x, want counter 2", n, err, b)
	}
}
