package engine

import (
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// KeyShape is which of LMCache's object-key spellings an encoded key is in. Every spelling
// names the same ObjectKey fields (model, kv_rank, object_group_id, chunk_hash, cache_salt);
// the slot identity is still the BLAKE2b-64 of the whole string, so a stored key is never
// re-spelled: the shape only tells how to read its fields.
type KeyShape uint8

const (
	// ShapeOpaque: no LMCache object-key shape; the key is a string and nothing more.
	ShapeOpaque KeyShape = iota
	// ShapeRawBlock: LMCache's raw-block key_codec before object_group_id (@3f45a9ad):
	// quote(model)@0x%08x@hash[@salt].
	ShapeRawBlock
	// ShapeRawBlockGroup: the raw-block key_codec with object_group_id:
	// quote(model)@0x%08x@%x(group)@hash[@salt].
	ShapeRawBlockGroup
	// ShapeNative: the native-connector / L2 object name (_object_key_to_string):
	// model@%08x(rank)@%x(group)@hash[@salt], model not quoted, rank without 0x.
	ShapeNative
)

var shapeNames = [...]string{"opaque", "raw-block", "raw-block-group", "native"}

func (s KeyShape) String() string {
	if int(s) < len(shapeNames) {
		return shapeNames[s]
	}
	return fmt.Sprintf("shape(%d)", uint8(s))
}

// MaxKVRank is the largest kv_rank a key may carry: LMCache packs
// ws<<24 | gr<<16 | lws<<8 | lr without masking into a Python int that its P2P proto and
// controller carry as int64, so a world of 256 or more gives ranks of 9+ hex digits.
const MaxKVRank = math.MaxInt64

// keyFields is an object key split into its fields without decoding them (no allocation).
type keyFields struct {
	shape              KeyShape
	model, rank, group string // model as spelled (quoted in the raw-block shapes); rank without "0x"
	hash, salt         string
	rankVal, groupVal  uint64
	hasSalt            bool
}

// splitKey reads an object key's fields. The rule for four fields follows LMCache's own
// decoders: the raw-block decoder with object groups (the current one) reads
// model@0xRANK@GROUP@HASH and refuses anything else; the decoder before it read
// model@0xRANK@HASH@SALT. A four-field key is therefore read as GROUP@HASH whenever both
// decode (GROUP as int(x, 16), HASH as bytes.fromhex), exactly as current LMCache reads it,
// and as HASH@SALT only when they do not (a key only the older LMCache can have written,
// which the current decoder refuses). Three fields are always model@0xRANK@HASH; five
// always model@0xRANK@GROUP@HASH@SALT. A rank without "0x" is the native-connector
// spelling, which always has the group (four or five fields) and writes the rank as %08x.
func splitKey(s string) (keyFields, bool) {
	var f [5]string
	n := 0
	for {
		i := strings.IndexByte(s, '@')
		if i < 0 {
			if n >= 5 {
				return keyFields{}, false
			}
			f[n] = s
			n++
			break
		}
		if n >= 4 {
			return keyFields{}, false
		}
		f[n] = s[:i]
		n++
		s = s[i+1:]
	}
	if n < 3 {
		return keyFields{}, false
	}
	k := keyFields{model: f[0]}
	if r, ok := strings.CutPrefix(f[1], "0x"); ok {
		v, ok := hexInt(r)
		if !ok {
			return keyFields{}, false
		}
		k.rank, k.rankVal = r, v
		switch n {
		case 3:
			k.shape, k.hash = ShapeRawBlock, f[2]
		case 4:
			if g, ok := hexInt(f[2]); ok && hexBytes(f[3]) {
				k.shape, k.group, k.groupVal, k.hash = ShapeRawBlockGroup, f[2], g, f[3]
			} else {
				k.shape, k.hash, k.salt, k.hasSalt = ShapeRawBlock, f[2], f[3], true
			}
		case 5:
			g, ok := hexInt(f[2])
			if !ok {
				return keyFields{}, false
			}
			k.shape, k.group, k.groupVal, k.hash, k.salt, k.hasSalt = ShapeRawBlockGroup, f[2], g, f[3], f[4], true
		}
		if !hexBytes(k.hash) {
			return keyFields{}, false
		}
		return k, true
	}
	if n < 4 || len(f[1]) < 8 {
		return keyFields{}, false
	}
	v, ok := hexInt(f[1])
	g, ok2 := hexInt(f[2])
	if !ok || !ok2 || !hexBytes(f[3]) {
		return keyFields{}, false
	}
	k.shape, k.rank, k.rankVal, k.group, k.groupVal, k.hash = ShapeNative, f[1], v, f[2], g, f[3]
	if n == 5 {
		k.salt, k.hasSalt = f[4], true
	}
	return k, true
}

// hexInt reads hex digits (either case, at least one; leading zeros of any number, as
// Python's int(s, 16) reads them) as a value up to MaxInt64.
func hexInt(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	t := strings.TrimLeft(s, "0")
	if t == "" {
		return 0, true
	}
	if len(t) > 16 || !isHexField(t) { // too long first: a 64-digit chunk hash is no group
		return 0, false
	}
	v, err := strconv.ParseUint(t, 16, 64)
	if err != nil || v > MaxKVRank {
		return 0, false
	}
	return v, true
}

// hexBytes reports whether s is what bytes.fromhex reads back (pairs of hex digits; the
// empty string is the empty hash).
func hexBytes(s string) bool { return len(s)%2 == 0 && (s == "" || isHexField(s)) }

// ObjectParts is an object key split into its fields.
type ObjectParts struct {
	Shape     KeyShape
	Model     string // unquoted (the native spelling is not quoted)
	KVRank    uint64 // at most MaxKVRank
	Group     uint64 // object_group_id; 0 in ShapeRawBlock, which has no group field
	ChunkHash []byte
	CacheSalt string
}

// Parts parses an object key of any of LMCache's shapes (KeyShape; the four-field rule is
// splitKey's). Keys of no shape return false: they stay opaque strings.
func (k Key) Parts() (ObjectParts, bool) {
	if k.ns == NamespaceLegacy {
		return ObjectParts{}, false
	}
	f, ok := splitKey(k.enc)
	if !ok {
		return ObjectParts{}, false
	}
	model := f.model
	if f.shape != ShapeNative {
		var err error
		if model, err = pyUnquote(model); err != nil {
			return ObjectParts{}, false
		}
	}
	h, err := hex.DecodeString(f.hash)
	if err != nil {
		return ObjectParts{}, false
	}
	return ObjectParts{Shape: f.shape, Model: model, KVRank: f.rankVal, Group: f.groupVal, ChunkHash: h, CacheSalt: f.salt}, true
}

// Shape returns the key's shape (ShapeOpaque for legacy keys and keys of no object shape).
func (k Key) Shape() KeyShape {
	if k.ns == NamespaceLegacy {
		return ShapeOpaque
	}
	f, _ := splitKey(k.enc)
	return f.shape
}

// ObjectGroupKey builds a key in the raw-block codec's object-group shape, as LMCache's
// current key_codec writes it: quote(model)@f"{kv_rank:#010x}"@f"{group:x}"@hash[@salt].
func ObjectGroupKey(model string, kvRank, group uint64, chunkHash []byte, cacheSalt string) Key {
	s := pyQuote(model) + "@" + fmtRank64(kvRank) + "@" + strconv.FormatUint(group, 16) + "@" + hex.EncodeToString(chunkHash)
	if cacheSalt != "" {
		s += "@" + cacheSalt
	}
	return Key{enc: s, id: objectIdentity(s), ns: NamespaceObject}
}

// ObjectKeyOf builds the key of p in p.Shape (ShapeRawBlock, ShapeRawBlockGroup or
// ShapeNative), checking what LMCache's ObjectKey checks: a rank and group in
// 0..MaxKVRank, a salt without '@' (and, for the native spelling, a model without '@'),
// and for ShapeRawBlock group 0 (that shape has no group field).
func ObjectKeyOf(p ObjectParts) (Key, error) {
	k, err := objectKeyOf(p)
	if err != nil {
		return Key{}, err
	}
	if err := CheckKey(k.String(), NamespaceObject); err != nil {
		return Key{}, err
	}
	// A key must read back as the fields it was built from: a salt of hex digits after a
	// pre-group key (m@0xRANK@HASH@SALT) reads as GROUP@HASH, as LMCache's current decoder
	// reads it, so such a key is refused rather than written under fields it does not name.
	if q, ok := k.Parts(); !ok || q.Shape != p.Shape || q.KVRank != p.KVRank || q.Group != p.Group || q.CacheSalt != p.CacheSalt || string(q.ChunkHash) != string(p.ChunkHash) {
		return Key{}, fmt.Errorf("%w: %q would read back as other fields (cache_salt %q reads as a chunk hash under LMCache's object-group codec); write it in the object-group shape", ErrKeyFormat, k.String(), p.CacheSalt)
	}
	return k, nil
}

func objectKeyOf(p ObjectParts) (Key, error) {
	if p.KVRank > MaxKVRank || p.Group > MaxKVRank {
		return Key{}, fmt.Errorf("%w: kv_rank %d / object_group_id %d beyond int64", ErrKeyFormat, p.KVRank, p.Group)
	}
	if err := CheckSalt(p.CacheSalt); err != nil {
		return Key{}, err
	}
	switch p.Shape {
	case ShapeRawBlock:
		if p.Group != 0 {
			return Key{}, fmt.Errorf("%w: object_group_id %d needs the object-group shape (model@0xRANK@GROUP@HASH[@salt])", ErrKeyFormat, p.Group)
		}
		if p.KVRank > math.MaxUint32 {
			s := pyQuote(p.Model) + "@" + fmtRank64(p.KVRank) + "@" + hex.EncodeToString(p.ChunkHash)
			if p.CacheSalt != "" {
				s += "@" + p.CacheSalt
			}
			return RawKey(s), nil
		}
		return ObjectKey(p.Model, uint32(p.KVRank), p.ChunkHash, p.CacheSalt), nil
	case ShapeRawBlockGroup:
		return ObjectGroupKey(p.Model, p.KVRank, p.Group, p.ChunkHash, p.CacheSalt), nil
	case ShapeNative:
		if strings.IndexByte(p.Model, '@') >= 0 {
			return Key{}, fmt.Errorf("%w: model %q contains '@' (the native spelling does not quote it)", ErrKeyFormat, p.Model)
		}
		return RawKey(nativeString(p)), nil
	}
	return Key{}, fmt.Errorf("%w: no object key shape %v", ErrKeyFormat, p.Shape)
}

// nativeString spells p as LMCache's native connectors do (_object_key_to_string).
func nativeString(p ObjectParts) string {
	r := strconv.FormatUint(p.KVRank, 16)
	if len(r) < 8 {
		r = strings.Repeat("0", 8-len(r)) + r
	}
	s := p.Model + "@" + r + "@" + strconv.FormatUint(p.Group, 16) + "@" + hex.EncodeToString(p.ChunkHash)
	if p.CacheSalt != "" {
		s += "@" + p.CacheSalt
	}
	return s
}

// FromNative reads a key in the native-connector spelling (what LMCache's resp, fs and
// other native L2 connectors send: model@%08x@%x@hash[@salt]) and returns the raw-block
// key of the same ObjectKey, as LMCache's current raw-block codec spells it
// (ObjectGroupKey): a chunk named through a native connector and through the raw-block
// adapter is one entry. The native key must be canonical (lower-case hex, rank of at least
// 8 digits without superfluous zeros, no empty salt field) so the mapping is one-to-one.
func FromNative(native string) (Key, error) {
	if err := CheckKey(native, NamespaceObject); err != nil {
		return Key{}, err
	}
	p, ok := RawKey(native).Parts()
	if !ok || p.Shape != ShapeNative {
		return Key{}, fmt.Errorf("%w: %q is not model@RANK(%%08x)@GROUP(%%x)@HASH[@salt]", ErrKeyFormat, native)
	}
	if nativeString(p) != native {
		return Key{}, fmt.Errorf("%w: %q is not in LMCache's canonical spelling (%s)", ErrKeyFormat, native, nativeString(p))
	}
	return ObjectGroupKey(p.Model, p.KVRank, p.Group, p.ChunkHash, p.CacheSalt), nil
}

func fmtRank64(r uint64) string {
	s := strconv.FormatUint(r, 16)
	if len(s) < 8 {
		s = strings.Repeat("0", 8-len(s)) + s
	}
	return "0x" + s
}

// Native returns the key in the native-connector spelling of its ObjectKey (false for keys
// of no object shape and models holding '@'). FromNative of it gives k back only for keys
// in the canonical object-group shape, the one FromNative writes.
func (k Key) Native() (string, bool) {
	p, ok := k.Parts()
	if !ok || strings.IndexByte(p.Model, '@') >= 0 {
		return "", false
	}
	return nativeString(p), true
}
