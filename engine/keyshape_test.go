package engine

import (
	"errors"
	"testing"

	"github.com/rbctl/rbctl/placement"
)

// LMCache's object-key shapes, each key as LMCache's own encoders spell it (raw-block
// key_codec before and after object_group_id; the native connectors' _object_key_to_string),
// with the fields LMCache's decoders read back and the identity (BLAKE2b-64 of the string,
// computed with Python's hashlib.blake2b(digest_size=8), read little-endian).
var shapeTable = []struct {
	name  string
	enc   string
	shape KeyShape
	model string
	rank  uint64
	group uint64
	hash  string
	salt  string
	id    uint64
}{
	// Issue 29's cases: refused, or read with the hash as the salt, before.
	{"group 1, no salt", "m@0x00000000@1@00ff", ShapeRawBlockGroup, "m", 0, 1, "00ff", "", 0xfc075c2ac047905f},
	{"group 0x10, no salt", "m@0x00000000@10@00ff", ShapeRawBlockGroup, "m", 0, 0x10, "00ff", "", 0xd28502a0d2713065},
	{"group 0", "m@0x00000000@0@00ff", ShapeRawBlockGroup, "m", 0, 0, "00ff", "", 0x8707d6132e7c5199},
	{"five fields: group and salt", "my%2Fmodel@0x00000001@0@deadbeef@tenant", ShapeRawBlockGroup, "my/model", 1, 0, "deadbeef", "tenant", 0x2b0476a055a08537},
	// kv_rank of a 256-GPU world: (256<<24)|(3<<16)|(8<<8)|3, nine hex digits, unmasked.
	{"rank past 32 bits, group, salt", "m@0x100030803@0@00ff@rag:a", ShapeRawBlockGroup, "m", 0x100030803, 0, "00ff", "rag:a", 0xa2fc607eb4b1f5c1},
	{"rank past 32 bits, group 0x1f", "m@0x100030803@1f@00ff", ShapeRawBlockGroup, "m", 0x100030803, 0x1f, "00ff", "", 0x8d6a3f9538da7db7},
	{"rank past 32 bits, pre-group", "m@0x100030803@00ff", ShapeRawBlock, "m", 0x100030803, 0, "00ff", "", 0x67a92105abe1ae57},
	// The key codec before object groups (LMCache @3f45a9ad), as docs/compat.md pins it.
	{"pre-group with salt", "my%2Fmodel@0x00000001@deadbeef@tenant", ShapeRawBlock, "my/model", 1, 0, "deadbeef", "tenant", 0x595d2540f7f21808},
	// Four fields that both decoders accept: read as LMCache's current decoder reads them.
	{"ambiguous: current decoder wins", "m@0x00000000@00ff@ab", ShapeRawBlockGroup, "m", 0, 0xff, "ab", "", 0xb15c4747e2052167},
	// The native-connector spelling: model not quoted, rank %08x without 0x, always the group.
	{"native, salt", "my/model@00000001@0@deadbeef@tenant", ShapeNative, "my/model", 1, 0, "deadbeef", "tenant", 0x2c9327068496fe82},
	{"native, rank past 32 bits", "m@100030803@1f@00ff", ShapeNative, "m", 0x100030803, 0x1f, "00ff", "", 0x05a09e5a8de73944},
}

func TestLMCacheKeyShapes(t *testing.T) {
	for _, c := range shapeTable {
		if err := CheckKey(c.enc, NamespaceObject); err != nil {
			t.Errorf("%s: CheckKey(%q) = %v", c.name, c.enc, err)
		}
		k, err := ParseKey(c.enc, NamespaceObject)
		if err != nil || k.String() != c.enc || k.Identity() != c.id {
			t.Errorf("%s: ParseKey(%q) = %q %#x %v, want identity %#x", c.name, c.enc, k.String(), k.Identity(), err, c.id)
		}
		p, ok := k.Parts()
		if !ok || p.Shape != c.shape || p.Model != c.model || p.KVRank != c.rank || p.Group != c.group ||
			p.CacheSalt != c.salt || string(p.ChunkHash) != string(hexOf(c.hash)) {
			t.Errorf("%s: Parts(%q) = %+v %v", c.name, c.enc, p, ok)
		}
		if k.CacheSalt() != c.salt || k.Shape() != c.shape {
			t.Errorf("%s: CacheSalt %q shape %v", c.name, k.CacheSalt(), k.Shape())
		}
		if r, ok := k.KVRank(); !ok || r != c.rank {
			t.Errorf("%s: KVRank %#x %v", c.name, r, ok)
		}
		// Placement sees the fields: the salt and the full rank (local rank = low byte).
		w := writeFor(k, 10)
		if w.CacheSalt != c.salt || w.KVRank != c.rank || w.Model != c.model {
			t.Errorf("%s: writeFor = %+v", c.name, w)
		}
		// Built from its fields in its shape, the key is the same string (but for the
		// ambiguous key, whose group "00ff" LMCache's %x would spell "ff").
		if c.hash != "ab" {
			re, err := ObjectKeyOf(p)
			if err != nil || re != k {
				t.Errorf("%s: ObjectKeyOf(%+v) = %q %v", c.name, p, re.String(), err)
			}
		}
	}
}

// A key of the big-rank world is placed by cache_salt_rank under its local rank (3), with
// the salt of its fifth field: five-field keys were placed with no salt and rank 0 before.
func TestFiveFieldKeyIsPlacedBySaltAndRank(t *testing.T) {
	pol := placement.NewCacheSaltLocalRank([]placement.Handle{4, 5, 6}, 8)
	k := RawKey("m@0x100030803@0@00ff@rag:a")
	if h := pol.Place(writeFor(k, 10)); h != 4 {
		t.Fatalf("first bucket/rank: handle %d, want 4", h)
	}
	other := RawKey("m@0x100030802@0@00ff@RAG:b") // same bucket (folded), local rank 2
	if h := pol.Place(writeFor(other, 10)); h != 5 {
		t.Fatalf("second rank of the bucket: handle %d, want 5", h)
	}
	if h := pol.Place(writeFor(RawKey("m@0x100030803@1@00aa@rag:c"), 10)); h != 4 {
		t.Fatalf("same bucket and local rank: handle %d, want 4", h)
	}
}

func TestFromNative(t *testing.T) {
	for _, c := range []struct{ native, raw string }{
		{"my/model@00000001@0@deadbeef@tenant", "my%2Fmodel@0x00000001@0@deadbeef@tenant"},
		{"m@100030803@1f@00ff", "m@0x100030803@1f@00ff"},
		{"Qwen/Qwen2.5 7B@02000201@3@00ff", "Qwen%2FQwen2.5%207B@0x02000201@3@00ff"},
	} {
		k, err := FromNative(c.native)
		if err != nil || k.String() != c.raw || k.Identity() != objectIdentity(c.raw) {
			t.Errorf("FromNative(%q) = %q %v, want %q", c.native, k.String(), err, c.raw)
		}
		if n, ok := k.Native(); !ok || n != c.native {
			t.Errorf("Native(%q) = %q %v, want %q", c.raw, n, ok, c.native)
		}
	}
	for _, bad := range []string{
		"m@0x00000001@0@00ff",       // raw-block spelling, not native
		"m@00000001@00@00ff",        // group not canonical (%x gives "0")
		"m@000000001@0@00ff",        // rank not canonical (%08x gives 8 digits)
		"m@00000001@0@00FF",         // upper-case hash
		"m@00000001@0@00ff@",        // empty salt field
		"m@0000001@0@00ff",          // rank of 7 digits
		"m@00000001@0@0ff",          // odd hash
		"m@8000000000000000@0@00ff", // rank past int64
	} {
		if _, err := FromNative(bad); !errors.Is(err, ErrKeyFormat) {
			t.Errorf("FromNative(%q) = %v, want ErrKeyFormat", bad, err)
		}
	}
}

func TestCheckKeyRefusesMalformedShapes(t *testing.T) {
	for _, bad := range []string{
		"m@0x00000000@zz@00ff@s",      // group not hex
		"m@0x8000000000000000@00ff",   // rank past int64
		"m@0x00000000@00ff@",          // empty salt field
		"m@0x00000000@@00ff",          // empty group: pre-group read has an empty hash
		"m@0x00000000@1@0ff",          // odd hash, and "0ff" is not a salt after hash "1"
		"m@1@0@00ff",                  // native rank of one digit
		"m@0x00000000@1@00ff@s@t",     // six fields
		"@0x00000000@00ff",            // empty model
		"m@0x00000000@1@00ff@a@b@c@d", // seven fields
	} {
		if err := CheckKey(bad, NamespaceObject); !errors.Is(err, ErrKeyFormat) {
			t.Errorf("CheckKey(%q) = %v, want ErrKeyFormat", bad, err)
		}
	}
}

func TestObjectKeyOfRefusesKeysThatReadBackOtherwise(t *testing.T) {
	// A pre-group key whose salt is hex digits reads as GROUP@HASH (LMCache's current
	// decoder): rbctl does not write it under fields it would not name.
	_, err := ObjectKeyOf(ObjectParts{Shape: ShapeRawBlock, Model: "m", ChunkHash: []byte{0, 0xff}, CacheSalt: "ab"})
	if !errors.Is(err, ErrKeyFormat) {
		t.Fatalf("hex salt in the pre-group shape: %v", err)
	}
	k, err := ObjectKeyOf(ObjectParts{Shape: ShapeRawBlockGroup, Model: "m", ChunkHash: []byte{0, 0xff}, CacheSalt: "ab"})
	if err != nil || k.String() != "m@0x00000000@0@00ff@ab" || k.CacheSalt() != "ab" {
		t.Fatalf("group shape: %q %v", k.String(), err)
	}
	if _, err := ObjectKeyOf(ObjectParts{Shape: ShapeRawBlock, Model: "m", Group: 1, ChunkHash: []byte{1}}); !errors.Is(err, ErrKeyFormat) {
		t.Fatalf("group in the pre-group shape: %v", err)
	}
	if _, err := ObjectKeyOf(ObjectParts{Shape: ShapeRawBlock, Model: "m", KVRank: MaxKVRank + 1, ChunkHash: []byte{1}}); !errors.Is(err, ErrKeyFormat) {
		t.Fatalf("rank past int64: %v", err)
	}
}

// The compact checkpoint keeps every shape byte for byte, the group shapes in the compact
// record (prefix up to the hash, hash bytes, salt).
func TestCompactRecordKeepsEveryShape(t *testing.T) {
	pre, salts := newInterner(), newInterner()
	for _, c := range shapeTable {
		rec := encodeKey(nil, c.enc, pre, salts)
		got, ok := decodeKey(rec, pre.strs, salts.strs)
		if !ok || got != c.enc || !keyEqual(rec, c.enc, pre.strs, salts.strs) {
			t.Errorf("%s: compact round trip %q %v", c.name, got, ok)
		}
		if rec[0] != 1 {
			t.Errorf("%s: stored verbatim, not as a compact object record", c.name)
		}
	}
}

func hexOf(s string) []byte {
	b := make([]byte, len(s)/2)
	for i := range b {
		b[i] = unhex(s[2*i])<<4 | unhex(s[2*i+1])
	}
	return b
}

// FuzzKeyShape: the key parser never panics; what it accepts it reads field for field out
// of the string (rejoining the fields gives the key back), CheckKey accepts only keys it
// parses, and a native key FromNative accepts names the same fields in the raw-block shape.
func FuzzKeyShape(f *testing.F) {
	for _, c := range shapeTable {
		f.Add(c.enc)
	}
	for _, s := range []string{"m@0x@00", "m@0x0@@", "@@@@", "m@0x00000000@00ff@", "%zz@0x1@00", "m@00000000@0@00@s@t", "m@0x8000000000000000@00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fs, ok := splitKey(s)
		k := RawKey(s)
		p, pok := k.Parts()
		if !ok {
			if pok || k.CacheSalt() != "" || k.Shape() != ShapeOpaque {
				t.Fatalf("%q: splitKey refuses, Parts %v salt %q", s, pok, k.CacheSalt())
			}
			if CheckKey(s, NamespaceObject) == nil {
				t.Fatalf("%q: CheckKey accepts a key of no shape", s)
			}
			return
		}
		re := fs.model + "@"
		if fs.shape != ShapeNative {
			re += "0x"
		}
		re += fs.rank + "@"
		if fs.shape != ShapeRawBlock {
			re += fs.group + "@"
		}
		re += fs.hash
		if fs.hasSalt {
			re += "@" + fs.salt
		}
		if re != s {
			t.Fatalf("%q: fields rejoin as %q", s, re)
		}
		if pok && (p.KVRank != fs.rankVal || p.Group != fs.groupVal || p.CacheSalt != fs.salt || p.Shape != fs.shape || p.KVRank > MaxKVRank) {
			t.Fatalf("%q: Parts %+v, fields %+v", s, p, fs)
		}
		if r, err := FromNative(s); err == nil {
			q, ok := r.Parts()
			if !ok || q.Shape != ShapeRawBlockGroup || q.Model != p.Model || q.KVRank != p.KVRank || q.Group != p.Group || q.CacheSalt != p.CacheSalt || string(q.ChunkHash) != string(p.ChunkHash) {
				t.Fatalf("%q: FromNative %q reads %+v", s, r.String(), q)
			}
		}
	})
}

// TestCheckKeyLegacyShapes: a legacy key from a user is LMCache's to_string() shape, whose
// fourth field LMCache reads with int(chunk_hash, 16) (third hostile battery 7: zz was
// stored, and an object-shaped key went into a legacy cache).
func TestCheckKeyLegacyShapes(t *testing.T) {
	for _, good := range []string{
		"vllm@1@0@1a2b@bfloat16", "m@1@0@-1@bf16", "m@8@3@0x1f@half@7", "fmt@model@1@0@beef",
	} {
		if err := CheckKey(good, NamespaceLegacy); err != nil {
			t.Errorf("CheckKey(%q) = %v", good, err)
		}
	}
	for _, bad := range []string{
		"m@1@0@zz@bf16",   // LMCache's int("zz", 16) raises
		"m@1@0@1a2b@",     // empty dtype
		"m@0x00000000@aa", // an object key's shape: three fields
		"m@1@0@1a2b",      // four fields
	} {
		if err := CheckKey(bad, NamespaceLegacy); !errors.Is(err, ErrKeyFormat) {
			t.Errorf("CheckKey(%q) = %v, want ErrKeyFormat", bad, err)
		}
	}
}
