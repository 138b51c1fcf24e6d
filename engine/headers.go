package engine

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Slot header layout (docs/format.md). Part of the on-disk format: do not change.
// Bytes 0..24 are LMCache's; 24..32 are rbctl's payload checksum, which LMCache readers
// ignore (they check magic, identity and length only). The rest of the header is zero.
const (
	slotMagic       = "LMCBLK01"
	slotMagicOff    = 0  // [8]byte "LMCBLK01"
	slotIdentityOff = 8  // uint64 LE slot identity
	slotLenOff      = 16 // uint64 LE payload length
	slotCRCTagOff   = 24 // [4]byte "RBC1" when a checksum follows
	slotCRCOff      = 28 // uint32 LE CRC-32C (Castagnoli) of the payload bytes
	slotHeaderMin   = 24 // LMCache's minimum header_bytes
	slotHeaderRB    = 32 // bytes rbctl's extended header uses
	slotCRCTag      = "RBC1"

	// The key record (rbctl, after the checksum; LMCache reads none of it): the slot says
	// which key it holds, so the index can be rebuilt from the slots when no checkpoint is
	// usable (Scan). Written only with the checksum and when the key fits the header.
	slotKeyTagOff = 32 // [4]byte "RBK1"
	slotKeyLenOff = 36 // uint16 LE key length
	slotKeyFlgOff = 38 // uint16 LE flags: bit 0 = legacy namespace
	slotKeyGenOff = 40 // uint64 LE generation: later puts have higher ones
	slotKeyCRCOff = 48 // uint32 LE CRC-32C of bytes 0..48 and the key bytes
	slotKeyOff    = 56 // the key bytes (52..56 zero)
	slotKeyTag    = "RBK1"
	slotKeyLegacy = 1
)

// Metadata container header layout: struct "<8sIQQI" (32 bytes). Do not change.
const (
	contMagicOff   = 0  // [8]byte meta_magic ("LMCIDX01")
	contVersionOff = 8  // uint32 LE meta_version
	contSeqOff     = 12 // uint64 LE seq
	contLenOff     = 20 // uint64 LE payload_len
	contCRCOff     = 28 // uint32 LE CRC-32 (IEEE) of the payload
	contHeaderLen  = 32
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func payloadCRC(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }

// slotHeader is a decoded slot header.
type slotHeader struct {
	Identity uint64
	Len      uint64
	HasCRC   bool
	CRC      uint32
	// The key record: present (HasKey) only with the checksum and when its CRC matches.
	HasKey bool
	Key    string
	Legacy bool   // the key is in the legacy namespace
	Gen    uint64 // the put's generation
}

// keyRecordFits reports whether a key of n bytes fits a header of hb bytes.
func keyRecordFits(n, hb int) bool { return n > 0 && n <= 0xFFFF && slotKeyOff+n <= hb }

// encodeSlotHeader writes the header into b (len(b) >= 32 when withCRC, else >= 24; with
// the key record, keyRecordFits) and zeroes the rest of b.
func encodeSlotHeader(b []byte, h slotHeader) {
	clear(b)
	copy(b[slotMagicOff:], slotMagic)
	binary.LittleEndian.PutUint64(b[slotIdentityOff:], h.Identity)
	binary.LittleEndian.PutUint64(b[slotLenOff:], h.Len)
	if h.HasCRC {
		copy(b[slotCRCTagOff:], slotCRCTag)
		binary.LittleEndian.PutUint32(b[slotCRCOff:], h.CRC)
		if h.HasKey && keyRecordFits(len(h.Key), len(b)) {
			copy(b[slotKeyTagOff:], slotKeyTag)
			binary.LittleEndian.PutUint16(b[slotKeyLenOff:], uint16(len(h.Key)))
			if h.Legacy {
				binary.LittleEndian.PutUint16(b[slotKeyFlgOff:], slotKeyLegacy)
			}
			binary.LittleEndian.PutUint64(b[slotKeyGenOff:], h.Gen)
			copy(b[slotKeyOff:], h.Key)
			binary.LittleEndian.PutUint32(b[slotKeyCRCOff:], keyRecordCRC(b, len(h.Key)))
		}
	}
}

func keyRecordCRC(b []byte, n int) uint32 {
	c := crc32.Update(0, castagnoli, b[:slotKeyCRCOff])
	return crc32.Update(c, castagnoli, b[slotKeyOff:slotKeyOff+n])
}

// keyRecordState tells a header with no key record (0) from one whose record is whole
// (1) and one whose record is damaged or cut short by the bytes read (-1).
func keyRecordState(b []byte) int {
	if len(b) < slotKeyOff || string(b[slotCRCTagOff:slotCRCTagOff+4]) != slotCRCTag || string(b[slotKeyTagOff:slotKeyTagOff+4]) != slotKeyTag {
		return 0
	}
	n := int(binary.LittleEndian.Uint16(b[slotKeyLenOff:]))
	if !keyRecordFits(n, len(b)) || binary.LittleEndian.Uint16(b[slotKeyFlgOff:])&^slotKeyLegacy != 0 ||
		binary.LittleEndian.Uint32(b[slotKeyCRCOff:]) != keyRecordCRC(b, n) || !allZero(b[slotKeyCRCOff+4:slotKeyOff]) {
		return -1
	}
	return 1
}

// decodeSlotHeader checks the magic and returns the fields. The checksum is present only
// when its tag is, and when the header has room for it.
func decodeSlotHeader(b []byte) (slotHeader, error) {
	if len(b) < slotHeaderMin {
		return slotHeader{}, fmt.Errorf("%w: slot header of %d bytes", ErrTruncated, len(b))
	}
	if string(b[slotMagicOff:slotMagicOff+8]) != slotMagic {
		return slotHeader{}, fmt.Errorf("%w: slot header magic %q, want %q", ErrBadMagic, printable(b[:8]), slotMagic)
	}
	h := slotHeader{
		Identity: binary.LittleEndian.Uint64(b[slotIdentityOff:]),
		Len:      binary.LittleEndian.Uint64(b[slotLenOff:]),
	}
	if len(b) >= slotHeaderRB && string(b[slotCRCTagOff:slotCRCTagOff+4]) == slotCRCTag {
		h.HasCRC = true
		h.CRC = binary.LittleEndian.Uint32(b[slotCRCOff:])
		if keyRecordState(b) == 1 {
			n := int(binary.LittleEndian.Uint16(b[slotKeyLenOff:]))
			h.HasKey, h.Key = true, string(b[slotKeyOff:slotKeyOff+n])
			h.Legacy = binary.LittleEndian.Uint16(b[slotKeyFlgOff:])&slotKeyLegacy != 0
			h.Gen = binary.LittleEndian.Uint64(b[slotKeyGenOff:])
		}
	}
	return h, nil
}

// containerHeader is a decoded metadata container header.
type containerHeader struct {
	Magic   [8]byte
	Version uint32
	Seq     uint64
	Len     uint64
	CRC     uint32
}

func encodeContainerHeader(b []byte, h containerHeader) {
	clear(b)
	copy(b[contMagicOff:], h.Magic[:])
	binary.LittleEndian.PutUint32(b[contVersionOff:], h.Version)
	binary.LittleEndian.PutUint64(b[contSeqOff:], h.Seq)
	binary.LittleEndian.PutUint64(b[contLenOff:], h.Len)
	binary.LittleEndian.PutUint32(b[contCRCOff:], h.CRC)
}

// decodeContainerHeader decodes and validates a container header against the expected
// magic, version and payload capacity, in that order (ErrBadMagic, ErrBadVersion, ErrCorrupt).
func decodeContainerHeader(b []byte, magic string, version uint32, payloadCap int64) (containerHeader, error) {
	var h containerHeader
	if len(b) < contHeaderLen {
		return h, fmt.Errorf("%w: container header of %d bytes", ErrTruncated, len(b))
	}
	copy(h.Magic[:], b[contMagicOff:])
	h.Version = binary.LittleEndian.Uint32(b[contVersionOff:])
	h.Seq = binary.LittleEndian.Uint64(b[contSeqOff:])
	h.Len = binary.LittleEndian.Uint64(b[contLenOff:])
	h.CRC = binary.LittleEndian.Uint32(b[contCRCOff:])
	if string(h.Magic[:]) != magic {
		if allZero(b[:contHeaderLen]) {
			return h, fmt.Errorf("%w: empty (never written)", ErrNoCheckpoint)
		}
		return h, fmt.Errorf("%w: container magic %q, want %q", ErrBadMagic, printable(h.Magic[:]), magic)
	}
	if h.Version != version {
		return h, fmt.Errorf("%w: container version %d, want %d", ErrBadVersion, h.Version, version)
	}
	if h.Len == 0 || int64(h.Len) > payloadCap || int64(h.Len) < 0 {
		return h, fmt.Errorf("%w: payload_len %d outside (0, %d]", ErrCorrupt, h.Len, payloadCap)
	}
	return h, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func printable(b []byte) string {
	out := make([]byte, len(b))
	for i, c := range b {
		if c >= 0x20 && c < 0x7f {
			out[i] = c
		} else {
			out[i] = '.'
		}
	}
	return string(out)
}

// ---- container seal (docs/format.md). Part of the on-disk format: do not change. ----

// LMCache's container header is bytes 0..32 of the header block; the rest of its block is
// zero and LMCache reads none of it. Its seq is covered by no checksum, so one flipped bit
// can make an older checkpoint look newer. rbctl's seal after it repeats the seq and
// checksums the whole header: the seq is verified, and a single damaged copy is repaired.
// A container LMCache writes has no seal (its zeroed block clears ours).
const (
	sealTagOff = 32 // [4]byte "RBS1"
	sealSeqOff = 36 // u64 LE copy of the header's seq
	sealCRCOff = 44 // u32 LE CRC-32C (Castagnoli) of bytes 0..44
	sealEnd    = 48
	sealTag    = "RBS1"
)

// sealState says what a container's seal vouches for.
type sealState uint8

const (
	sealNone     sealState = iota // no seal: an LMCache (or pre-seal rbctl) container
	sealIntact                    // the seal's checksum matches: the seq is verified
	sealRepaired                  // one copy of the seq (or the seal's checksum) was damaged; the other is proven
	sealBroken                    // damaged beyond telling which seq is right
)

func (s sealState) String() string {
	return [...]string{"none", "intact", "repaired", "broken"}[s]
}

// sealContainerHeader adds the seal to a header block whose first 32 bytes are encoded.
func sealContainerHeader(b []byte) {
	copy(b[sealTagOff:], sealTag)
	copy(b[sealSeqOff:sealSeqOff+8], b[contSeqOff:contSeqOff+8])
	binary.LittleEndian.PutUint32(b[sealCRCOff:], crc32.Checksum(b[:sealCRCOff], castagnoli))
}

// checkSeal returns the seq the seal proves and how. A single damaged byte range is
// repaired: two agreeing copies are trusted; when they disagree, the copy that makes the
// checksum match is the right one.
func checkSeal(b []byte) (uint64, sealState) {
	if len(b) < sealEnd || string(b[sealTagOff:sealTagOff+4]) != sealTag {
		return 0, sealNone
	}
	le := binary.LittleEndian
	hs, cs, want := le.Uint64(b[contSeqOff:]), le.Uint64(b[sealSeqOff:]), le.Uint32(b[sealCRCOff:])
	sum := func(seq, seqCopy uint64) uint32 {
		var h [sealCRCOff]byte
		copy(h[:], b[:sealCRCOff])
		le.PutUint64(h[contSeqOff:], seq)
		le.PutUint64(h[sealSeqOff:], seqCopy)
		return crc32.Checksum(h[:], castagnoli)
	}
	switch {
	case sum(hs, cs) == want && hs == cs:
		return hs, sealIntact
	case hs == cs:
		return hs, sealRepaired // the damage is outside both copies of the seq
	case sum(cs, cs) == want:
		return cs, sealRepaired // the header's seq was damaged
	case sum(hs, hs) == want:
		return hs, sealRepaired // the seal's copy was damaged
	}
	return hs, sealBroken
}
