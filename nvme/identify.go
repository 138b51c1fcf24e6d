package nvme

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

var (
	// ErrShortData: a data structure from the device is shorter than its layout.
	ErrShortData = errors.New("nvme: data shorter than the structure")
	// ErrBadLBAFormat: FLBAS selects a format beyond NLBAF, or the format's LBADS is unusable.
	ErrBadLBAFormat = errors.New("nvme: invalid LBA format")
)

// Identify Controller data structure offsets (NVMe base spec 2.0, Figure "Identify
// Controller Data Structure"). Wire layout: do not change.
const (
	idCtrlVID       = 0   // u16
	idCtrlSSVID     = 2   // u16
	idCtrlSN        = 4   // 20 ASCII
	idCtrlMN        = 24  // 40 ASCII
	idCtrlFR        = 64  // 8 ASCII
	idCtrlRAB       = 72  // u8
	idCtrlIEEE      = 73  // 3 bytes
	idCtrlCMIC      = 76  // u8
	idCtrlMDTS      = 77  // u8
	idCtrlCNTLID    = 78  // u16
	idCtrlVER       = 80  // u32
	idCtrlOAES      = 92  // u32
	idCtrlCTRATT    = 96  // u32
	idCtrlCNTRLTYPE = 111 // u8
	idCtrlOACS      = 256 // u16
	idCtrlACL       = 258 // u8
	idCtrlAERL      = 259 // u8
	idCtrlFRMW      = 260 // u8
	idCtrlLPA       = 261 // u8
	idCtrlELPE      = 262 // u8
	idCtrlNPSS      = 263 // u8
	idCtrlTNVMCAP   = 280 // u128
	idCtrlUNVMCAP   = 296 // u128
	idCtrlENDGIDMAX = 340 // u16
	idCtrlSQES      = 512 // u8
	idCtrlCQES      = 513 // u8
	idCtrlMAXCMD    = 514 // u16
	idCtrlNN        = 516 // u32
	idCtrlONCS      = 520 // u16
	idCtrlFUSES     = 522 // u16
	idCtrlFNA       = 524 // u8
	idCtrlVWC       = 525 // u8
	idCtrlAWUN      = 526 // u16
	idCtrlAWUPF     = 528 // u16
	idCtrlSGLS      = 536 // u32
	idCtrlMNAN      = 540 // u32
	idCtrlSUBNQN    = 768 // 256 ASCII
)

// ControllerData is the decoded Identify Controller data structure (CNS 0x01), the fields
// rbctl uses. Strings are ASCII with trailing spaces and NULs removed.
type ControllerData struct {
	VID, SSVID   uint16
	SerialNumber string // SN
	ModelNumber  string // MN
	Firmware     string // FR
	RAB          uint8
	IEEE         [3]byte
	CMIC         uint8
	MDTS         uint8 // max data transfer: 2^MDTS minimum pages; 0 = no limit
	CNTLID       uint16
	VER          uint32
	OAES         uint32
	CTRATT       uint32
	CNTRLTYPE    uint8
	OACS         uint16
	ACL, AERL    uint8
	FRMW, LPA    uint8
	ELPE, NPSS   uint8
	TNVMCAP      [2]uint64 // 128-bit little endian: [0] low, [1] high
	UNVMCAP      [2]uint64
	EndGIDMax    uint16
	SQES, CQES   uint8
	MAXCMD       uint16
	NN           uint32
	ONCS         uint16
	FUSES        uint16
	FNA, VWC     uint8
	AWUN, AWUPF  uint16
	SGLS         uint32
	MNAN         uint32
	SubNQN       string
}

func asciiField(b []byte) string {
	return string(bytes.TrimRight(b, " \x00"))
}

func putASCII(b []byte, s string) {
	for i := range b {
		b[i] = ' '
	}
	copy(b, s)
}

// DecodeController decodes an Identify Controller data structure (at least 4096 bytes).
func DecodeController(b []byte) (*ControllerData, error) {
	if len(b) < IdentifyDataLen {
		return nil, fmt.Errorf("%w: Identify Controller is %d bytes, got %d", ErrShortData, IdentifyDataLen, len(b))
	}
	le := binary.LittleEndian
	c := &ControllerData{
		VID:          le.Uint16(b[idCtrlVID:]),
		SSVID:        le.Uint16(b[idCtrlSSVID:]),
		SerialNumber: asciiField(b[idCtrlSN : idCtrlSN+20]),
		ModelNumber:  asciiField(b[idCtrlMN : idCtrlMN+40]),
		Firmware:     asciiField(b[idCtrlFR : idCtrlFR+8]),
		RAB:          b[idCtrlRAB],
		CMIC:         b[idCtrlCMIC],
		MDTS:         b[idCtrlMDTS],
		CNTLID:       le.Uint16(b[idCtrlCNTLID:]),
		VER:          le.Uint32(b[idCtrlVER:]),
		OAES:         le.Uint32(b[idCtrlOAES:]),
		CTRATT:       le.Uint32(b[idCtrlCTRATT:]),
		CNTRLTYPE:    b[idCtrlCNTRLTYPE],
		OACS:         le.Uint16(b[idCtrlOACS:]),
		ACL:          b[idCtrlACL],
		AERL:         b[idCtrlAERL],
		FRMW:         b[idCtrlFRMW],
		LPA:          b[idCtrlLPA],
		ELPE:         b[idCtrlELPE],
		NPSS:         b[idCtrlNPSS],
		TNVMCAP:      [2]uint64{le.Uint64(b[idCtrlTNVMCAP:]), le.Uint64(b[idCtrlTNVMCAP+8:])},
		UNVMCAP:      [2]uint64{le.Uint64(b[idCtrlUNVMCAP:]), le.Uint64(b[idCtrlUNVMCAP+8:])},
		EndGIDMax:    le.Uint16(b[idCtrlENDGIDMAX:]),
		SQES:         b[idCtrlSQES],
		CQES:         b[idCtrlCQES],
		MAXCMD:       le.Uint16(b[idCtrlMAXCMD:]),
		NN:           le.Uint32(b[idCtrlNN:]),
		ONCS:         le.Uint16(b[idCtrlONCS:]),
		FUSES:        le.Uint16(b[idCtrlFUSES:]),
		FNA:          b[idCtrlFNA],
		VWC:          b[idCtrlVWC],
		AWUN:         le.Uint16(b[idCtrlAWUN:]),
		AWUPF:        le.Uint16(b[idCtrlAWUPF:]),
		SGLS:         le.Uint32(b[idCtrlSGLS:]),
		MNAN:         le.Uint32(b[idCtrlMNAN:]),
		SubNQN:       asciiField(b[idCtrlSUBNQN : idCtrlSUBNQN+256]),
	}
	copy(c.IEEE[:], b[idCtrlIEEE:idCtrlIEEE+3])
	return c, nil
}

// Encode writes c as an Identify Controller data structure into b (at least 4096 bytes,
// zeroed by the caller for fields not modelled). The emulated SSD answers with it.
func (c *ControllerData) Encode(b []byte) error {
	if len(b) < IdentifyDataLen {
		return fmt.Errorf("%w: Identify Controller needs %d bytes, got %d", ErrShortData, IdentifyDataLen, len(b))
	}
	le := binary.LittleEndian
	le.PutUint16(b[idCtrlVID:], c.VID)
	le.PutUint16(b[idCtrlSSVID:], c.SSVID)
	putASCII(b[idCtrlSN:idCtrlSN+20], c.SerialNumber)
	putASCII(b[idCtrlMN:idCtrlMN+40], c.ModelNumber)
	putASCII(b[idCtrlFR:idCtrlFR+8], c.Firmware)
	b[idCtrlRAB] = c.RAB
	copy(b[idCtrlIEEE:idCtrlIEEE+3], c.IEEE[:])
	b[idCtrlCMIC] = c.CMIC
	b[idCtrlMDTS] = c.MDTS
	le.PutUint16(b[idCtrlCNTLID:], c.CNTLID)
	le.PutUint32(b[idCtrlVER:], c.VER)
	le.PutUint32(b[idCtrlOAES:], c.OAES)
	le.PutUint32(b[idCtrlCTRATT:], c.CTRATT)
	b[idCtrlCNTRLTYPE] = c.CNTRLTYPE
	le.PutUint16(b[idCtrlOACS:], c.OACS)
	b[idCtrlACL] = c.ACL
	b[idCtrlAERL] = c.AERL
	b[idCtrlFRMW] = c.FRMW
	b[idCtrlLPA] = c.LPA
	b[idCtrlELPE] = c.ELPE
	b[idCtrlNPSS] = c.NPSS
	le.PutUint64(b[idCtrlTNVMCAP:], c.TNVMCAP[0])
	le.PutUint64(b[idCtrlTNVMCAP+8:], c.TNVMCAP[1])
	le.PutUint64(b[idCtrlUNVMCAP:], c.UNVMCAP[0])
	le.PutUint64(b[idCtrlUNVMCAP+8:], c.UNVMCAP[1])
	le.PutUint16(b[idCtrlENDGIDMAX:], c.EndGIDMax)
	b[idCtrlSQES] = c.SQES
	b[idCtrlCQES] = c.CQES
	le.PutUint16(b[idCtrlMAXCMD:], c.MAXCMD)
	le.PutUint32(b[idCtrlNN:], c.NN)
	le.PutUint16(b[idCtrlONCS:], c.ONCS)
	le.PutUint16(b[idCtrlFUSES:], c.FUSES)
	b[idCtrlFNA] = c.FNA
	b[idCtrlVWC] = c.VWC
	le.PutUint16(b[idCtrlAWUN:], c.AWUN)
	le.PutUint16(b[idCtrlAWUPF:], c.AWUPF)
	le.PutUint32(b[idCtrlSGLS:], c.SGLS)
	le.PutUint32(b[idCtrlMNAN:], c.MNAN)
	sub := b[idCtrlSUBNQN : idCtrlSUBNQN+256]
	for i := range sub {
		sub[i] = 0
	}
	copy(sub, c.SubNQN) // NQNs are NUL padded
	return nil
}

// FDPSupported reports CTRATT bit 19 (Flexible Data Placement supported).
func (c *ControllerData) FDPSupported() bool { return c.CTRATT&CTRATTFDPS != 0 }

// EnduranceGroups reports CTRATT bit 4 (endurance groups supported).
func (c *ControllerData) EnduranceGroups() bool { return c.CTRATT&CTRATTEnduranceGroups != 0 }

// DSMSupported reports ONCS bit 2 (Dataset Management supported).
func (c *ControllerData) DSMSupported() bool { return c.ONCS&ONCSDSM != 0 }

// VolatileWriteCache reports VWC bit 0 (a volatile write cache is present).
func (c *ControllerData) VolatileWriteCache() bool { return c.VWC&1 != 0 }

// Version is VER as "major.minor[.tertiary]" ("1.4"), or "" when the controller reports 0.
func (c *ControllerData) Version() string {
	if c.VER == 0 {
		return ""
	}
	s := sprintf("%d.%d", c.VER>>16, (c.VER>>8)&0xff)
	if t := c.VER & 0xff; t != 0 {
		s += sprintf(".%d", t)
	}
	return s
}

// MaxTransfer is the largest data transfer in bytes: 2^MDTS pages of minPage bytes (the
// controller's CAP.MPSMIN; pass 0 for DefaultMinPageSize, 4 KiB). 0 means no limit.
func (c *ControllerData) MaxTransfer(minPage int) int {
	if c.MDTS == 0 {
		return 0
	}
	if minPage <= 0 {
		minPage = DefaultMinPageSize
	}
	if c.MDTS > 20 { // beyond 4 GiB with 4 KiB pages: treat as no practical limit
		return 1 << 30
	}
	n := int64(minPage) << c.MDTS
	if n > 1<<30 {
		n = 1 << 30
	}
	return int(n)
}

// Identify Namespace (NVM command set, CNS 0x00) offsets. Wire layout: do not change.
const (
	idNSNSZE     = 0   // u64
	idNSNCAP     = 8   // u64
	idNSNUSE     = 16  // u64
	idNSNSFEAT   = 24  // u8
	idNSNLBAF    = 25  // u8, 0's based
	idNSFLBAS    = 26  // u8
	idNSMC       = 27  // u8
	idNSDPC      = 28  // u8
	idNSDPS      = 29  // u8
	idNSNMIC     = 30  // u8
	idNSNOIOB    = 46  // u16
	idNSNPWG     = 64  // u16
	idNSNOWS     = 72  // u16
	idNSANAGRPID = 92  // u32
	idNSNSATTR   = 99  // u8
	idNSNVMSETID = 100 // u16
	idNSENDGID   = 102 // u16
	idNSNGUID    = 104 // 16 bytes
	idNSEUI64    = 120 // 8 bytes
	idNSLBAF     = 128 // 64 x 4 bytes
)

// LBAFormat is one LBA format descriptor: {le16 MS; u8 LBADS; u8 RP}.
type LBAFormat struct {
	MS    uint16 // metadata bytes per block
	LBADS uint8  // log2 of the data size
	RP    uint8  // relative performance (2 bits)
}

// DataSize is the logical block size in bytes (2^LBADS), or 0 if LBADS is out of range.
func (f LBAFormat) DataSize() int {
	if f.LBADS < 9 || f.LBADS > 30 {
		return 0
	}
	return 1 << f.LBADS
}

// NamespaceData is the decoded Identify Namespace data structure (CNS 0x00).
type NamespaceData struct {
	NSZE, NCAP, NUSE uint64 // in logical blocks
	NSFEAT           uint8
	NLBAF            uint8 // number of LBA formats, 0's based
	FLBAS            uint8
	MC, DPC, DPS     uint8
	NMIC             uint8
	NOIOB            uint16
	NPWG, NOWS       uint16
	ANAGRPID         uint32
	NSATTR           uint8
	NVMSETID         uint16
	EndGID           uint16 // endurance group (ENDGID, bytes 102..103)
	NGUID            [16]byte
	EUI64            [8]byte
	LBAF             [64]LBAFormat
}

// DecodeNamespace decodes an Identify Namespace data structure (at least 4096 bytes).
func DecodeNamespace(b []byte) (*NamespaceData, error) {
	if len(b) < IdentifyDataLen {
		return nil, fmt.Errorf("%w: Identify Namespace is %d bytes, got %d", ErrShortData, IdentifyDataLen, len(b))
	}
	le := binary.LittleEndian
	n := &NamespaceData{
		NSZE:     le.Uint64(b[idNSNSZE:]),
		NCAP:     le.Uint64(b[idNSNCAP:]),
		NUSE:     le.Uint64(b[idNSNUSE:]),
		NSFEAT:   b[idNSNSFEAT],
		NLBAF:    b[idNSNLBAF],
		FLBAS:    b[idNSFLBAS],
		MC:       b[idNSMC],
		DPC:      b[idNSDPC],
		DPS:      b[idNSDPS],
		NMIC:     b[idNSNMIC],
		NOIOB:    le.Uint16(b[idNSNOIOB:]),
		NPWG:     le.Uint16(b[idNSNPWG:]),
		NOWS:     le.Uint16(b[idNSNOWS:]),
		ANAGRPID: le.Uint32(b[idNSANAGRPID:]),
		NSATTR:   b[idNSNSATTR],
		NVMSETID: le.Uint16(b[idNSNVMSETID:]),
		EndGID:   le.Uint16(b[idNSENDGID:]),
	}
	copy(n.NGUID[:], b[idNSNGUID:idNSNGUID+16])
	copy(n.EUI64[:], b[idNSEUI64:idNSEUI64+8])
	for i := range n.LBAF {
		o := idNSLBAF + 4*i
		n.LBAF[i] = LBAFormat{MS: le.Uint16(b[o:]), LBADS: b[o+2], RP: b[o+3] & 3}
	}
	return n, nil
}

// Encode writes n as an Identify Namespace data structure into b (at least 4096 bytes).
func (n *NamespaceData) Encode(b []byte) error {
	if len(b) < IdentifyDataLen {
		return fmt.Errorf("%w: Identify Namespace needs %d bytes, got %d", ErrShortData, IdentifyDataLen, len(b))
	}
	le := binary.LittleEndian
	le.PutUint64(b[idNSNSZE:], n.NSZE)
	le.PutUint64(b[idNSNCAP:], n.NCAP)
	le.PutUint64(b[idNSNUSE:], n.NUSE)
	b[idNSNSFEAT] = n.NSFEAT
	b[idNSNLBAF] = n.NLBAF
	b[idNSFLBAS] = n.FLBAS
	b[idNSMC] = n.MC
	b[idNSDPC] = n.DPC
	b[idNSDPS] = n.DPS
	b[idNSNMIC] = n.NMIC
	le.PutUint16(b[idNSNOIOB:], n.NOIOB)
	le.PutUint16(b[idNSNPWG:], n.NPWG)
	le.PutUint16(b[idNSNOWS:], n.NOWS)
	le.PutUint32(b[idNSANAGRPID:], n.ANAGRPID)
	b[idNSNSATTR] = n.NSATTR
	le.PutUint16(b[idNSNVMSETID:], n.NVMSETID)
	le.PutUint16(b[idNSENDGID:], n.EndGID)
	copy(b[idNSNGUID:idNSNGUID+16], n.NGUID[:])
	copy(b[idNSEUI64:idNSEUI64+8], n.EUI64[:])
	for i, f := range n.LBAF {
		o := idNSLBAF + 4*i
		le.PutUint16(b[o:], f.MS)
		b[o+2] = f.LBADS
		b[o+3] = f.RP & 3
	}
	return nil
}

// FormatIndex is the LBA format in use: FLBAS bits 3:0, plus bits 6:5 as the high bits
// when more than 16 formats exist.
func (n *NamespaceData) FormatIndex() int {
	i := int(n.FLBAS & 0xf)
	if n.NLBAF >= 16 {
		i |= int(n.FLBAS>>5&3) << 4
	}
	return i
}

// ExtendedLBA reports FLBAS bit 4: metadata is transferred at the end of each block.
func (n *NamespaceData) ExtendedLBA() bool { return n.FLBAS&(1<<4) != 0 }

// Format returns the LBA format in use, or ErrBadLBAFormat when FLBAS selects a format
// beyond NLBAF or its data size is not 512 B .. 1 GiB.
func (n *NamespaceData) Format() (LBAFormat, error) {
	i := n.FormatIndex()
	if i > int(n.NLBAF) || i >= len(n.LBAF) {
		return LBAFormat{}, fmt.Errorf("%w: FLBAS selects format %d but NLBAF is %d", ErrBadLBAFormat, i, n.NLBAF)
	}
	f := n.LBAF[i]
	if f.DataSize() == 0 {
		return LBAFormat{}, fmt.Errorf("%w: format %d has LBADS %d", ErrBadLBAFormat, i, f.LBADS)
	}
	return f, nil
}

// Identify I/O command set independent namespace (CNS 0x08) offsets.
const (
	idIndNSFEAT   = 0  // u8
	idIndNMIC     = 1  // u8
	idIndRESCAP   = 2  // u8
	idIndFPI      = 3  // u8
	idIndANAGRPID = 4  // u32
	idIndNSATTR   = 8  // u8
	idIndNVMSETID = 10 // u16
	idIndENDGID   = 12 // u16
	idIndNSTAT    = 14 // u8
)

// IndependentNamespaceData is the decoded I/O command set independent Identify Namespace
// data structure (CNS 0x08).
type IndependentNamespaceData struct {
	NSFEAT, NMIC, RESCAP, FPI uint8
	ANAGRPID                  uint32
	NSATTR                    uint8
	NVMSETID                  uint16
	EndGID                    uint16
	NSTAT                     uint8 // bit 0: namespace ready
}

// DecodeIndependentNamespace decodes a CNS 0x08 data structure (at least 16 bytes are read;
// devices send 4096).
func DecodeIndependentNamespace(b []byte) (*IndependentNamespaceData, error) {
	if len(b) < 16 {
		return nil, fmt.Errorf("%w: I/O command set independent namespace needs 16 bytes, got %d", ErrShortData, len(b))
	}
	le := binary.LittleEndian
	return &IndependentNamespaceData{
		NSFEAT:   b[idIndNSFEAT],
		NMIC:     b[idIndNMIC],
		RESCAP:   b[idIndRESCAP],
		FPI:      b[idIndFPI],
		ANAGRPID: le.Uint32(b[idIndANAGRPID:]),
		NSATTR:   b[idIndNSATTR],
		NVMSETID: le.Uint16(b[idIndNVMSETID:]),
		EndGID:   le.Uint16(b[idIndENDGID:]),
		NSTAT:    b[idIndNSTAT],
	}, nil
}

// Encode writes the structure into b (at least 16 bytes; devices send 4096).
func (n *IndependentNamespaceData) Encode(b []byte) error {
	if len(b) < 16 {
		return fmt.Errorf("%w: I/O command set independent namespace needs 16 bytes, got %d", ErrShortData, len(b))
	}
	le := binary.LittleEndian
	b[idIndNSFEAT], b[idIndNMIC], b[idIndRESCAP], b[idIndFPI] = n.NSFEAT, n.NMIC, n.RESCAP, n.FPI
	le.PutUint32(b[idIndANAGRPID:], n.ANAGRPID)
	b[idIndNSATTR] = n.NSATTR
	le.PutUint16(b[idIndNVMSETID:], n.NVMSETID)
	le.PutUint16(b[idIndENDGID:], n.EndGID)
	b[idIndNSTAT] = n.NSTAT
	return nil
}

// DecodeNamespaceList decodes an active namespace list (CNS 0x02): little-endian NSIDs up
// to the first 0, at most len(b)/4 (1024 in a 4096-byte page).
func DecodeNamespaceList(b []byte) []uint32 {
	var out []uint32
	for o := 0; o+4 <= len(b); o += 4 {
		id := binary.LittleEndian.Uint32(b[o:])
		if id == 0 {
			break
		}
		out = append(out, id)
	}
	return out
}

// EncodeNamespaceList writes ids into b as a namespace list (zero-terminated if room).
func EncodeNamespaceList(b []byte, ids []uint32) error {
	if len(ids)*4 > len(b) {
		return fmt.Errorf("%w: %d NSIDs in %d bytes", ErrShortData, len(ids), len(b))
	}
	for i := range b {
		b[i] = 0
	}
	for i, id := range ids {
		binary.LittleEndian.PutUint32(b[4*i:], id)
	}
	return nil
}

// Namespace identification descriptor types (CNS 0x03).
const (
	NIDTEUI64 uint8 = 1
	NIDTNGUID uint8 = 2
	NIDTUUID  uint8 = 3
	NIDTCSI   uint8 = 4
)

// NSDescriptor is one namespace identification descriptor.
type NSDescriptor struct {
	Type uint8
	ID   []byte
}

// DecodeNSDescriptors decodes a namespace identification descriptor list (CNS 0x03):
// {u8 NIDT; u8 NIDL; u16 rsvd; NID[NIDL]} repeated until NIDT 0.
func DecodeNSDescriptors(b []byte) ([]NSDescriptor, error) {
	var out []NSDescriptor
	for o := 0; o+4 <= len(b); {
		t, l := b[o], int(b[o+1])
		if t == 0 {
			break
		}
		if o+4+l > len(b) {
			return out, fmt.Errorf("%w: descriptor type %d length %d at offset %d", ErrShortData, t, l, o)
		}
		out = append(out, NSDescriptor{Type: t, ID: append([]byte(nil), b[o+4:o+4+l]...)})
		o += 4 + l
	}
	return out, nil
}
