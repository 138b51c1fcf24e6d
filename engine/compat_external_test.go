package engine

// External compatibility vectors. Every constant below was produced by running LMCache's own
// raw-block code (lmcache/v1/storage_backend/raw_block core.py @018b4426, key_codec.py
// @3f45a9ad, lmcache/utils.py CacheEngineKey @0353be82) on the state described next to it,
// and then written down here by hand as plain bytes. No LMCache code or image is part of
// this repository; docs/compat.md says how to regenerate and re-check the vectors.

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
)

// extPayload is the deterministic payload used on both sides: byte j of key i is
// ((i*131 + j*7) ^ (j>>8)) & 0xff.
// golden is a checkpoint payload as LMCache (or Python's json.dumps) wrote it, kept byte for
// byte in testdata/lmcache (docs/compat.md).
func golden(name string) string {
	b, err := os.ReadFile(filepath.Join("testdata", "lmcache", name))
	if err != nil {
		panic(err)
	}
	return string(b)
}

func extPayload(i, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(((i*131 + j*7) ^ (j >> 8)) & 0xff)
	}
	return b
}

func extSeq(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Object keys: LMCache encode_object_key(ObjectKey(chunk_hash, model_name, kv_rank, cache_salt)).
var extObjectKeys = []struct {
	model string
	rank  uint32
	hash  string
	salt  string
	enc   string
	id    uint64
}{
	{"a b", 0, "01", "", "a%20b@0x00000000@01", 0xffea0e8885458a27},
	{"100%/x", 1, "ff00", "t@n", "100%25%2Fx@0x00000001@ff00@t@n", 0xec689ca75199a56f},
	{"ü/模型", 2, "", "é", "%C3%BC%2F%E6%A8%A1%E5%9E%8B@0x00000002@@é", 0xad35a3b52643adb3},
	{"~safe-_.", 0xffffffff, "000102030405060708090a0b0c0d0e0f", "", "~safe-_.@0xffffffff@000102030405060708090a0b0c0d0e0f", 0xd4cb9e3c77499aa1},
	{"", 0, "00", "x y%z", "@0x00000000@00@x y%z", 0x3d6827915cfd2cba},
	{"a+b=c&d?e#f", 0x10, "ab", "salt", "a%2Bb%3Dc%26d%3Fe%23f@0x00000010@ab@salt", 0x8b8a606994c31332},
	{"meta-llama/Llama-3.1-8B", 0, "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", "", "meta-llama%2FLlama-3.1-8B@0x00000000@000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", 0x57f4cc1ab87d3a1b},
	{"meta-llama/Llama-3.1-8B", 1, "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", "tenant-a", "meta-llama%2FLlama-3.1-8B@0x00000001@000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f@tenant-a", 0xe79b1e8023bc3b2f},
	{"Qwen/Qwen2.5 7B", 3, "00ff10", "", "Qwen%2FQwen2.5%207B@0x00000003@00ff10", 0x19d5becc790d0d93},
	{"weird%name/ü模型", 0x12345678, "deadbeefcafebabe", "s@lt", "weird%25name%2F%C3%BC%E6%A8%A1%E5%9E%8B@0x12345678@deadbeefcafebabe@s@lt", 0x23a0dc705a0da52e},
	{"org/model", 7, "0123456789abcdef0123456789abcdef", "salt with space", "org%2Fmodel@0x00000007@0123456789abcdef0123456789abcdef@salt with space", 0xb377a93c9353d3a0},
}

func TestExternalObjectKeyCodec(t *testing.T) {
	for _, g := range extObjectKeys {
		k := ObjectKey(g.model, g.rank, mustHex(t, g.hash), g.salt)
		if k.String() != g.enc || k.Identity() != g.id {
			t.Errorf("ObjectKey(%q, %#x, %s, %q) = %q %016x; LMCache: %q %016x", g.model, g.rank, g.hash, g.salt, k.String(), k.Identity(), g.enc, g.id)
		}
		if rk, err := ParseKey(g.enc, NamespaceObject); err != nil || rk.Identity() != g.id {
			t.Errorf("ParseKey(%q) identity %016x, %v; want %016x", g.enc, rk.Identity(), err, g.id)
		}
	}
}

// Legacy keys: LMCache encode_legacy_key(CacheEngineKey/LayerCacheEngineKey) — the encoded
// string is to_string() and the identity int(chunk_hash) & (2**64-1).
var extLegacyKeys = []struct {
	enc string
	id  uint64
}{
	{"meta-llama/Llama-3.1-8B@4@1@1234567890abcdef12@bfloat16", 0x34567890abcdef12}, // 72-bit hash, masked
	{"m@1@0@-5@half@user%bob", 0xfffffffffffffffb},                                  // negative hash, tag
	{"m/x@2@1@abc@half@3", 0xabc},                                                   // LayerCacheEngineKey, layer 3
	{"m@1@0@7@float", 0x7},
}

func TestExternalLegacyKeyIdentity(t *testing.T) {

	for _, g := range extLegacyKeys {
		k, err := ParseKey(g.enc, NamespaceLegacy)
		if err != nil || k.Identity() != g.id {
			t.Errorf("ParseKey(%q, legacy) = %016x, %v; LMCache identity %016x", g.enc, k.Identity(), err, g.id)
		}
	}
}

// Slot headers as LMCache's _encode_header writes them (first 32 of 4096 bytes; the rest is 0).
var extSlotHeaders = []struct {
	key  int // index into the extImage keys
	head string
}{
	{0, "4c4d43424c4b30311b3a7db81accf457409c0000000000000000000000000000"},
	{1, "4c4d43424c4b30312f3bbc23801e9be700f00000000000000000000000000000"},
	{2, "4c4d43424c4b3031930d0d79ccbed51901000000000000000000000000000000"},
	{3, "4c4d43424c4b30312ea50d5a70dca02388130000000000000000000000000000"},
	{4, "4c4d43424c4b3031a0d353933ca977b300100000000000000000000000000000"},
}

// extImage is the state LMCache produced: a 16 MiB device, 64 KiB slots, 1 MiB metadata;
// put_many of keys 0..5 (keys 0, 1, 4 with metadata shape [2,4,n/8], dtype half or bfloat16,
// fmt KV_2LTD, cached_positions [0,1,2,255]), delete_many(key 5), close().
var extImageKeys = []struct {
	key  int // index into extObjectKeys, -1 = "delete/me"
	size int
	meta *ObjMeta
}{
	{6, 40000, &ObjMeta{Shape: []int{2, 4, 5000}, Dtype: "half", Fmt: "KV_2LTD", CachedPositions: []int{0, 1, 2, 255}}},
	{7, 61440, &ObjMeta{Shape: []int{2, 4, 7680}, Dtype: "bfloat16", Fmt: "KV_2LTD", CachedPositions: []int{0, 1, 2, 255}}},
	{8, 1, nil},
	{9, 5000, nil},
	{10, 4096, &ObjMeta{Shape: []int{2, 4, 512}, Dtype: "half", Fmt: "KV_2LTD", CachedPositions: []int{0, 1, 2, 255}}},
	{-1, 100, nil},
}

const extDevicePath = "/tmp/h7/dev/nvme0n1"

// extImageJSON is LMCache's final checkpoint payload for extImage (seq 1, container 0).
var extImageJSON = golden("object-image.json")

// extImageContainer is LMCache's container 0 header for extImageJSON: struct "<8sIQQI".
const extImageContainer = "4c4d4349445830310100000001000000000000009e04000000000000f8df4bdb"

func extConfig() Config {
	c := DefaultConfig()
	c.SlotBytes = 64 << 10
	c.MetaTotalBytes = 1 << 20
	c.Periodic = false
	c.CheckpointFormat = CheckpointLMCacheV1
	return c
}

func extKey(t *testing.T, i int) Key {
	if i < 0 {
		return ObjectKey("delete/me", 0, []byte{0xaa}, "")
	}
	g := extObjectKeys[i]
	return ObjectKey(g.model, g.rank, mustHex(t, g.hash), g.salt)
}

// lmcacheSlotHeader is LMCache's _encode_header: magic, identity, length, zeroes.
func lmcacheSlotHeader(b []byte, id uint64, n int) {
	clear(b)
	copy(b, "LMCBLK01")
	binary.LittleEndian.PutUint64(b[8:], id)
	binary.LittleEndian.PutUint64(b[16:], uint64(n))
}

func TestExternalHeaderBytes(t *testing.T) {
	// Container header: rbctl's encoder gives LMCache's 32 bytes for the same fields.
	want := mustHex(t, extImageContainer)
	var h containerHeader
	copy(h.Magic[:], "LMCIDX01")
	h.Version, h.Seq, h.Len, h.CRC = 1, 1, uint64(len(extImageJSON)), crc32.ChecksumIEEE([]byte(extImageJSON))
	got := make([]byte, 4096)
	encodeContainerHeader(got, h)
	if !bytes.Equal(got[:32], want) || !allZero(got[32:]) {
		t.Fatalf("container header\n got %x\nwant %x", got[:32], want)
	}
	// Slot headers: without the checksum extension rbctl's header is LMCache's, byte for byte.
	for _, sh := range extSlotHeaders {
		ik := extImageKeys[sh.key]
		k := extKey(t, ik.key)
		got := make([]byte, 4096)
		encodeSlotHeader(got, slotHeader{Identity: k.Identity(), Len: uint64(ik.size)})
		if w := mustHex(t, sh.head); !bytes.Equal(got[:32], w) || !allZero(got[32:]) {
			t.Errorf("slot header of %s\n got %x\nwant %x", k, got[:32], w)
		}
		// And rbctl decodes LMCache's header (no checksum tag) to the same fields.
		d, err := decodeSlotHeader(mustHex(t, sh.head))
		if err != nil || d.Identity != k.Identity() || d.Len != uint64(ik.size) || d.HasCRC {
			t.Errorf("decode %s: %+v %v", sh.head, d, err)
		}
	}
}

// TestExternalV1CheckpointBytes: rbctl reaching LMCache's state writes LMCache's JSON exactly.
func TestExternalV1CheckpointBytes(t *testing.T) {
	m := blockdev.NewMem(16<<20, 0)
	c := extConfig()
	c.DevicePath = extDevicePath
	e, err := Format(m, c)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]Key, len(extImageKeys))
	payloads := make([][]byte, len(extImageKeys))
	metas := make([]*ObjMeta, len(extImageKeys))
	for i, ik := range extImageKeys {
		keys[i], payloads[i], metas[i] = extKey(t, ik.key), extPayload(i, ik.size), ik.meta
	}
	if _, err := e.PutManyMeta(keys, payloads, metas); err != nil {
		t.Fatal(err)
	}
	if got := e.DeleteMany(keys[5:], false); !got[0] {
		t.Fatal("delete failed")
	}
	if err := e.CheckpointNow(); err != nil {
		t.Fatal(err)
	}
	e.CloseNoCheckpoint()
	if got := containerPayload(t, m, c, 1); string(got) != extImageJSON {
		t.Fatalf("v1 checkpoint differs from LMCache's:\n got %s\nwant %s", got, extImageJSON)
	}
	for _, sh := range extSlotHeaders {
		off := c.MetaTotalBytes + int64(sh.key)*c.SlotBytes
		if got := m.Bytes()[off : off+24]; !bytes.Equal(got, mustHex(t, sh.head)[:24]) {
			t.Errorf("slot %d header bytes 0..24 = %x, LMCache %s", sh.key, got, sh.head[:48])
		}
	}
}

// buildLMCacheImage lays out on m what LMCache leaves on a device: container 0 with the
// given JSON at seq 1, every slot header and payload (deleted slots keep theirs).
func buildLMCacheImage(t *testing.T, m *blockdev.Mem, json string, slots []struct {
	id   uint64
	data []byte
}) {
	t.Helper()
	b := m.Bytes()
	var h containerHeader
	copy(h.Magic[:], "LMCIDX01")
	h.Version, h.Seq, h.Len, h.CRC = 1, 1, uint64(len(json)), crc32.ChecksumIEEE([]byte(json))
	encodeContainerHeader(b[:4096], h)
	copy(b[4096:], json)
	for i, s := range slots {
		off := (1 << 20) + i*(64<<10)
		lmcacheSlotHeader(b[off:off+4096], s.id, len(s.data))
		copy(b[off+4096:], s.data)
	}
}

func TestExternalReadsLMCacheObjectImage(t *testing.T) {
	m := blockdev.NewMem(16<<20, 0)
	var slots []struct {
		id   uint64
		data []byte
	}
	for i, ik := range extImageKeys {
		slots = append(slots, struct {
			id   uint64
			data []byte
		}{extKey(t, ik.key).Identity(), extPayload(i, ik.size)})
	}
	buildLMCacheImage(t, m, extImageJSON, slots)
	if h := m.Bytes()[:32]; !bytes.Equal(h, mustHex(t, extImageContainer)) {
		t.Fatalf("built container header %x", h)
	}
	cfg, err := DetectConfig(m)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Namespace != NamespaceObject || cfg.CheckpointFormat != CheckpointLMCacheV1 || cfg.SlotBytes != 64<<10 || cfg.MetaTotalBytes != 1<<20 {
		t.Fatalf("detected %+v", cfg)
	}
	cfg.VerifyOnLoad, cfg.ReadOnly, cfg.Periodic = true, true, false
	e, err := Open(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r := e.Stats().Recovery
	if r.Loaded != 5 || r.Kept != 5 || len(r.Dropped) != 0 || r.NextSlot != 6 || r.FreeSlots != 1 {
		t.Fatalf("recovery %+v", r)
	}
	for i, ik := range extImageKeys[:5] {
		k := extKey(t, ik.key)
		em, ok := e.Lookup(k)
		if !ok || em.Size != ik.size || em.Offset != (1<<20)+int64(i)*(64<<10) {
			t.Fatalf("%s: %+v %v", k, em, ok)
		}
		if ik.meta != nil && (em.Dtype != ik.meta.Dtype || em.Fmt != ik.meta.Fmt || len(em.Shape) != 3 || em.Shape[2] != ik.meta.Shape[2]) {
			t.Errorf("%s: metadata %+v", k, em)
		}
		buf := make([]byte, ik.size)
		got, err := e.LoadManyInto([]Key{k}, [][]byte{buf})
		if err != nil || !got[0] || !bytes.Equal(buf, extPayload(i, ik.size)) {
			t.Fatalf("%s: load %v %v", k, got, err)
		}
	}
	if _, ok := e.Lookup(extKey(t, -1)); ok {
		t.Fatal("deleted key came back from its still-valid slot header")
	}
}

// extLegacyJSON is LMCache's checkpoint for a legacy-namespace core: put_many of the four
// extLegacyKeys (payload sizes 3000, 4000, 5000, 6000; fmt KV_2LTD, dtype of the key), close().
var extLegacyJSON = golden("legacy-image.json")

const extLegacyContainer = "4c4d434944583031010000000100000000000000070300000000000038d6e946"

func TestExternalReadsLMCacheLegacyImage(t *testing.T) {

	m := blockdev.NewMem(16<<20, 0)
	var slots []struct {
		id   uint64
		data []byte
	}
	for i, g := range extLegacyKeys {
		slots = append(slots, struct {
			id   uint64
			data []byte
		}{g.id, extPayload(i, 3000+i*1000)})
	}
	buildLMCacheImage(t, m, extLegacyJSON, slots)
	if h := m.Bytes()[:32]; !bytes.Equal(h, mustHex(t, extLegacyContainer)) {
		t.Fatalf("built container header %x", h)
	}
	cfg, err := DetectConfig(m)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Namespace != NamespaceLegacy {
		t.Fatalf("a v1 checkpoint of legacy keys was detected as namespace %q", cfg.Namespace)
	}
	cfg.VerifyOnLoad, cfg.ReadOnly, cfg.Periodic = true, true, false
	e, err := Open(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if r := e.Stats().Recovery; r.Loaded != 4 || r.Kept != 4 || len(r.Dropped) != 0 {
		t.Fatalf("recovery %+v", r)
	}
	for i, g := range extLegacyKeys {
		k, err := ParseKey(g.enc, NamespaceLegacy)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 3000+i*1000)
		got, err := e.LoadManyInto([]Key{k}, [][]byte{buf})
		if err != nil || !got[0] || !bytes.Equal(buf, extPayload(i, len(buf))) {
			t.Fatalf("%s: load %v %v", g.enc, got, err)
		}
	}
}

// A stale legacy slot (header identity of another chunk) must be dropped, not adopted.
func TestExternalLegacyStaleSlotDropped(t *testing.T) {

	m := blockdev.NewMem(16<<20, 0)
	var slots []struct {
		id   uint64
		data []byte
	}
	for i, g := range extLegacyKeys {
		id := g.id
		if i == 0 {
			id = 0x1111 // slot 0 was reused by another chunk after the checkpoint
		}
		slots = append(slots, struct {
			id   uint64
			data []byte
		}{id, extPayload(i, 3000+i*1000)})
	}
	buildLMCacheImage(t, m, extLegacyJSON, slots)
	cfg, err := DetectConfig(m)
	if err != nil {
		t.Fatal(err)
	}
	cfg.VerifyOnLoad, cfg.ReadOnly, cfg.Periodic = true, true, false
	e, err := Open(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r := e.Stats().Recovery
	if r.Kept != 3 || len(r.Dropped) != 1 || r.Dropped[0].Key != extLegacyKeys[0].enc {
		t.Fatalf("recovery %+v", r)
	}
}

// Python json.dumps(s, ensure_ascii=True) for awkward strings.
func TestExternalJSONStringEscapes(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`a"b\c`, `"a\"b\\c"`},
		{"\x00\x01\x1f\x7f", `"\u0000\u0001\u001f\u007f"`},
		{"tab\tnl\nbs\bff\fcr\r", `"tab\tnl\nbs\bff\fcr\r"`},
		{"é😀\u2028/<>&'", `"\u00e9\ud83d\ude00\u2028/<>&'"`},
	} {
		if got := string(appendJSONString(nil, c.in)); got != c.want {
			t.Errorf("appendJSONString(%q) = %s, Python: %s", c.in, got, c.want)
		}
	}
}

// An empty legacy-namespace v1 cache must reopen as legacy, so that the first put writes the
// chunk hash (LMCache's legacy identity) into the slot header, not BLAKE2b of the key.
func TestExternalEmptyLegacyV1KeepsNamespace(t *testing.T) {
	m := blockdev.NewMem(16<<20, 0)
	c := extConfig()
	c.Namespace = NamespaceLegacy
	e, err := Format(m, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	cfg, err := DetectConfig(m.Reopen())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Namespace != NamespaceLegacy {
		t.Fatalf("empty legacy v1 cache reopened as %q", cfg.Namespace)
	}
	cfg.Periodic = false
	e, err = Open(m.Reopen(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParseKey(extLegacyKeys[2].enc, cfg.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.PutMany([]Key{k}, [][]byte{extPayload(2, 5000)}); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if id := binary.LittleEndian.Uint64(m.Bytes()[(1<<20)+8:]); id != extLegacyKeys[2].id {
		t.Fatalf("slot header identity %016x, LMCache expects %016x", id, extLegacyKeys[2].id)
	}
}

// extEscapedJSON is LMCache's checkpoint for four object keys whose cache_salt needs JSON
// escapes (é, ü😀, a quote and backslash, a tab): device_path "u.img", payload sizes 10..13.
var extEscapedJSON = golden("escaped-salts.json")

func TestExternalDecodesEscapedKeys(t *testing.T) {
	want := []struct {
		salt string
		id   uint64
	}{{"é", 0xf7a6aa01b44fdec9}, {"ü😀", 0x03e3637e82ee6b36}, {`q"uo\te`, 0xfb204d945dca5d92}, {"tab\there", 0x23a8502f6df7dee8}}
	st, err := decodeCheckpoint([]byte(extEscapedJSON))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.entries) != len(want) {
		t.Fatalf("%d entries", len(st.entries))
	}
	for i, w := range want {
		k := ObjectKey("m", 0, []byte{1}, w.salt)
		if st.entries[i].key != k.String() || k.Identity() != w.id || st.entries[i].size != int64(10+i) {
			t.Errorf("entry %d: key %q size %d; want %q (identity %016x, LMCache %016x)", i, st.entries[i].key, st.entries[i].size, k.String(), k.Identity(), w.id)
		}
	}
	// Encoding each key gives LMCache's escaped text back.
	for _, w := range want {
		enc := appendJSONString(nil, ObjectKey("m", 0, []byte{1}, w.salt).String())
		if !bytes.Contains([]byte(extEscapedJSON), append(enc, ':', '{')) {
			t.Errorf("encoded key %s is not in LMCache's JSON", enc)
		}
	}
}

// Python int(s, 16) & (2**64-1), the legacy identity rule, on awkward hash fields.
func TestExternalPythonHexInt(t *testing.T) {
	for _, c := range []struct {
		in string
		v  uint64
		ok bool
	}{
		{"0x_ab", 0xab, true}, {"_ab", 0, false}, {"a__b", 0, false}, {"ab_", 0, false},
		{" ab ", 0xab, true}, {"-0x10", 0xfffffffffffffff0, true}, {"", 0, false}, {"0x", 0, false},
		{"+FF", 0xff, true}, {"1_0", 0x10, true}, {"ffffffffffffffffff", 0xffffffffffffffff, true},
		{"-ffffffffffffffffff", 1, true}, {"0X1", 1, true}, {"g1", 0, false}, {"-", 0, false},
	} {
		v, ok := pyHexInt64(c.in)
		if ok != c.ok || v != c.v {
			t.Errorf("pyHexInt64(%q) = %016x %v, Python %016x %v", c.in, v, ok, c.v, c.ok)
		}
	}
}
