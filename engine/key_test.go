package engine

import (
	"bytes"
	"errors"
	"testing"
)

// Golden vectors computed once with Python 3 (hashlib.blake2b(digest_size=8),
// urllib.parse.quote(safe=""), f"{rank:#010x}", bytes.hex()) — LMCache's key_codec recipe.
var objectGolden = []struct {
	model string
	rank  uint32
	hash  []byte
	salt  string
	enc   string
	id    uint64
}{
	{"my/model", 1, []byte{0xde, 0xad, 0xbe, 0xef}, "tenant", "my%2Fmodel@0x00000001@deadbeef@tenant", 0x595d2540f7f21808},
	{"meta-llama/Llama-3.1-8B", 0, seq32(), "", "meta-llama%2FLlama-3.1-8B@0x00000000@000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", 0x57f4cc1ab87d3a1b},
	{"Qwen/Qwen2.5 7B~x", 0x12345678, []byte{0x00, 0xff}, "a-b_c", "Qwen%2FQwen2.5%207B~x@0x12345678@00ff@a-b_c", 0xb372cba6fe8b10e7},
	{"模型/ü", 7, []byte{0x01}, "salt", "%E6%A8%A1%E5%9E%8B%2F%C3%BC@0x00000007@01@salt", 0x3c56d911a5c30ed4},
}

func seq32() []byte {
	b := make([]byte, 32)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

func TestObjectKeyMatchesLMCacheGolden(t *testing.T) {
	for _, g := range objectGolden {
		k := ObjectKey(g.model, g.rank, g.hash, g.salt)
		if k.String() != g.enc || k.Identity() != g.id {
			t.Errorf("ObjectKey(%q) = %q %#x, want %q %#x", g.model, k.String(), k.Identity(), g.enc, g.id)
		}
		p, ok := k.Parts()
		if !ok || p.Model != g.model || p.KVRank != uint64(g.rank) || p.CacheSalt != g.salt || string(p.ChunkHash) != string(g.hash) {
			t.Errorf("Parts(%q) = %+v %v", g.enc, p, ok)
		}
		if k.CacheSalt() != g.salt {
			t.Errorf("CacheSalt(%q) = %q", g.enc, k.CacheSalt())
		}
		if rk, _ := ParseKey(g.enc, NamespaceObject); rk != k {
			t.Errorf("ParseKey(%q) = %+v", g.enc, rk)
		}
	}
}

func TestParseKeyToleratesUnknownShapes(t *testing.T) {
	for _, c := range []struct {
		name, enc string
		parses    bool
	}{
		{"object-group variant", "m@0x00000000@1f@abcd@salt", true},
		{"-SEP- fork", "org-SEP-model@0x00000000@abcd", true},
		{"opaque", "anything at all", false},
		{"salt with @ stays opaque", "m@0x00000000@ab@s@t", false},
	} {
		k, err := ParseKey(c.enc, NamespaceObject)
		if err != nil || k.String() != c.enc || k.Identity() != objectIdentity(c.enc) {
			t.Errorf("%s: %v %+v", c.name, err, k)
		}
		if _, ok := k.Parts(); ok != c.parses {
			t.Errorf("%s: Parts ok = %v, want %v", c.name, ok, c.parses)
		}
	}
}

func TestLegacyKeyIdentityIsChunkHash(t *testing.T) {
	k, err := ParseKey("vllm@my-model@1@0@1a2b3c", NamespaceLegacy)
	if err != nil || k.Identity() != 0x1a2b3c {
		t.Fatalf("legacy parse = %+v %v", k, err)
	}
	if k2 := LegacyKey("vllm@my-model@1@0@1a2b3c", 0x1a2b3c); k2 != k {
		t.Fatalf("LegacyKey = %+v", k2)
	}
	if _, err := ParseKey("no-hash-here@zz", NamespaceLegacy); !errors.Is(err, ErrKeyFormat) {
		t.Fatalf("unparseable legacy key: %v", err)
	}
	if k.CacheSalt() != "" {
		t.Fatal("legacy keys have no salt")
	}
}

func TestCompactKeyEncodingRoundTrips(t *testing.T) {
	pre, salts := newInterner(), newInterner()
	for _, enc := range []string{
		"my%2Fmodel@0x00000001@deadbeef@tenant", "m@0x00000000@", "m@0x00000000@ab@s@t", "m@0x00000000@ABCD",
		"m@0x00000000@abc", "opaque", "", "a@b@00@", ObjectKey("x", 3, seq32(), "").String(),
	} {
		rec := encodeKey(nil, enc, pre, salts)
		if n := keyRecordLen(rec); n != len(rec) {
			t.Errorf("%q: record length %d, encoded %d", enc, n, len(rec))
		}
		got, ok := decodeKey(rec, pre.strs, salts.strs)
		if !ok || got != enc {
			t.Errorf("%q: decoded %q %v", enc, got, ok)
		}
		if !keyEqual(rec, enc, pre.strs, salts.strs) {
			t.Errorf("%q: keyEqual false", enc)
		}
		if keyEqual(rec, enc+"x", pre.strs, salts.strs) {
			t.Errorf("%q: keyEqual true for a longer key", enc)
		}
	}
}

// The word-at-a-time printableASCII agrees with the byte-at-a-time definition: every byte
// value at every position of strings of 1 to 19 bytes (a word, its tail, and both), over
// printable backgrounds at both ends of the range.
func TestPrintableASCIIWordAtATime(t *testing.T) {
	slow := func(s string) bool {
		for i := 0; i < len(s); i++ {
			if s[i] < 0x20 || s[i] >= 0x7f {
				return false
			}
		}
		return true
	}
	for n := 1; n < 20; n++ {
		for _, bg := range []byte{0x20, 'a', 0x7e} {
			b := bytes.Repeat([]byte{bg}, n)
			for pos := range n {
				for c := range 256 {
					b[pos] = byte(c)
					if got, want := printableASCII(string(b)), slow(string(b)); got != want {
						t.Fatalf("printableASCII(%q) = %v, want %v", b, got, want)
					}
				}
				b[pos] = bg
			}
		}
	}
	if !printableASCII("") {
		t.Fatal("the empty string has no unprintable byte")
	}
}

// BenchmarkPrintableASCII: the check recovery makes of every key it indexes, on an object
// key of LMCache's shape (a model name, a rank and a 32-byte hash in hex: 97 bytes).
func BenchmarkPrintableASCII(b *testing.B) {
	k := ObjectKey("meta-llama/Llama-3.1-8B", 3, seq32(), "").String()
	b.SetBytes(int64(len(k)))
	for b.Loop() {
		if !printableASCII(k) {
			b.Fatal("not printable")
		}
	}
}
