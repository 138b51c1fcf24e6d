package safety

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// Signature is a recognised on-disk format.
type Signature struct {
	Name   string // "ext4", "xfs", "GPT partition table", "rbctl/LMCache raw-block cache", ...
	Offset int64  // where its magic is
	Label  string // the volume label when the format has one (printable, at most 64 runes)
	Cache  bool   // an rbctl/LMCache raw-block cache (what recover expects)
	what   string // "an ext4 filesystem"
}

// Describe names the signature for a refusal: `an ext4 filesystem (label "data")`.
func (s Signature) Describe() string {
	d := s.what
	if d == "" {
		d = s.Name
	}
	if s.Label != "" {
		d += fmt.Sprintf(" (label %q)", s.Label)
	}
	return d
}

// Cache magics (docs/format.md): the metadata container header and the slot header.
const (
	containerMagic = "LMCIDX01"
	slotMagic      = "LMCBLK01"
	headBytes      = 128 << 10
)

// Detect returns the signatures found in r (a device or image of size bytes). It reads the
// first 128 KiB and a few 8-byte probes further in (cache containers and slots at the
// offsets LMCache layouts put them, md superblocks near the end).
func Detect(r io.ReaderAt, size int64) ([]Signature, error) {
	if size <= 0 {
		return nil, nil
	}
	head := make([]byte, min(size, headBytes))
	if _, err := r.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	at := func(off int64, magic string) bool {
		return off >= 0 && off+int64(len(magic)) <= int64(len(head)) && string(head[off:off+int64(len(magic))]) == magic
	}
	// probe reads len(magic) bytes anywhere on the device.
	probe := func(off int64, magic string) bool {
		if off < 0 || off+int64(len(magic)) > size {
			return false
		}
		if off+int64(len(magic)) <= int64(len(head)) {
			return at(off, magic)
		}
		b := make([]byte, len(magic))
		if _, err := r.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
			return false
		}
		return string(b) == magic
	}
	var sigs []Signature
	add := func(s Signature) { sigs = append(sigs, s) }

	// A cache: container 0 at byte 0, else container 1 in the middle of a power-of-two
	// metadata region, else the first slot right after one (both containers wiped).
	if at(0, containerMagic) {
		add(cacheSig("metadata container at byte 0", 0))
	} else {
		found := false
		for m := int64(1 << 20); m <= 8<<30 && m/2 < size && !found; m <<= 1 {
			if probe(m/2, containerMagic) {
				add(cacheSig(fmt.Sprintf("second metadata container at byte %d", m/2), m/2))
				found = true
			}
		}
		for m := int64(1 << 20); m <= 8<<30 && m < size && !found; m <<= 1 {
			if probe(m, slotMagic) {
				add(cacheSig(fmt.Sprintf("slot header at byte %d", m), m))
				found = true
			}
		}
	}
	if len(head) >= 1024+136 && binary.LittleEndian.Uint16(head[1080:]) == 0xEF53 {
		name := extName(head)
		add(Signature{Name: name, Offset: 1080, Label: label(head[1024+120 : 1024+136]), what: "an " + name + " filesystem"})
	}
	if at(0, "XFSB") && len(head) >= 120 {
		add(Signature{Name: "xfs", Label: label(head[108:120]), what: "an xfs filesystem"})
	}
	if at(65600, "_BHRfS_M") {
		var l string
		if len(head) >= 65536+0x12b+256 {
			l = label(head[65536+0x12b : 65536+0x12b+256])
		}
		add(Signature{Name: "btrfs", Offset: 65600, Label: l, what: "a btrfs filesystem"})
	}
	for _, off := range []int64{4086, 8182, 16374, 65526} {
		if at(off, "SWAPSPACE2") || at(off, "SWAP-SPACE") {
			var l string
			if len(head) >= 1052+16 {
				l = label(head[1052 : 1052+16])
			}
			add(Signature{Name: "swap", Offset: off, Label: l, what: "a swap area"})
			break
		}
	}
	for s := int64(0); s < 4; s++ {
		if at(s*512, "LABELONE") && at(s*512+24, "LVM2 001") {
			add(Signature{Name: "LVM2 physical volume", Offset: s * 512, what: "an LVM2 physical volume"})
			break
		}
	}
	if at(0, "LUKS\xba\xbe") {
		var l string
		if len(head) >= 72 && binary.BigEndian.Uint16(head[6:]) == 2 {
			l = label(head[24:72])
		}
		add(Signature{Name: "LUKS", Label: l, what: "a LUKS encrypted volume"})
	}
	if at(512, "EFI PART") || at(4096, "EFI PART") {
		off := int64(512)
		if !at(512, "EFI PART") {
			off = 4096
		}
		add(Signature{Name: "GPT partition table", Offset: off, what: "a GPT partition table"})
	} else if len(head) >= 512 && head[510] == 0x55 && head[511] == 0xAA {
		add(Signature{Name: "MBR partition table / boot sector", Offset: 510, what: "an MBR partition table / boot sector"})
	}
	const mdMagic = "\xfc\x4e\x2b\xa9" // 0xa92b4efc little-endian
	for _, off := range []int64{0, 4096, (size &^ (64<<10 - 1)) - 64<<10, ((size/512 - 16) &^ 7) * 512} {
		if probe(off, mdMagic) {
			add(Signature{Name: "Linux md RAID member", Offset: off, what: "a Linux md RAID member"})
			break
		}
	}
	return sigs, nil
}

func cacheSig(where string, off int64) Signature {
	return Signature{Name: "rbctl/LMCache raw-block cache", Offset: off, Cache: true,
		what: "an rbctl/LMCache raw-block cache (" + where + ")"}
}

func extName(sb []byte) string {
	// superblock at 1024: feature_compat at +92, feature_incompat at +96.
	compat := binary.LittleEndian.Uint32(sb[1024+92:])
	incompat := binary.LittleEndian.Uint32(sb[1024+96:])
	switch {
	case incompat&0x40 != 0 || incompat&0x200 != 0: // extents / flex_bg
		return "ext4"
	case compat&0x4 != 0: // has_journal
		return "ext3"
	}
	return "ext2"
}

// label turns a NUL-padded label field into printable text (it is untrusted).
func label(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	var out strings.Builder
	n := 0
	for _, r := range strings.ToValidUTF8(string(b), "?") {
		if n == 64 {
			break
		}
		if !unicode.IsPrint(r) {
			r = '?'
		}
		out.WriteRune(r)
		n++
	}
	return strings.TrimSpace(out.String())
}
