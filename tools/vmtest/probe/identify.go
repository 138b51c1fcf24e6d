// Package probe is the VM test harness's own minimal NVMe client: it issues Identify through
// the plain admin ioctl and decodes the handful of fields the harness checks against what
// QEMU was told. It exists so `make vmtest` proves itself (devices present, env vars passed,
// failures propagated) independently of the nvme package, and so nvme-cli's JSON can be
// cross-checked against an independent decode. It is deliberately small; the project's real
// NVMe implementation lives in package nvme.
package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// IdentifySize is the length of every Identify data structure.
const IdentifySize = 4096

// Identify Controller offsets (NVMe base spec, Identify Controller data structure).
const (
	ctrlVIDOff    = 0 // u16
	ctrlSNOff     = 4 // 20 ASCII bytes, space padded
	ctrlSNLen     = 20
	ctrlMNOff     = 24 // 40 ASCII bytes
	ctrlMNLen     = 40
	ctrlFROff     = 64 // 8 ASCII bytes
	ctrlFRLen     = 8
	ctrlMDTSOff   = 77  // u8, log2 of max transfer in CAP.MPSMIN units
	ctrlCTRATTOff = 96  // u32
	ctrlOACSOff   = 256 // u16
	ctrlNNOff     = 516 // u32
	ctrlONCSOff   = 520 // u16
)

// Identify Namespace (CNS 0) offsets.
const (
	nsNSZEOff  = 0  // u64, blocks
	nsNCAPOff  = 8  // u64
	nsNUSEOff  = 16 // u64
	nsNLBAFOff = 25 // u8, zero based
	nsFLBASOff = 26 // u8
	nsLBAFOff  = 128
)

// CTRATTFDPS is the Flexible Data Placement Supported bit of CTRATT.
const CTRATTFDPS = 1 << 19

var (
	// ErrShortIdentify: the buffer is not a whole Identify data structure.
	ErrShortIdentify = errors.New("identify data shorter than 4096 bytes")
	// ErrBadLBAFormat: FLBAS selects a format beyond NLBAF, or the data size is impossible.
	ErrBadLBAFormat = errors.New("identify namespace: invalid LBA format")
)

// Controller holds the decoded Identify Controller fields the harness checks.
type Controller struct {
	VID      uint16
	Serial   string // trailing spaces removed
	Model    string
	Firmware string
	MDTS     uint8
	CTRATT   uint32
	OACS     uint16
	NN       uint32
	ONCS     uint16
}

// DecodeController decodes an Identify Controller data structure.
func DecodeController(b []byte) (Controller, error) {
	if len(b) < IdentifySize {
		return Controller{}, fmt.Errorf("%w: got %d", ErrShortIdentify, len(b))
	}
	le := binary.LittleEndian
	return Controller{
		VID:      le.Uint16(b[ctrlVIDOff:]),
		Serial:   ascii(b[ctrlSNOff : ctrlSNOff+ctrlSNLen]),
		Model:    ascii(b[ctrlMNOff : ctrlMNOff+ctrlMNLen]),
		Firmware: ascii(b[ctrlFROff : ctrlFROff+ctrlFRLen]),
		MDTS:     b[ctrlMDTSOff],
		CTRATT:   le.Uint32(b[ctrlCTRATTOff:]),
		OACS:     le.Uint16(b[ctrlOACSOff:]),
		NN:       le.Uint32(b[ctrlNNOff:]),
		ONCS:     le.Uint16(b[ctrlONCSOff:]),
	}, nil
}

// Namespace holds the decoded Identify Namespace fields the harness checks.
type Namespace struct {
	NSZE, NCAP, NUSE uint64 // logical blocks
	LBAFormat        int    // index in use
	LBADataSize      int    // bytes per logical block
	MetadataSize     int    // metadata bytes per logical block
}

// Bytes is the namespace size in bytes.
func (n Namespace) Bytes() uint64 { return n.NSZE * uint64(n.LBADataSize) }

// DecodeNamespace decodes an Identify Namespace (CNS 0) data structure.
func DecodeNamespace(b []byte) (Namespace, error) {
	if len(b) < IdentifySize {
		return Namespace{}, fmt.Errorf("%w: got %d", ErrShortIdentify, len(b))
	}
	le := binary.LittleEndian
	nlbaf := int(b[nsNLBAFOff]) + 1
	flbas := b[nsFLBASOff]
	idx := int(flbas & 0xf)
	if nlbaf > 16 {
		idx |= int((flbas>>5)&3) << 4
	}
	if idx >= nlbaf || idx >= 64 {
		return Namespace{}, fmt.Errorf("%w: format %d of %d", ErrBadLBAFormat, idx, nlbaf)
	}
	f := b[nsLBAFOff+4*idx:]
	ds := f[2]
	if ds < 9 || ds > 30 {
		return Namespace{}, fmt.Errorf("%w: data size 2^%d", ErrBadLBAFormat, ds)
	}
	return Namespace{
		NSZE:         le.Uint64(b[nsNSZEOff:]),
		NCAP:         le.Uint64(b[nsNCAPOff:]),
		NUSE:         le.Uint64(b[nsNUSEOff:]),
		LBAFormat:    idx,
		LBADataSize:  1 << ds,
		MetadataSize: int(le.Uint16(f[0:])),
	}, nil
}

func ascii(b []byte) string { return strings.TrimRight(string(b), " \x00") }
