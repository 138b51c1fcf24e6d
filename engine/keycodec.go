package engine

import (
	"encoding/binary"
	"slices"
	"strings"
	"unsafe"
)

// The compact key encoding of the index arena, also used verbatim in the compact checkpoint:
//
// kind 0 (raw):    0x00, uvarint len, bytes
// kind 1 (object): 0x01, uvarint prefixID, u8 hashLen, hash bytes, uvarint saltID+1 (0 = none)
// where prefix = everything before the chunk-hash field (for LMCache's shapes, KeyShape:
// "quote(model)@0x........@", "quote(model)@0x........@GROUP@", "model@RANK@GROUP@"; for other
// keys everything up to and including the second '@'), hash = the lower-case hex field
// decoded, salt = the remainder after the next '@' (no '@'). Decoding concatenates, so a
// record reads back the same whichever prefix the writer chose.

// interner numbers the prefixes and salts of bound keys. Strings are reference counted: one
// that no bound key uses any more is released (its id left as "" until a new string reuses
// it), so a tenant's long model names stop taking checkpoint room once its keys are gone.
// strs is modified in place; a checkpoint snapshot copies it (takeSnapshot).
type interner struct {
	ids   map[string]uint32
	strs  []string
	refs  []int32
	free  []uint32
	bytes int64 // Σ strCost(strs): the compact checkpoint's string table
}

func newInterner() *interner { return &interner{ids: map[string]uint32{}} }

// acquire returns s's id, interning it if new, and counts one more user.
func (in *interner) acquire(s string) uint32 {
	if v, ok := in.ids[s]; ok {
		in.refs[v]++
		return v
	}
	var v uint32
	if n := len(in.free); n > 0 {
		v = in.free[n-1]
		in.free = in.free[:n-1]
		in.bytes -= strCost(in.strs[v])
		in.strs[v] = s
		in.refs[v] = 1
	} else {
		v = uint32(len(in.strs))
		in.strs = append(in.strs, s)
		in.refs = append(in.refs, 1)
	}
	in.ids[s] = v
	in.bytes += strCost(s)
	return v
}

// release counts one user fewer of id; the last one frees it.
func (in *interner) release(id uint32) {
	if int(id) >= len(in.refs) || in.refs[id] <= 0 {
		return
	}
	if in.refs[id]--; in.refs[id] > 0 {
		return
	}
	s := in.strs[id]
	delete(in.ids, s)
	in.bytes += strCost("") - strCost(s)
	in.strs[id] = ""
	in.free = append(in.free, id)
}

// recordIDs returns the prefix id and salt id+1 (0: none) of compact record b; ok false for
// a raw record.
func recordIDs(b []byte) (pre, salt uint64, ok bool) {
	if len(b) == 0 || b[0] != 1 {
		return 0, 0, false
	}
	pid, w := binary.Uvarint(b[1:])
	i := 1 + w
	i += 1 + int(b[i])
	sid, _ := binary.Uvarint(b[i:])
	return pid, sid, true
}

// objSplit is how the compact encoding splits a key (splitObject).
type objSplit struct {
	prefix, hexs, salt string
	hasSalt, ok        bool
}

// splitObject splits enc into prefix, hash hex and salt when the compact form reproduces it:
// for a key of one of LMCache's shapes (splitKey) the prefix runs up to its hash field
// (model@0xRANK@ or model@RANK@GROUP@), otherwise up to the second '@'.
func splitObject(enc string) (prefix, hexs, salt string, hasSalt, ok bool) {
	f, isKey := splitKey(enc)
	sp := splitObjectOf(enc, f, isKey)
	return sp.prefix, sp.hexs, sp.salt, sp.hasSalt, sp.ok
}

// splitObjectOf is splitObject given splitKey(enc)'s result, for a caller that needs the
// fields too (recovery: the key's cache_salt).
func splitObjectOf(enc string, f keyFields, isKey bool) (sp objSplit) {
	if isKey {
		n := len(f.hash)
		if f.hasSalt {
			n += 1 + len(f.salt)
		}
		if f.hash != "" && len(f.hash) <= 2*255 && lowerHex(f.hash) && (!f.hasSalt || f.salt != "") {
			return objSplit{enc[:len(enc)-n], f.hash, f.salt, f.hasSalt, true}
		}
		return objSplit{}
	}
	p1 := strings.IndexByte(enc, '@')
	if p1 < 0 {
		return
	}
	p2 := strings.IndexByte(enc[p1+1:], '@')
	if p2 < 0 {
		return
	}
	p2 += p1 + 1
	rest := enc[p2+1:]
	p3 := strings.IndexByte(rest, '@')
	hexs, salt, hasSalt := rest, "", false
	if p3 >= 0 {
		hexs = rest[:p3]
		salt = rest[p3+1:]
		hasSalt = true
		if strings.IndexByte(salt, '@') >= 0 || salt == "" {
			return
		}
	}
	if len(hexs)%2 != 0 || len(hexs) > 2*255 {
		return
	}
	for i := 0; i < len(hexs); i++ {
		c := hexs[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return
		}
	}
	return objSplit{enc[:p2+1], hexs, salt, hasSalt, true}
}

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}

// encodeKey appends the compact encoding of enc to dst, interning into pre and salts (one
// reference each; releaseKey gives them back).
func encodeKey(dst []byte, enc string, pre, salts *interner) []byte {
	f, isKey := splitKey(enc)
	return encodeSplit(dst, enc, splitObjectOf(enc, f, isKey), pre, salts)
}

// encodeSplit is encodeKey of enc split as sp (splitObjectOf).
func encodeSplit(dst []byte, enc string, sp objSplit, pre, salts *interner) []byte {
	prefix, hexs, salt, hasSalt, ok := sp.prefix, sp.hexs, sp.salt, sp.hasSalt, sp.ok
	if !ok {
		dst = append(dst, 0)
		dst = binary.AppendUvarint(dst, uint64(len(enc)))
		return append(dst, enc...)
	}
	dst = append(dst, 1)
	dst = binary.AppendUvarint(dst, uint64(pre.acquire(prefix)))
	n := len(hexs) / 2
	dst = append(dst, byte(n))
	dst = slices.Grow(dst, n)
	h := dst[len(dst) : len(dst)+n]
	for i := range h { // hexs is lower-case hex (splitObjectOf): hexval is its value
		h[i] = hexval[hexs[2*i]]<<4 | hexval[hexs[2*i+1]]
	}
	dst = dst[:len(dst)+n]
	if hasSalt {
		dst = binary.AppendUvarint(dst, uint64(salts.acquire(salt))+1)
	} else {
		dst = append(dst, 0)
	}
	return dst
}

// keyRecordLen returns the length of the compact record at b[0:], or -1 if malformed.
func keyRecordLen(b []byte) int {
	if len(b) < 1 {
		return -1
	}
	switch b[0] {
	case 0:
		n, w := binary.Uvarint(b[1:])
		if w <= 0 || n > uint64(len(b)) || 1+w+int(n) > len(b) {
			return -1
		}
		return 1 + w + int(n)
	case 1:
		_, w := binary.Uvarint(b[1:])
		if w <= 0 || 1+w >= len(b) {
			return -1
		}
		i := 1 + w
		hl := int(b[i])
		i += 1 + hl
		if i >= len(b) {
			return -1
		}
		_, w2 := binary.Uvarint(b[i:])
		if w2 <= 0 {
			return -1
		}
		return i + w2
	}
	return -1
}

const hexdigits = "0123456789abcdef"

// hexval maps a lower-case hex digit to its value and every other byte to 0x10 (which
// lowerHex rejects).
var hexval = func() (t [256]uint8) {
	for i := range t {
		t[i] = 0x10
	}
	for i := 0; i < 16; i++ {
		t[hexdigits[i]] = uint8(i)
	}
	return
}()

// lowerHex reports whether every byte of s is a lower-case hex digit.
func lowerHex(s string) bool {
	var bad uint8
	for i := 0; i < len(s); i++ {
		bad |= hexval[s[i]]
	}
	return bad&0x10 == 0
}

// decodeKey turns a compact record back into the encoded string.
func decodeKey(b []byte, pre, salts []string) (string, bool) {
	n := keyRecordLen(b)
	if n < 0 {
		return "", false
	}
	if b[0] == 0 {
		l, w := binary.Uvarint(b[1:])
		return string(b[1+w : 1+w+int(l)]), true
	}
	pid, w := binary.Uvarint(b[1:])
	if pid >= uint64(len(pre)) {
		return "", false
	}
	i := 1 + w
	hl := int(b[i])
	h := b[i+1 : i+1+hl]
	i += 1 + hl
	sid, _ := binary.Uvarint(b[i:])
	if sid > uint64(len(salts)) {
		return "", false
	}
	// Spelled into one allocation of the key's exact length (recovery spells every key of a
	// checkpoint): the prefix, two hex digits a byte, '@' and the salt.
	n = len(pre[pid]) + 2*hl
	if sid > 0 {
		n += 1 + len(salts[sid-1])
	}
	k := make([]byte, n)
	j := copy(k, pre[pid])
	for _, c := range h {
		k[j], k[j+1] = hexdigits[c>>4], hexdigits[c&15]
		j += 2
	}
	if sid > 0 {
		k[j] = '@'
		copy(k[j+1:], salts[sid-1])
	}
	return unsafe.String(unsafe.SliceData(k), len(k)), true // k is not written again
}

// hexWord returns the lower-case hex digits of the 4 bytes of x (little-endian: byte 0 of
// x first, high nibble first) as 8 ASCII bytes packed little-endian into a uint64.
func hexWord(x uint32) uint64 {
	v := uint64(x)
	v = (v | v<<16) & 0x0000ffff0000ffff
	v = (v | v<<8) & 0x00ff00ff00ff00ff
	n := (v>>4)&0x000f000f000f000f | (v&0x000f000f000f000f)<<8
	// '0'+n for n < 10, 'a'+n-10 (= '0'+n+39) otherwise; no byte carries into the next.
	return n + 0x3030303030303030 + ((n+0x0606060606060606)>>4&0x0101010101010101)*39
}

// keyEqual reports whether the compact record b encodes enc, without allocating.
func keyEqual(b []byte, enc string, pre, salts []string) bool {
	if b[0] == 0 {
		l, w := binary.Uvarint(b[1:])
		return int(l) == len(enc) && string(b[1+w:1+w+int(l)]) == enc
	}
	pid, w := binary.Uvarint(b[1:])
	p := pre[pid]
	if len(enc) < len(p) || enc[:len(p)] != p {
		return false
	}
	i := 1 + w
	hl := int(b[i])
	h := b[i+1 : i+1+hl]
	i += 1 + hl
	rest := enc[len(p):]
	if len(rest) < 2*hl {
		return false
	}
	j := 0
	for ; j+4 <= hl; j += 4 { // 8 hex digits against 4 hash bytes at a time
		k := 2 * j
		_ = rest[k+7]
		w := uint64(rest[k]) | uint64(rest[k+1])<<8 | uint64(rest[k+2])<<16 | uint64(rest[k+3])<<24 |
			uint64(rest[k+4])<<32 | uint64(rest[k+5])<<40 | uint64(rest[k+6])<<48 | uint64(rest[k+7])<<56
		if w != hexWord(binary.LittleEndian.Uint32(h[j:])) {
			return false
		}
	}
	for ; j < hl; j++ {
		c := h[j]
		if rest[2*j] != hexdigits[c>>4] || rest[2*j+1] != hexdigits[c&15] {
			return false
		}
	}
	rest = rest[2*hl:]
	sid, _ := binary.Uvarint(b[i:])
	if sid == 0 {
		return rest == ""
	}
	s := salts[sid-1]
	return len(rest) == len(s)+1 && rest[0] == '@' && rest[1:] == s
}
