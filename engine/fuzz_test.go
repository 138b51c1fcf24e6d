package engine

import (
	"encoding/binary"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
)

// sizeOnly is a device that has a size and nothing else: decoders under fuzzing build an
// index against it without I/O.
type sizeOnly struct{ blockdev.Device }

func (sizeOnly) Info() blockdev.Info { return blockdev.Info{Size: 8 << 20, LogicalBlock: 1} }

// mustBeCorrupt fails unless a decoder's error carries the corruption marker.
func mustBeCorrupt(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("decoder error %q does not satisfy errors.Is(err, ErrCorrupt)", err)
	}
}

func FuzzSlotHeader(f *testing.F) {
	b := make([]byte, 32)
	encodeSlotHeader(b, slotHeader{Identity: 42, Len: 7, HasCRC: true, CRC: 9})
	f.Add(b)
	f.Add([]byte("LMCBLK01"))
	kb := make([]byte, 128)
	encodeSlotHeader(kb, slotHeader{Identity: 42, Len: 7, HasCRC: true, CRC: 9, HasKey: true, Key: "m@0x00000000@ab", Gen: 5, Legacy: true})
	f.Add(kb)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeSlotHeader(b)
		if err != nil {
			mustBeCorrupt(t, err)
			return
		}
		out := make([]byte, len(b))
		encodeSlotHeader(out, h)
		h2, err := decodeSlotHeader(out)
		if err != nil || h2 != h {
			t.Fatalf("re-encode: %+v vs %+v (%v)", h2, h, err)
		}
	})
}

func FuzzContainerHeader(f *testing.F) {
	b := make([]byte, 32)
	var h containerHeader
	copy(h.Magic[:], "LMCIDX01")
	h.Version, h.Seq, h.Len, h.CRC = 1, 3, 100, 5
	encodeContainerHeader(b, h)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeContainerHeader(b, "LMCIDX01", 1, 1<<20)
		if errors.Is(err, ErrNoCheckpoint) {
			if !allZero(b[:contHeaderLen]) || errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v for a header that is not all zero, or marked corrupt", err)
			}
			return
		}
		if err != nil {
			mustBeCorrupt(t, err)
			return
		}
		if h.Len == 0 || h.Len > 1<<20 {
			t.Fatalf("accepted payload_len %d", h.Len)
		}
	})
}

// FuzzContainerSeal: the seal decoder reads any header block; a seq it calls proven must
// be one of the two copies on the device.
func FuzzContainerSeal(f *testing.F) {
	b := make([]byte, 64)
	var h containerHeader
	copy(h.Magic[:], "LMCIDX01")
	h.Version, h.Seq, h.Len, h.CRC = 1, 7, 100, 5
	encodeContainerHeader(b, h)
	sealContainerHeader(b)
	f.Add(b)
	f.Add(b[:40])
	f.Add(make([]byte, 48))
	f.Fuzz(func(t *testing.T, b []byte) {
		seq, st := checkSeal(b)
		if st == sealIntact || st == sealRepaired {
			if seq != binary.LittleEndian.Uint64(b[contSeqOff:]) && seq != binary.LittleEndian.Uint64(b[sealSeqOff:]) {
				t.Fatalf("seal proved seq %d, which is in neither copy", seq)
			}
		}
	})
}

func FuzzV1Checkpoint(f *testing.F) {
	f.Add([]byte(expectedV1))
	f.Add([]byte(`{"version":1,"entries":{}}`))
	f.Add([]byte(`{"a":"\ud83d\ude00\u00e9","b":[1,2.5e3,-1,true,false,null]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeV1(b)
		if err != nil {
			mustBeCorrupt(t, err)
			return
		}
		e, err := newEngine(sizeOnly{}, compatConfig())
		if err != nil {
			t.Fatal(err)
		}
		_ = e.checkLayout(st)
		if st.nextSlot >= 0 && st.nextSlot <= e.layout.MaxSlots {
			e.applyState(st)
			e.rebuildFree()
			if e.live+e.alloc.nfree > e.layout.MaxSlots {
				t.Fatalf("live %d + free %d > slots", e.live, e.alloc.nfree)
			}
		}
	})
}

func FuzzCompactCheckpoint(f *testing.F) {
	e, _ := Format(memDev(), compatConfig())
	e.PutManyMeta([]Key{K(1), ObjectKey("a/b", 1, []byte{1, 2}, "s")}, [][]byte{{1}, {2}}, []*ObjMeta{nil, {Shape: []int{1}}})
	f.Add(e.encodeCompact(e.takeSnapshot()))
	e.CloseNoCheckpoint()
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeCompact(b)
		// The lazy decodes recovery uses fail exactly where decodeCompact fails, and build
		// the same state when asked to.
		lazy, lerr := decodeCompactLazy(b)
		built, berr := decodeCompactWalk(b, true)
		if (lerr == nil) != (err == nil) || (berr == nil) != (err == nil) {
			t.Fatalf("decodeCompact: %v; decodeCompactLazy: %v; decodeCompactWalk: %v", err, lerr, berr)
		}
		if viaCkpt, cerr := decodeCheckpointLazy(b); (cerr == nil) != (err == nil) && len(b) >= 8 && string(b[:8]) == compactMagic {
			t.Fatalf("decodeCompact: %v; decodeCheckpointLazy: %v (%v)", err, cerr, viaCkpt != nil)
		}
		if err != nil {
			mustBeCorrupt(t, err)
			return
		}
		if lazy.count() != len(st.entries) || built.count() != len(st.entries) {
			t.Fatalf("count %d and %d, %d entries", lazy.count(), built.count(), len(st.entries))
		}
		lazy.fillKeys()
		built.fillKeys()
		if !reflect.DeepEqual(lazy, st) || !reflect.DeepEqual(built, st) {
			t.Fatal("a lazy decode built another state")
		}
		e, err := newEngine(sizeOnly{}, compatConfig())
		if err != nil {
			t.Fatal(err)
		}
		if e.checkLayout(st) == nil {
			e.applyState(st)
			e.rebuildFree()
		}
	})
}

func FuzzKeyCodec(f *testing.F) {
	f.Add("my%2Fmodel@0x00000001@deadbeef@tenant")
	f.Add("a@b@c@d@e")
	f.Add("%zz@0x1@00")
	f.Fuzz(func(t *testing.T, s string) {
		pre, salts := newInterner(), newInterner()
		rec := encodeKey(nil, s, pre, salts)
		got, ok := decodeKey(rec, pre.strs, salts.strs)
		if !ok || got != s || !keyEqual(rec, s, pre.strs, salts.strs) {
			t.Fatalf("compact key round trip of %q: %q %v", s, got, ok)
		}
		k := RawKey(s)
		if p, ok := k.Parts(); ok && p.Shape != ShapeNative && pyQuote(p.Model) == strings.SplitN(s, "@", 2)[0] && strings.ToLower(s) == s && !strings.HasSuffix(s, "@") {
			// a key of LMCache's shape (canonical quoting, lower-case hex, no empty salt field:
			// LMCache appends "@salt" only for a non-empty salt) re-encodes exactly
			f := strings.Split(s, "@")
			canonical := fmtRank64(p.KVRank) == f[1] && (p.Shape == ShapeRawBlock || strconv.FormatUint(p.Group, 16) == f[2])
			if re, err := ObjectKeyOf(p); canonical && p.Model != "" && len(p.ChunkHash) > 0 && (err != nil || re.String() != s) {
				t.Fatalf("%q re-encodes as %q (%v)", s, re.String(), err)
			}
		}
		_, _ = ParseKey(s, NamespaceLegacy)
		// decodeKey must never panic on arbitrary records either
		_, _ = decodeKey([]byte(s), pre.strs, salts.strs)
	})
}

// FuzzModelRank: the allocation-free model/kv-rank split the engine gives placement agrees
// with Parts on every key Parts accepts, and says nothing for keys it rejects as unquotable.
func FuzzModelRank(f *testing.F) {
	for _, s := range []string{"m@0x1f@ab@salt", "my%2Fmodel@0x00000000@00ff", "m@0x@00", "a@b@c@d@e", "%zz@0x1@00", "@0x0@",
		"m@0x100030803@0@00ff@s", "m@00000001@a@00ff@s", "m@0x00000000@10@00ff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, enc string) {
		k := Key{enc: enc, ns: NamespaceObject}
		model, rank := k.modelRank()
		if p, ok := k.Parts(); ok && (p.Model != model || p.KVRank != rank) || !ok && (model != "" || rank != 0) {
			t.Fatalf("%q: modelRank %q/%d, Parts %q/%d", enc, model, rank, p.Model, p.KVRank)
		}
	})
}
