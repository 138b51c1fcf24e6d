package engine

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/crypto/blake2b"
)

// ObjectKey builds an object-namespace key exactly as LMCache's key_codec does:
// quote(model, safe="") + "@" + f"{kv_rank:#010x}" + "@" + chunk_hash.hex() [+ "@" + salt].
// Its identity is BLAKE2b (8-byte digest) of the UTF-8 string, read little-endian.
func ObjectKey(model string, kvRank uint32, chunkHash []byte, cacheSalt string) Key {
	var b strings.Builder
	b.Grow(len(model)*3 + 12 + 2*len(chunkHash) + 1 + len(cacheSalt))
	b.WriteString(pyQuote(model))
	b.WriteByte('@')
	b.WriteString(fmtRank(kvRank))
	b.WriteByte('@')
	b.WriteString(hex.EncodeToString(chunkHash))
	if cacheSalt != "" {
		b.WriteByte('@')
		b.WriteString(cacheSalt)
	}
	s := b.String()
	return Key{enc: s, id: objectIdentity(s), ns: NamespaceObject}
}

// LegacyKey is a legacy-namespace key: encoded is CacheEngineKey.to_string(), and the
// identity is the chunk hash masked to 64 bits.
func LegacyKey(encoded string, chunkHash uint64) Key {
	return Key{enc: encoded, id: chunkHash, ns: NamespaceLegacy}
}

// RawKey is an object-namespace key from an already encoded string of any shape.
func RawKey(encoded string) Key {
	return Key{enc: encoded, id: objectIdentity(encoded), ns: NamespaceObject}
}

// ParseKey rebuilds a Key from its encoded string. Object keys of any shape are accepted
// (the identity hashes the whole string). Legacy keys need the chunk hash: the last '@'
// field is parsed as hex (LMCache's "fmt@model@world@worker@hash" family); a key whose
// hash cannot be read returns ErrKeyFormat together with a key of identity 0.
func ParseKey(encoded string, ns Namespace) (Key, error) {
	switch ns {
	case NamespaceObject, "":
		return RawKey(encoded), nil
	case NamespaceLegacy:
		// LMCache's CacheEngineKey/LayerCacheEngineKey.to_string():
		// model@world_size@worker_id@{chunk_hash:x}@dtype[@layer_id][@tag%value...];
		// key_codec's identity is int(parts[3], 16) & 0xFFFF_FFFF_FFFF_FFFF.
		if id, ok := legacyChunkHash(encoded); ok {
			return LegacyKey(encoded, id), nil
		}
		// Older shapes ("fmt@model@world@worker@hash"): the hash is the last field.
		i := strings.LastIndexByte(encoded, '@')
		field := encoded[i+1:]
		field = strings.TrimPrefix(field, "0x")
		if v, err := strconv.ParseUint(field, 16, 64); err == nil && field != "" {
			return LegacyKey(encoded, v), nil
		}
		if v, err := strconv.ParseInt(encoded[i+1:], 10, 64); err == nil {
			return LegacyKey(encoded, uint64(v)), nil
		}
		return Key{enc: encoded, ns: NamespaceLegacy}, fmt.Errorf("%w: legacy key %q has no hex chunk hash in field 4 (model@world@worker@hash@dtype) nor in its last '@' field", ErrKeyFormat, encoded)
	}
	return Key{}, fmt.Errorf("%w: unknown namespace %q (use object or legacy)", ErrKeyFormat, ns)
}

// String returns the encoded key.
func (k Key) String() string { return k.enc }

// Identity returns the 64-bit slot identity.
func (k Key) Identity() uint64 { return k.id }

// Namespace returns the key's namespace.
func (k Key) Namespace() Namespace { return k.ns }

// IsZero reports whether k is the zero Key.
func (k Key) IsZero() bool { return k.enc == "" && k.id == 0 }

// Model returns the unquoted model name when the key parses.
func (k Key) Model() (string, bool) { p, ok := k.Parts(); return p.Model, ok }

// KVRank returns the kv rank when the key parses.
func (k Key) KVRank() (uint64, bool) { p, ok := k.Parts(); return p.KVRank, ok }

// CacheSalt returns the cache salt ("" when none, for legacy keys and keys of no object
// shape; the four-field rule is splitKey's).
func (k Key) CacheSalt() string {
	if k.ns == NamespaceLegacy {
		return ""
	}
	f, _ := splitKey(k.enc)
	return f.salt
}

func objectIdentity(s string) uint64 {
	x := idHashers.Get().(*idHasher)
	x.h.Reset()
	x.buf = append(x.buf[:0], s...)
	x.h.Write(x.buf)
	id := binary.LittleEndian.Uint64(x.h.Sum(x.sum[:0]))
	if cap(x.buf) <= 4<<10 { // a key is short; one that is not leaves its copy to the collector
		idHashers.Put(x)
	}
	return id
}

// idHasher is objectIdentity's BLAKE2b-64 state with room for the key's bytes and the sum,
// reused (idHashers): a fresh digest, the key's []byte and the sum were three allocations
// on every key a request named.
type idHasher struct {
	h   hash.Hash
	buf []byte
	sum [8]byte
}

var idHashers = sync.Pool{New: func() any {
	h, _ := blake2b.New(8, nil)
	return &idHasher{h: h}
}}

func fmtRank(r uint32) string {
	// Python f"{r:#010x}": "0x" + at least 8 hex digits.
	s := strconv.FormatUint(uint64(r), 16)
	if len(s) < 8 {
		s = strings.Repeat("0", 8-len(s)) + s
	}
	return "0x" + s
}

// pyQuote is urllib.parse.quote(s, safe=""): UTF-8 bytes, unreserved characters
// (A-Z a-z 0-9 _ . - ~) kept, everything else %XX in upper case.
// appendPyQuote appends pyQuote(s) to b.
func appendPyQuote(b []byte, s string) []byte {
	const hexd = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		if c := s[i]; unreserved(c) {
			b = append(b, c)
		} else {
			b = append(b, '%', hexd[c>>4], hexd[c&15])
		}
	}
	return b
}

func pyQuote(s string) string {
	safe := true
	for i := 0; i < len(s); i++ {
		if !unreserved(s[i]) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	const hexd = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) * 3)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if unreserved(c) {
			b.WriteByte(c)
		} else {
			b.WriteByte('%')
			b.WriteByte(hexd[c>>4])
			b.WriteByte(hexd[c&15])
		}
	}
	return b.String()
}

func unreserved(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-' || c == '~'
}

func pyUnquote(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s)+0 && i+2 <= len(s)-1 {
			v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil {
				return "", fmt.Errorf("%w: bad escape in %q", ErrKeyFormat, s)
			}
			b = append(b, byte(v))
			i += 2
			continue
		}
		if s[i] == '%' {
			return "", fmt.Errorf("%w: bad escape in %q", ErrKeyFormat, s)
		}
		b = append(b, s[i])
	}
	return string(b), nil
}

// legacyChunkHash reads the identity of a key in LMCache's CacheEngineKey shape
// model@world_size@worker_id@HEX@dtype[...]: world_size and worker_id are decimal, HEX is
// parsed as Python's int(HEX, 16) (sign, 0x prefix and '_' separators allowed, any width)
// and reduced to its low 64 bits in two's complement, as key_codec.encode_legacy_key does.
// Object keys never match: their second field is "0x%08x", not decimal.
func legacyChunkHash(encoded string) (uint64, bool) {
	f := strings.SplitN(encoded, "@", 6)
	if len(f) < 5 || !pyDecimal(f[1]) || !pyDecimal(f[2]) || f[4] == "" {
		return 0, false
	}
	return pyHexInt64(f[3])
}

func pyDecimal(s string) bool {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// pyHexInt64 is int(s, 16) & (2**64 - 1).
func pyHexInt64(s string) (uint64, bool) {
	s = strings.TrimSpace(s)
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		s = strings.TrimPrefix(s[2:], "_")
	}
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' || strings.Contains(s, "__") {
		return 0, false
	}
	var v uint64 // low 64 bits of the magnitude
	for i := 0; i < len(s); i++ {
		c := s[i]
		var d uint64
		switch {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = uint64(c-'A') + 10
		case c == '_':
			continue
		default:
			return 0, false
		}
		v = v<<4 | d
	}
	if neg {
		v = -v
	}
	return v, true
}

// keyText is the part of CheckKey every stored key meets, whoever wrote it: 1 to
// MaxKeyBytes bytes of valid UTF-8 without control characters. LMCache's keys are Python
// strings of that kind and rbctl's writers refuse others (RESP's binary keys are stored
// hex-encoded), so a key from a device that fails it is damage or forgery, and a user
// could neither type nor remove it; recovery leaves such keys out.
func keyText(encoded string) error {
	if n := len(encoded); n > 0 && n <= MaxKeyBytes && printableASCII(encoded) {
		return nil // every key an LMCache or rbctl writer makes: no decoding needed
	}
	switch {
	case encoded == "":
		return fmt.Errorf("%w: empty key", ErrKeyFormat)
	case len(encoded) > MaxKeyBytes:
		return fmt.Errorf("%w: key of %d bytes is longer than %d", ErrKeyFormat, len(encoded), MaxKeyBytes)
	case !utf8.ValidString(encoded):
		return fmt.Errorf("%w: key is not valid UTF-8", ErrKeyFormat)
	}
	for i, c := range encoded {
		if c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) {
			return fmt.Errorf("%w: key has control character %U at byte %d", ErrKeyFormat, c, i)
		}
	}
	return nil
}

func printableASCII(s string) bool {
	// Eight bytes at a time (recovery asks this of every key it indexes): a word has a byte
	// below 0x20 iff (w - 0x20…) & ^w & 0x80… is not zero, and a byte above 0x7e iff
	// ((w + 0x01…) | w) & 0x80… is not zero (the "hasless" and "hasmore" tests: exact for
	// whether any byte qualifies, though not for which).
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if ((w-0x20*ones)&^w|(w+ones)|w)&highs != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return true
}

// MaxKeyBytes is the longest encoded key the engine stores (the compact checkpoint's length
// field is 16 bits).
const MaxKeyBytes = 65535

// CheckKey validates an encoded key against its namespace's grammar, for keys that come from
// a user rather than from a device: valid UTF-8, no control characters, at most MaxKeyBytes,
// and for the object namespace one of LMCache's shapes (KeyShape: quote(model)@0xRANK@HASH[@salt],
// quote(model)@0xRANK@GROUP@HASH[@salt], model@RANK@GROUP@HASH[@salt]; RANK and GROUP hex up
// to int64, HASH even-length hex) with a model, a hash and no empty salt field; for legacy,
// at least five fields, the fourth a hex chunk hash when the second and third are LMCache's
// world_size and worker_id (model@world_size@worker_id@chunk_hash@dtype), else a chunk hash
// ParseKey reads (older shapes: the last field).
func CheckKey(encoded string, ns Namespace) error {
	if err := keyText(encoded); err != nil {
		return err
	}
	switch ns {
	case NamespaceObject, "":
		p, ok := RawKey(encoded).Parts()
		switch {
		case !ok:
			return fmt.Errorf("%w: object key %q is not one of LMCache's shapes: quote(model)@0xRANK@[GROUP@]HASH[@salt] "+
				"(raw-block codec) or model@RANK@GROUP@HASH[@salt] (native connectors); RANK and GROUP hex up to 2^63-1, HASH even-length hex", ErrKeyFormat, encoded)
		case p.Model == "" || len(p.ChunkHash) == 0:
			return fmt.Errorf("%w: object key %q has an empty model or chunk hash", ErrKeyFormat, encoded)
		case strings.HasSuffix(encoded, "@"):
			return fmt.Errorf("%w: object key %q ends in an empty cache_salt (leave out the last '@')", ErrKeyFormat, encoded)
		}
		return nil
	case NamespaceLegacy:
		f := strings.SplitN(encoded, "@", 6)
		switch {
		case len(f) < 5:
			return fmt.Errorf("%w: legacy key %q has %d '@' fields; LMCache's legacy keys have at least five (model@world_size@worker_id@chunk_hash@dtype)", ErrKeyFormat, encoded, len(f))
		case pyDecimal(f[1]) && pyDecimal(f[2]):
			// model@world_size@worker_id@chunk_hash@dtype: LMCache reads int(chunk_hash, 16).
			if _, ok := legacyChunkHash(encoded); !ok {
				return fmt.Errorf("%w: legacy key %q: chunk hash %q (field 4) is not hex, as LMCache's int(chunk_hash, 16) reads it, or dtype (field 5) is empty", ErrKeyFormat, encoded, f[3])
			}
			return nil
		}
		_, err := ParseKey(encoded, ns)
		return err
	}
	return fmt.Errorf("%w: unknown namespace %q (use object or legacy)", ErrKeyFormat, ns)
}

// CheckSalt validates a cache_salt given by a user: LMCache does not quote it, so it may not
// contain '@', and it may not hold control characters.
func CheckSalt(salt string) error {
	if !utf8.ValidString(salt) {
		return fmt.Errorf("%w: cache_salt is not valid UTF-8", ErrKeyFormat)
	}
	for _, c := range salt {
		switch {
		case c == '@':
			return fmt.Errorf("%w: cache_salt %q contains '@' (LMCache cannot decode such a key)", ErrKeyFormat, salt)
		case c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0):
			return fmt.Errorf("%w: cache_salt has control character %U", ErrKeyFormat, c)
		}
	}
	return nil
}

func isHexField(s string) bool {
	if s == "" {
		return false
	}
	// One table load and OR a byte, no branch: recovery splits every key of a checkpoint
	// (a million 64-digit chunk hashes and more).
	var bad uint8
	for i := 0; i < len(s); i++ {
		bad |= anyHexval[s[i]]
	}
	return bad == 0
}

// anyHexval is 0 for a hex digit of either case, 1 for every other byte.
var anyHexval = func() (t [256]uint8) {
	for i := range t {
		c := byte(i)
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			t[i] = 1
		}
	}
	return
}()
