package engine

import (
	"encoding/binary"
	"strings"
)

// The index keeps one 40-byte record per slot (preallocated for max_slots), an
// open-addressing table of slot numbers keyed by identity (linear probing, backward-shift
// deletion), and the keys in a chunked arena in a compact encoding. docs/engine.md gives the
// byte budget per entry.

// Slot states.
const (
	stFree     uint8 = iota // on a free list or never used (>= nextSlot)
	stInflight              // reserved by a put whose write has not completed
	stLive                  // indexed
	stPending               // freed, waiting for a batched Deallocate before reuse
)

// Slot record flags.
const (
	flHasCRC   uint8 = 1 << iota
	flCanceled       // in-flight put was deleted; free the slot when the write ends
	flHasMeta        // ObjMeta in Engine.metas
	flTouched        // mutated while a checkpoint snapshot is being taken (in e.touched)
)

type slotRec struct {
	id     uint64 // slot identity
	key    uint32 // arena reference of the compact key
	size   uint32 // payload bytes
	crc    uint32 // CRC-32C of the payload when flHasCRC
	next   int32  // free-list link (-1 end)
	locks  uint32 // lock reference count
	stamp  uint32 // insertion order (v1 checkpoint writes entries in this order)
	handle int16  // placement handle the slot was last written with
	state  uint8
	flags  uint8
}

// ---- compact key encoding (also used verbatim in the compact checkpoint) ----
//
// kind 0 (raw):    0x00, uvarint len, bytes
// kind 1 (object): 0x01, uvarint prefixID, u8 hashLen, hash bytes, uvarint saltID+1 (0 = none)
// where prefix = everything up to and including the second '@' ("quote(model)@0x........@"),
// hash = the lower-case hex field decoded, salt = the remainder after the next '@' (no '@').

type interner struct {
	ids  map[string]uint32
	strs []string
}

func newInterner() *interner { return &interner{ids: map[string]uint32{}} }

func (in *interner) id(s string) uint32 {
	if v, ok := in.ids[s]; ok {
		return v
	}
	v := uint32(len(in.strs))
	in.ids[s] = v
	in.strs = append(in.strs, s)
	return v
}

// splitObject splits enc into prefix, hash hex and salt when the compact form reproduces it.
func splitObject(enc string) (prefix, hexs, salt string, hasSalt, ok bool) {
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
	hexs = rest
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
	return enc[:p2+1], hexs, salt, hasSalt, true
}

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}

// encodeKey appends the compact encoding of enc to dst, interning into pre and salts.
func encodeKey(dst []byte, enc string, pre, salts *interner) []byte {
	prefix, hexs, salt, hasSalt, ok := splitObject(enc)
	if !ok {
		dst = append(dst, 0)
		dst = binary.AppendUvarint(dst, uint64(len(enc)))
		return append(dst, enc...)
	}
	dst = append(dst, 1)
	dst = binary.AppendUvarint(dst, uint64(pre.id(prefix)))
	dst = append(dst, byte(len(hexs)/2))
	for i := 0; i < len(hexs); i += 2 {
		dst = append(dst, unhex(hexs[i])<<4|unhex(hexs[i+1]))
	}
	if hasSalt {
		dst = binary.AppendUvarint(dst, uint64(salts.id(salt))+1)
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
	var sb strings.Builder
	sb.Grow(len(pre[pid]) + 2*hl + 16)
	sb.WriteString(pre[pid])
	for _, c := range h {
		sb.WriteByte(hexdigits[c>>4])
		sb.WriteByte(hexdigits[c&15])
	}
	if sid > 0 {
		sb.WriteByte('@')
		sb.WriteString(salts[sid-1])
	}
	return sb.String(), true
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

// ---- arena ----

const arenaChunk = 1 << 20

// arena stores compact key records in 1 MiB chunks; a reference is chunk<<20 | offset.
// Freed records are reused by exact length.
type arena struct {
	chunks [][]byte
	free   map[int][]uint32
	used   int64
}

func newArena() *arena { return &arena{free: map[int][]uint32{}} }

func (a *arena) put(rec []byte) uint32 {
	n := len(rec)
	a.used += int64(n)
	if l := a.free[n]; len(l) > 0 {
		ref := l[len(l)-1]
		a.free[n] = l[:len(l)-1]
		copy(a.bytes(ref), rec)
		return ref
	}
	if len(a.chunks) == 0 {
		a.chunks = append(a.chunks, make([]byte, 0, 4096)) // small caches stay small
	}
	ci := len(a.chunks) - 1
	if len(a.chunks[ci])+n > arenaChunk {
		a.chunks = append(a.chunks, make([]byte, 0, arenaChunk))
		ci++
	}
	off := len(a.chunks[ci])
	a.chunks[ci] = append(a.chunks[ci], rec...)
	return uint32(ci)<<20 | uint32(off)
}

func (a *arena) bytes(ref uint32) []byte {
	c := a.chunks[ref>>20]
	off := int(ref & (arenaChunk - 1))
	return c[off:]
}

func (a *arena) record(ref uint32) []byte {
	b := a.bytes(ref)
	return b[:keyRecordLen(b)]
}

func (a *arena) release(ref uint32) {
	n := len(a.record(ref))
	a.used -= int64(n)
	a.free[n] = append(a.free[n], ref)
}

// ---- hash table ----

// table maps identities to slot numbers. A cell holds slot+1 in its low `shift` bits (0 =
// empty) and a fingerprint of the identity in the remaining high bits, so probes past
// other keys rarely touch their slot records.
type table struct {
	cells    []uint32
	n        int
	mask     uint64
	shift    uint32 // bits for slot+1
	slotMask uint32
}

func newTable(maxSlots int64) table {
	shift := uint32(1)
	for int64(1)<<shift <= maxSlots+1 {
		shift++
	}
	t := table{cells: make([]uint32, 1024), mask: 1023, shift: shift, slotMask: uint32(1<<shift - 1)}
	if shift >= 32 {
		t.shift, t.slotMask = 32, ^uint32(0)
	}
	return t
}

// fp is the identity fingerprint stored with a cell (0 bits when slots need all 32).
func (t *table) fp(h uint64) uint32 {
	if t.shift >= 32 {
		return 0
	}
	return uint32(h>>40) >> t.shift << t.shift
}

func mix(id uint64) uint64 {
	id ^= id >> 33
	id *= 0xff51afd7ed558ccd
	id ^= id >> 33
	return id
}
