package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
)

// Tests of checkpoint selection (select.go): issue 15's cases, one by one.

func selCfg(f CheckpointFormat) Config {
	c := compatConfig()
	c.CheckpointFormat = f
	c.DevicePath = ""
	return c
}

var bothFormats = []CheckpointFormat{CheckpointCompact, CheckpointLMCacheV1}

// history builds Format (seq 1, container 0, empty), put K(1) → seq 2 (container 1),
// put K(2) → seq 3 (container 0). The newest checkpoint holds K(1) and K(2); the older one
// only K(1).
func history(t *testing.T, c Config) *blockdev.Mem {
	t.Helper()
	m := blockdev.NewMem(16<<20, 0)
	e, err := Format(m, c)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		if r, err := e.PutMany([]Key{K(i)}, [][]byte{bytes.Repeat([]byte{byte(i)}, 100)}); err != nil || len(r.Stored) != 1 {
			t.Fatalf("put %d: %v", i, err)
		}
		if err := e.CheckpointNow(); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.CloseNoCheckpoint(); err != nil {
		t.Fatal(err)
	}
	return m.Reopen()
}

func layoutOf(t *testing.T, m *blockdev.Mem, c Config) Layout {
	t.Helper()
	lay, err := computeLayout(c, m.Info().Size)
	if err != nil {
		t.Fatal(err)
	}
	return lay
}

func headerSeq(m *blockdev.Mem, lay Layout, i int) uint64 {
	return binary.LittleEndian.Uint64(m.Bytes()[lay.ContainerOffset[i]+contSeqOff:])
}

func setHeaderSeq(m *blockdev.Mem, lay Layout, i int, seq uint64) {
	binary.LittleEndian.PutUint64(m.Bytes()[lay.ContainerOffset[i]+contSeqOff:], seq)
}

// unseal removes rbctl's seal: the header is then exactly what LMCache writes.
func unseal(m *blockdev.Mem, lay Layout, i int) {
	clear(m.Bytes()[lay.ContainerOffset[i]+sealTagOff : lay.ContainerOffset[i]+sealEnd])
}

func reseal(m *blockdev.Mem, lay Layout, i int) {
	sealContainerHeader(m.Bytes()[lay.ContainerOffset[i] : lay.ContainerOffset[i]+int64(lay.BlockAlign)])
}

func openRO(t *testing.T, m *blockdev.Mem, c Config) *Engine {
	t.Helper()
	c.ReadOnly = true
	e, err := Open(m.Reopen(), c)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func has(e *Engine, k Key) bool { return e.ExistsMany([]Key{k}, false)[0] }

func TestSealRepairsAnySingleBitFlip(t *testing.T) {
	b := make([]byte, 4096)
	var h containerHeader
	copy(h.Magic[:], "LMCIDX01")
	h.Version, h.Seq, h.Len, h.CRC = 1, 0x0123456789, 77, 0xabcdef
	encodeContainerHeader(b, h)
	sealContainerHeader(b)
	if seq, st := checkSeal(b); st != sealIntact || seq != h.Seq {
		t.Fatalf("fresh seal: %d %v", seq, st)
	}
	for bit := 0; bit < sealEnd*8; bit++ {
		c := bytes.Clone(b)
		c[bit/8] ^= 1 << (bit % 8)
		seq, st := checkSeal(c)
		switch {
		case bit/8 >= sealTagOff && bit/8 < sealTagOff+4:
			if st != sealNone {
				t.Errorf("bit %d (tag): %v, want no seal", bit, st)
			}
		case st != sealIntact && st != sealRepaired:
			t.Errorf("bit %d: state %v", bit, st)
		case seq != h.Seq:
			t.Errorf("bit %d: seq %#x, want %#x", bit, seq, h.Seq)
		case bit/8 >= contSeqOff && bit/8 < contSeqOff+8 && st != sealRepaired:
			t.Errorf("bit %d in the header seq: state %v, want repaired", bit, st)
		}
	}
	// Both copies damaged differently: nothing can be proven.
	c := bytes.Clone(b)
	c[contSeqOff] ^= 1
	c[sealSeqOff+1] ^= 1
	if _, st := checkSeal(c); st != sealBroken {
		t.Fatalf("two damaged copies: %v, want broken", st)
	}
	if _, st := checkSeal(make([]byte, 4096)); st != sealNone {
		t.Fatalf("LMCache header: %v", st)
	}
}

func TestCompactV2CarriesSeqAndV1StillReads(t *testing.T) {
	c := selCfg(CheckpointCompact)
	m := history(t, c)
	lay := layoutOf(t, m, c)
	sc := scanContainers(m, c, lay)
	st, err := decodeCheckpoint(sc[0].payload)
	if err != nil || !st.hasSeq || st.seq != 3 || len(st.entries) != 2 {
		t.Fatalf("container 0: %+v %v", st, err)
	}
	// The same checkpoint as compact version 1 (no seq): still readable, seq unknown.
	v1 := append(bytes.Clone(sc[0].payload[:compactV1HdrLen]), sc[0].payload[compactHdrLen:]...)
	binary.LittleEndian.PutUint32(v1[8:], 1)
	old, err := decodeCompact(v1)
	if err != nil || old.hasSeq || len(old.entries) != 2 || old.entries[1].key != st.entries[1].key {
		t.Fatalf("compact v1: %+v %v", old, err)
	}
	binary.LittleEndian.PutUint32(v1[8:], 3)
	if _, err := decodeCompact(v1); !errors.Is(err, ErrBadVersion) {
		t.Fatalf("version 3: %v", err)
	}
}

// Issue 15, first bullet: one flipped bit in the older container's seq (no checksum covers
// it in LMCache's header) must not bring the stale checkpoint back — for any bit.
func TestFlippedSeqBitInOlderContainer(t *testing.T) {
	for _, f := range bothFormats {
		c := selCfg(f)
		base := history(t, c)
		lay := layoutOf(t, base, c)
		for bit := 0; bit < 64; bit++ {
			m := base.Reopen()
			m2 := blockdev.NewMem(int64(len(m.Bytes())), 0)
			copy(m2.Bytes(), m.Bytes())
			setHeaderSeq(m2, lay, 1, headerSeq(m2, lay, 1)^1<<bit)
			e := openRO(t, m2, c)
			sel := e.Stats().Recovery.Selection
			if sel.Container != 0 || sel.Seq != 3 || !has(e, K(2)) || sel.Doubt || sel.Fallback {
				t.Errorf("%s, bit %d: chose container %d seq %d (doubt %v), newest key present %v: %s", f, bit, sel.Container, sel.Seq, sel.Doubt, has(e, K(2)), sel.Reason)
			}
			if sel.Candidates[1].Seq != 2 || !strings.Contains(sel.Candidates[1].SeqNote, "damaged") {
				t.Errorf("%s, bit %d: container 1 %+v", f, bit, sel.Candidates[1])
			}
			e.Close()
		}
	}
}

// The same flip in a pair of containers LMCache wrote (no seal, v1 JSON): the seqs are no
// longer consecutive, and next_slot (which only grows) tells the newer index.
func TestFlippedHighSeqBitLMCachePair(t *testing.T) {
	c := selCfg(CheckpointLMCacheV1)
	m := history(t, c)
	lay := layoutOf(t, m, c)
	unseal(m, lay, 0)
	unseal(m, lay, 1)
	e := openRO(t, m, c)
	if sel := e.Stats().Recovery.Selection; sel.Container != 0 || sel.Doubt || !strings.Contains(sel.Reason, "follows") {
		t.Fatalf("clean LMCache pair: %+v", sel)
	}
	e.Close()
	setHeaderSeq(m, lay, 1, 2|1<<62)
	e = openRO(t, m, c)
	defer e.Close()
	sel := e.Stats().Recovery.Selection
	if sel.Container != 0 || !has(e, K(2)) || sel.Doubt || !strings.Contains(sel.Reason, "next_slot") {
		t.Fatalf("flipped LMCache pair: container %d, K(2) %v: %s", sel.Container, has(e, K(2)), sel.Reason)
	}
}

// One flipped bit can leave an LMCache pair consecutive but reversed: the newest seq 3
// (container 0) becomes 1, and 1 and 2 look like a history in which container 1 is newer.
// next_slot contradicts the seqs: in doubt, reported, and a writable Open refuses.
func TestReversedLMCachePairIsInDoubt(t *testing.T) {
	c := selCfg(CheckpointLMCacheV1)
	m := history(t, c)
	lay := layoutOf(t, m, c)
	unseal(m, lay, 0)
	unseal(m, lay, 1)
	setHeaderSeq(m, lay, 0, 3^1<<1)
	e := openRO(t, m, c)
	sel := e.Stats().Recovery.Selection
	e.Close()
	if !sel.Doubt || !sel.Fallback || sel.Container != 0 || !sel.LostKnown || sel.Lost != 0 {
		t.Fatalf("reversed pair: %+v", sel)
	}
	if _, err := Open(m.Reopen(), c); !errors.Is(err, ErrSelectionDoubt) {
		t.Fatalf("writable open in doubt: %v, want ErrSelectionDoubt", err)
	}
	e, err := OpenWith(m.Reopen(), c, OpenOptions{AcceptDoubt: true})
	if err != nil {
		t.Fatal(err)
	}
	if !has(e, K(2)) {
		t.Fatal("accepted choice lost the newest key")
	}
	e.CloseNoCheckpoint()
}

// Issue 15, second bullet: a seq that wraps past 2^64-1 must not make a put vanish.
func TestWrappedSeqKeepsTheNewest(t *testing.T) {
	if !newer(0, math.MaxUint64) || newer(math.MaxUint64, 0) || !newer(5, 3) || newer(1<<63, 0) || newer(0, 1<<63) {
		t.Fatal("serial order")
	}
	for _, f := range bothFormats {
		c := selCfg(f)
		m := history(t, c)
		lay := layoutOf(t, m, c)
		// Re-number the history so container 0 holds 2^64-1 (the newest) and container 1
		// 2^64-2, as if the cache had written that many checkpoints.
		e := openRO(t, m, c)
		e.Close()
		setHeaderSeq(m, lay, 0, math.MaxUint64)
		setHeaderSeq(m, lay, 1, math.MaxUint64-1)
		reseal(m, lay, 0)
		reseal(m, lay, 1)
		if f == CheckpointCompact { // the payload's seq is what the CRC covers: rewrite both
			for i, s := range []uint64{math.MaxUint64, math.MaxUint64 - 1} {
				off := lay.ContainerOffset[i] + int64(lay.BlockAlign)
				binary.LittleEndian.PutUint64(m.Bytes()[off+compactSeqOff:], s)
				plen := binary.LittleEndian.Uint64(m.Bytes()[lay.ContainerOffset[i]+contLenOff:])
				binary.LittleEndian.PutUint32(m.Bytes()[lay.ContainerOffset[i]+contCRCOff:], crc32.ChecksumIEEE(m.Bytes()[off:off+int64(plen)]))
				reseal(m, lay, i)
			}
		}
		e, err := Open(m.Reopen(), c)
		if err != nil {
			t.Fatal(err)
		}
		if r := e.Stats().Recovery; r.Container != 0 || r.Seq != math.MaxUint64 {
			t.Fatalf("%s: before the wrap: %+v", f, r.Selection)
		}
		if r, err := e.PutMany([]Key{K(3)}, [][]byte{{3}}); err != nil || len(r.Stored) != 1 {
			t.Fatal("put 3", err)
		}
		if err := e.Close(); err != nil { // writes seq 0 into container 1
			t.Fatal(err)
		}
		if s := headerSeq(m, lay, 1); s != 0 {
			t.Fatalf("%s: the wrapped checkpoint has seq %d, want 0", f, s)
		}
		e = openRO(t, m, c)
		sel := e.Stats().Recovery.Selection
		if sel.Container != 1 || sel.Seq != 0 || !has(e, K(3)) || sel.Doubt {
			t.Fatalf("%s: after the wrap: container %d seq %d, K(3) %v: %s", f, sel.Container, sel.Seq, has(e, K(3)), sel.Reason)
		}
		e.Close()
	}
}

// The next checkpoint never goes over the container recovered from, even when that
// container's seq sits in the wrong container (a damaged, misplaced seq).
func TestNextCheckpointNeverOverwritesTheChosenContainer(t *testing.T) {
	if seqBase(3, 0) != 3 || seqBase(4, 0) != 5 || seqBase(2, 1) != 2 || seqBase(3, 1) != 4 || seqBase(math.MaxUint64, 0) != math.MaxUint64 {
		t.Fatal("seqBase")
	}
	c := selCfg(CheckpointCompact)
	m := history(t, c)
	lay := layoutOf(t, m, c)
	before := bytes.Clone(m.Bytes()[:lay.ContainerBytes])
	e, err := Open(m.Reopen(), c)
	if err != nil {
		t.Fatal(err)
	}
	e.PutMany([]Key{K(9)}, [][]byte{{9}})
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, m.Bytes()[:lay.ContainerBytes]) {
		t.Fatal("the checkpoint after recovery overwrote the container recovered from")
	}
}

// Issue 15, third bullet: falling back from a corrupt newest container says what was lost.
func TestFallbackCountsLostKeys(t *testing.T) {
	for _, f := range bothFormats {
		c := selCfg(f)
		m := history(t, c)
		lay := layoutOf(t, m, c)
		// Container 0 (seq 3) holds K(2), which container 1 lacks. A flipped bit in its
		// header's CRC field fails the check but leaves the payload readable enough to count.
		m.Bytes()[lay.ContainerOffset[0]+contCRCOff] ^= 0x40
		e := openRO(t, m, c)
		sel := e.Stats().Recovery.Selection
		e.Close()
		if sel.Container != 1 || !sel.Fallback || !sel.LostKnown || sel.Lost != 1 || len(sel.LostSample) != 1 || sel.LostSample[0] != K(2).String() {
			t.Fatalf("%s: corrupt CRC: %+v", f, sel)
		}
		if !strings.Contains(sel.Reason, "newer but invalid") {
			t.Fatalf("%s: reason %q", f, sel.Reason)
		}
		// A destroyed header: nothing to count.
		copy(m.Bytes()[lay.ContainerOffset[0]:], "XXXXXXXX")
		e = openRO(t, m, c)
		sel = e.Stats().Recovery.Selection
		e.Close()
		if sel.Container != 1 || !sel.Fallback || sel.LostKnown {
			t.Fatalf("%s: destroyed header: %+v", f, sel)
		}
	}
	// An older container that is invalid is no fallback: nothing newer was rejected.
	c := selCfg(CheckpointCompact)
	m := history(t, c)
	lay := layoutOf(t, m, c)
	m.Bytes()[lay.ContainerOffset[1]+contCRCOff] ^= 1
	e := openRO(t, m, c)
	defer e.Close()
	if sel := e.Stats().Recovery.Selection; sel.Container != 0 || sel.Fallback || !strings.Contains(sel.Reason, "older") {
		t.Fatalf("invalid older container: %+v", sel)
	}
}

// writeLMCacheContainer writes container i as LMCache does: header (no seal) and payload.
func writeLMCacheContainer(m *blockdev.Mem, lay Layout, i int, seq uint64, js string) {
	b := m.Bytes()[lay.ContainerOffset[i]:]
	clear(b[:lay.ContainerBytes])
	var h containerHeader
	copy(h.Magic[:], "LMCIDX01")
	h.Version, h.Seq, h.Len, h.CRC = 1, seq, uint64(len(js)), crc32.ChecksumIEEE([]byte(js))
	encodeContainerHeader(b[:lay.BlockAlign], h)
	copy(b[lay.BlockAlign:], js)
}

// LMCache's empty legacy checkpoints: right after formatting (next_slot 0) and after the
// four extLegacyKeys were deleted (next_slot 4).
var (
	extLegacyEmpty0 = golden("legacy-empty-next0.json")
	extLegacyEmpty4 = golden("legacy-empty-next4.json")
)

// legacyHistory is an LMCache legacy-namespace device: container 0 holds olderJSON at seq
// 1, container 1 the four extLegacyKeys at seq 2, slot headers as LMCache writes them.
func legacyHistory(t *testing.T, olderJSON string, olderSeq, newerSeq uint64, newerJSON string) (*blockdev.Mem, Layout) {
	m := blockdev.NewMem(16<<20, 0)
	lay := layoutOf(t, m, extConfig())
	writeLMCacheContainer(m, lay, seqContainer(olderSeq), olderSeq, olderJSON)
	writeLMCacheContainer(m, lay, seqContainer(newerSeq), newerSeq, newerJSON)
	for i, g := range extLegacyKeys {
		off := lay.DataBase + int64(i)*lay.SlotBytes
		lmcacheSlotHeader(m.Bytes()[off:off+4096], g.id, 3000+i*1000)
		copy(m.Bytes()[off+4096:], extPayload(i, 3000+i*1000))
	}
	return m, lay
}

// Issue 15, fourth bullet: namespace and format come from the chosen checkpoint, not from
// container 0. LMCache's legacy history: an empty older container, keys in the newer one.
// Detection reads legacy, and recovery (verify on, then the repair rbctl recover writes)
// keeps every key — LMCache reads the result.
func TestLMCacheLegacyHistoryKeptWhole(t *testing.T) {
	m, lay := legacyHistory(t, extLegacyEmpty0, 1, 2, extLegacyJSON)
	d, err := Detect(m)
	if err != nil {
		t.Fatal(err)
	}
	if d.Config.Namespace != NamespaceLegacy || d.Selection.NamespaceSource != "slot headers" || d.Selection.Container != 1 || d.Config.CheckpointFormat != CheckpointLMCacheV1 {
		t.Fatalf("detected %s from %q, container %d: %s", d.Config.Namespace, d.Selection.NamespaceSource, d.Selection.Container, d.Selection.Reason)
	}
	cfg := d.Config
	cfg.Periodic = false
	e, err := Open(m.Reopen(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r := e.Stats().Recovery; r.Loaded != 4 || r.Kept != 4 || len(r.Dropped) != 0 {
		t.Fatalf("recovery %+v", r)
	}
	if err := e.RepairCheckpoints(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// The repair (seq 3, container 0) holds all four keys, as LMCache JSON, marked legacy.
	sc := scanContainers(m, cfg, lay)
	st, err := decodeCheckpoint(sc[0].payload)
	if err != nil || sc[0].info.Seq != 3 || len(st.entries) != 4 || !st.hasNS || !st.legacyNS || st.format != CheckpointLMCacheV1 {
		t.Fatalf("repaired container 0: seq %d, %+v, %v", sc[0].info.Seq, st, err)
	}
	e = openRO(t, m, cfg)
	defer e.Close()
	for i, g := range extLegacyKeys {
		k, _ := ParseKey(g.enc, NamespaceLegacy)
		buf := make([]byte, 3000+i*1000)
		if ok, _ := e.LoadManyInto([]Key{k}, [][]byte{buf}); !ok[0] || !bytes.Equal(buf, extPayload(i, len(buf))) {
			t.Fatalf("%s lost or wrong after the repair", g.enc)
		}
	}
	// A config that insists on object is refused rather than dropping every key.
	obj := cfg
	obj.Namespace = NamespaceObject
	if _, err := Open(m.Reopen(), obj); !errors.Is(err, ErrLayoutMismatch) {
		// The repaired checkpoint carries the marker now; before the repair the slot
		// headers refuse it too (checked next).
		t.Fatalf("object config on a legacy cache: %v", err)
	}
	m2, _ := legacyHistory(t, extLegacyEmpty0, 1, 2, extLegacyJSON)
	if _, err := Open(m2, obj); !errors.Is(err, ErrLayoutMismatch) || !strings.Contains(err.Error(), "slot headers") {
		t.Fatalf("object config on an unmarked legacy cache: %v", err)
	}
}

// Issue 15, fifth bullet: a legacy cache LMCache emptied (newest checkpoint: no keys, no
// marker) takes its namespace from the older container's keys, so the next put writes the
// chunk hash into the slot header, not BLAKE2b of the key.
func TestEmptiedLMCacheLegacyCacheStaysLegacy(t *testing.T) {
	m, _ := legacyHistory(t, extLegacyJSON, 2, 3, extLegacyEmpty4)
	d, err := Detect(m)
	if err != nil {
		t.Fatal(err)
	}
	if d.Config.Namespace != NamespaceLegacy || !strings.HasPrefix(d.Selection.NamespaceSource, "container 1 (seq 2)") || d.Selection.Container != 0 {
		t.Fatalf("emptied legacy cache: %s from %q (container %d)", d.Config.Namespace, d.Selection.NamespaceSource, d.Selection.Container)
	}
	cfg := d.Config
	cfg.Periodic = false
	e, err := Open(m.Reopen(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := ParseKey(extLegacyKeys[2].enc, NamespaceLegacy)
	if r, err := e.PutMany([]Key{k}, [][]byte{{1, 2, 3}}); err != nil || len(r.Stored) != 1 {
		t.Fatal("put", err)
	}
	m2 := e.Layout()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// LIFO free list: the put took the highest freed slot, 3.
	off := m2.DataBase + 3*m2.SlotBytes
	if id := binary.LittleEndian.Uint64(m.Bytes()[off+8:]); id != extLegacyKeys[2].id {
		t.Fatalf("slot identity %016x, want the chunk hash %016x", id, extLegacyKeys[2].id)
	}
	// Both containers empty and unmarked: nothing tells, and Detect says so.
	m3, _ := legacyHistory(t, extLegacyEmpty4, 2, 3, extLegacyEmpty4)
	if d, err := Detect(m3); err != nil || d.Selection.NamespaceSource != "" {
		t.Fatalf("two empty unmarked checkpoints: source %q, %v", d.Selection.NamespaceSource, err)
	}
}

// rbctl's own empty v1 checkpoint records its namespace (object too), so an rbctl cache
// never needs --key-namespace.
func TestEmptyV1CheckpointRecordsNamespace(t *testing.T) {
	c := selCfg(CheckpointLMCacheV1)
	m := blockdev.NewMem(16<<20, 0)
	e, err := Format(m, c)
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	p := containerPayload(t, m, c, 0)
	if !bytes.HasSuffix(p, []byte(`"entries":{},"key_namespace":"object"}`)) {
		t.Fatalf("empty v1 checkpoint: %s", p)
	}
	if d, err := Detect(m.Reopen()); err != nil || d.Selection.NamespaceSource != "checkpoint" || d.Config.Namespace != NamespaceObject {
		t.Fatalf("detect: %+v %v", d.Selection, err)
	}
}

// Issue 15, sixth bullet: a compact checkpoint next to a v1 JSON one that another program
// (LMCache: no seal) wrote is reported and in doubt, never resolved silently by seq.
func TestMixedFormatsAreReported(t *testing.T) {
	c := selCfg(CheckpointCompact)
	m := history(t, c) // container 0: compact seq 3
	lay := layoutOf(t, m, c)
	// LMCache could not decode the compact checkpoint, started empty and wrote seq 4.
	writeLMCacheContainer(m, lay, 1, 4, golden("empty.json"))
	d, err := Detect(m)
	if err != nil {
		t.Fatal(err)
	}
	sel := d.Selection
	if !sel.MixedFormats || !sel.Doubt || !strings.Contains(sel.Reason, "different formats") || sel.Candidates[0].Format != CheckpointCompact || sel.Candidates[1].Format != CheckpointLMCacheV1 {
		t.Fatalf("mixed formats: %+v", sel)
	}
	if _, err := Open(m.Reopen(), d.Config); !errors.Is(err, ErrSelectionDoubt) {
		t.Fatalf("writable open of a mixed pair: %v", err)
	}
	// rbctl switching formats itself (both sealed) is reported, not in doubt.
	c2 := selCfg(CheckpointCompact)
	m2 := history(t, c2)
	c2.CheckpointFormat = CheckpointLMCacheV1
	e, err := Open(m2.Reopen(), c2)
	if err != nil {
		t.Fatal(err)
	}
	e.PutMany([]Key{K(5)}, [][]byte{{5}})
	e.Close() // seq 4, v1, container 1
	d, err = Detect(m2.Reopen())
	if err != nil || !d.Selection.MixedFormats || d.Selection.Doubt || d.Selection.Container != 1 || d.Config.CheckpointFormat != CheckpointLMCacheV1 {
		t.Fatalf("rbctl format switch: %+v %v", d.Selection, err)
	}
}

// Slot headers decide when the seqs cannot: two LMCache containers whose seqs are not
// consecutive, the same next_slot, and one index whose entry was overwritten since.
func TestSlotHeadersDecideWhenSeqsCannot(t *testing.T) {
	m := blockdev.NewMem(16<<20, 0)
	lay := layoutOf(t, m, extConfig())
	k0, k1 := ObjectKey("m", 0, []byte{1}, ""), ObjectKey("m", 0, []byte{2}, "")
	ent := func(k Key, slot int) string {
		return string(appendJSONString(nil, k.String())) + `:{"offset":` + itoa(int(lay.DataBase)+slot*int(lay.SlotBytes)) + `,"size":10,"shape":null,"dtype":null,"fmt":null,"cached_positions":null}`
	}
	state := func(e string) string {
		return `{"version":1,"device_path":"","capacity_bytes":16777216,"block_align":4096,"header_bytes":4096,"slot_bytes":65536,"meta_total_bytes":1048576,"meta_magic":"LMCIDX01","meta_version":1,"data_base_offset":1048576,"next_slot":1,"entries":{` + e + `}}`
	}
	// Older: k0 in slot 0. Newer: k0 deleted, k1 written into slot 0. The older seq's high
	// bit is flipped: not consecutive, and it claims to be newer.
	writeLMCacheContainer(m, lay, 0, 5|1<<40, state(ent(k0, 0)))
	writeLMCacheContainer(m, lay, 1, 6, state(ent(k1, 0)))
	lmcacheSlotHeader(m.Bytes()[lay.DataBase:lay.DataBase+4096], k1.Identity(), 10)
	d, err := Detect(m)
	if err != nil {
		t.Fatal(err)
	}
	sel := d.Selection
	if sel.Container != 1 || sel.Doubt || sel.Candidates[0].Stale != 1 || sel.Candidates[1].Stale != 0 || !strings.Contains(sel.Reason, "slot headers") {
		t.Fatalf("slot-header evidence: %+v", sel)
	}
	// No evidence at all (the slot header matches neither): in doubt.
	lmcacheSlotHeader(m.Bytes()[lay.DataBase:lay.DataBase+4096], 12345, 10)
	if d, _ := Detect(m); !d.Selection.Doubt || !d.Selection.LostKnown || d.Selection.Lost != 1 {
		t.Fatalf("no evidence: %+v", d.Selection)
	}
}

// recover --verify's context: cancelled, Open stops, returns the cause and writes nothing.
func TestOpenStopsOnCancelledContext(t *testing.T) {
	c := selCfg(CheckpointCompact)
	c.VerifyPayloadOnRecover = true
	m := history(t, c)
	before := bytes.Clone(m.Bytes())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := OpenWith(m.Reopen(), c, OpenOptions{Context: ctx})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "nothing was written") {
		t.Fatalf("cancelled open: %v", err)
	}
	if !bytes.Equal(before, m.Bytes()) {
		t.Fatal("a cancelled recovery wrote to the device")
	}
}

// countingDev counts reads and cancels a context at the nth one.
type countingDev struct {
	blockdev.Device
	mu     sync.Mutex
	n, at  int
	cancel func()
	after  int // reads issued after the cancel
}

func (d *countingDev) Submit(ops []blockdev.Op) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for range ops {
		d.n++
		if d.n == d.at {
			d.cancel()
		} else if d.n > d.at {
			d.after++
		}
	}
	return d.Device.Submit(ops)
}

// Cancelled in the middle of payload verification, Open stops within one batch per
// reader: it does not read on to the end.
func TestOpenStopsMidVerification(t *testing.T) {
	c := selCfg(CheckpointCompact)
	c.VerifyPayloadOnRecover = true
	c.RecoveryReaders = 2
	m := blockdev.NewMem(48<<20, 0)
	e, err := Format(m, c)
	if err != nil {
		t.Fatal(err)
	}
	var keys []Key
	var pl [][]byte
	for i := 0; i < 600; i++ {
		keys, pl = append(keys, K(i)), append(pl, bytes.Repeat([]byte{byte(i)}, 1000))
	}
	if _, err := e.PutMany(keys, pl); err != nil {
		t.Fatal(err)
	}
	e.Close()
	ctx, cancel := context.WithCancel(context.Background())
	d := &countingDev{Device: m.Reopen(), at: 40, cancel: cancel}
	_, err = OpenWith(d, c, OpenOptions{Context: ctx})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("open: %v", err)
	}
	// Without the cancel, verification reads 600 payloads plus the headers.
	if d.after > 2*c.RecoveryReaders {
		t.Fatalf("%d reads after the cancel (of %d in all); want at most %d", d.after, d.n, 2*c.RecoveryReaders)
	}
}

// TestFallbackRescuesLostKeys: falling back from a damaged newest container whose entries
// still decode, recovery with VerifyOnLoad takes back the keys only it listed when their
// slots verify (the battery's case: recover wrote the older index and lost a stored key
// whose header and payload were intact), and leaves out one whose slot was rewritten.
func TestFallbackRescuesLostKeys(t *testing.T) {
	for _, f := range bothFormats {
		c := selCfg(f)
		c.VerifyOnLoad, c.VerifyPayloadOnRecover = true, true
		m := history(t, c)
		lay := layoutOf(t, m, c)
		m.Bytes()[lay.ContainerOffset[0]+contCRCOff] ^= 0x40 // container 0 (seq 3, K(1) and K(2)) fails its CRC
		e := openRO(t, m, c)
		st := e.Stats().Recovery
		buf := make([]byte, 100)
		ok, err := e.LoadManyInto([]Key{K(2)}, [][]byte{buf})
		e.Close()
		if st.Selection.Container != 1 || st.Selection.Lost != 1 || len(st.Rescued) != 1 || st.Rescued[0] != K(2).String() ||
			len(st.NotRescued) != 0 || len(st.Dropped) != 0 || st.Kept != 2 {
			t.Fatalf("%s: rescued %q, not %v, dropped %v, kept %d, selection %+v", f, st.Rescued, st.NotRescued, st.Dropped, st.Kept, st.Selection)
		}
		if err != nil || !ok[0] || !bytes.Equal(buf, bytes.Repeat([]byte{2}, 100)) {
			t.Fatalf("%s: rescued K(2) loads %v %v", f, ok, err)
		}
		// Its payload torn: not rescued, and not counted as a dropped entry of the chosen one.
		e = openRO(t, m, c)
		var slot int64 = -1
		e.Entries(func(k Key, em EntryMeta) bool {
			if k == K(2) {
				slot = int64(em.Slot)
			}
			return true
		})
		e.Close()
		m.Bytes()[lay.SlotOffset(slot)+int64(c.HeaderBytes)] ^= 1
		e = openRO(t, m, c)
		st = e.Stats().Recovery
		e.Close()
		if len(st.Rescued) != 0 || len(st.NotRescued) != 1 || st.NotRescued[0].Key != K(2).String() || !strings.Contains(st.NotRescued[0].Reason, "payload checksum mismatch") ||
			len(st.Dropped) != 0 || st.Kept != 1 || has(e, K(2)) {
			t.Fatalf("%s: torn payload: rescued %q, not %+v, dropped %v, kept %d", f, st.Rescued, st.NotRescued, st.Dropped, st.Kept)
		}
	}
}
