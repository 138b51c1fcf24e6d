package nvmetcp

import (
	"github.com/rbctl/rbctl/nvme"
)

// Submission queue entry layout (NVMe base spec, "Common Command Format"; Fabrics commands
// share it with FCTYPE at byte 4). Wire layout: do not change.
const (
	SQELen      = 64
	sqeOpcode   = 0  // u8
	sqeFlags    = 1  // u8: FUSE 1:0, PSDT 7:6
	sqeCID      = 2  // u16
	sqeNSID     = 4  // u32 (Fabrics: FCTYPE u8 at byte 4)
	sqeCDW2     = 8  // u32
	sqeCDW3     = 12 // u32
	sqeDPTR     = 24 // 16-byte SGL descriptor 1
	sqeCDW10    = 40 // u32, then CDW11..CDW15
	psdtMask    = 0xC0
	psdtPRP     = 0x00
	sqeFCType   = 4
	opFabrics   = 0x7F
	sglDescLen  = 16
	sglAddrOff  = 0  // u64
	sglLenOff   = 8  // u32
	sglTypeOff  = 15 // u8: type 7:4, subtype 3:0
	CQELen      = 16
	cqeDW0      = 0  // u32
	cqeDW1      = 4  // u32
	cqeSQHD     = 8  // u16
	cqeSQID     = 10 // u16
	cqeCID      = 12 // u16
	cqeStatus   = 14 // u16: phase bit 0, status 15:1
	sqeCDWCount = 6
)

// SGL descriptor identifiers (type<<4 | subtype) the Linux NVMe/TCP host uses.
const (
	// SGLInCapsule is a Data Block descriptor with the Offset subtype: the data is in the
	// command capsule, ADDR bytes after the start of the in-capsule data (ICDOFF = 0).
	SGLInCapsule uint8 = 0x01
	// SGLTransport is a Transport SGL Data Block (type 5) with transport-specific subtype
	// 0xA: the data moves in H2CData (after an R2T) or C2HData PDUs.
	SGLTransport uint8 = 0x5A
)

// SQE is a decoded 64-byte submission queue entry.
type SQE struct {
	Opcode uint8
	Flags  uint8
	CID    uint16
	NSID   uint32
	CDW2   uint32
	CDW3   uint32
	SGL    SGLDesc
	CDW    [sqeCDWCount]uint32 // CDW10..CDW15
	Raw    [SQELen]byte
}

// SGLDesc is SGL descriptor 1 of a command.
type SGLDesc struct {
	Addr   uint64
	Length uint32
	Type   uint8 // type<<4 | subtype
}

// DecodeSQE decodes a 64-byte submission queue entry.
func DecodeSQE(b []byte) SQE {
	var s SQE
	copy(s.Raw[:], b[:SQELen])
	s.Opcode, s.Flags, s.CID = b[sqeOpcode], b[sqeFlags], le.Uint16(b[sqeCID:])
	s.NSID, s.CDW2, s.CDW3 = le.Uint32(b[sqeNSID:]), le.Uint32(b[sqeCDW2:]), le.Uint32(b[sqeCDW3:])
	d := b[sqeDPTR : sqeDPTR+sglDescLen]
	s.SGL = SGLDesc{Addr: le.Uint64(d[sglAddrOff:]), Length: le.Uint32(d[sglLenOff:]), Type: d[sglTypeOff]}
	for i := range s.CDW {
		s.CDW[i] = le.Uint32(b[sqeCDW10+4*i:])
	}
	return s
}

// EncodeSQE builds the SQE a host sends for cmd with command identifier cid and SGL
// descriptor sgl (PSDT = SGL, as NVMe over Fabrics requires).
func EncodeSQE(cmd *nvme.Command, cid uint16, sgl SGLDesc) [SQELen]byte {
	var b [SQELen]byte
	b[sqeOpcode], b[sqeFlags] = cmd.Opcode, 0x40
	le.PutUint16(b[sqeCID:], cid)
	le.PutUint32(b[sqeNSID:], cmd.NSID)
	le.PutUint32(b[sqeCDW2:], cmd.CDW2)
	le.PutUint32(b[sqeCDW3:], cmd.CDW3)
	putSGL(b[sqeDPTR:], sgl)
	for i, v := range []uint32{cmd.CDW10, cmd.CDW11, cmd.CDW12, cmd.CDW13, cmd.CDW14, cmd.CDW15} {
		le.PutUint32(b[sqeCDW10+4*i:], v)
	}
	return b
}

func putSGL(b []byte, d SGLDesc) {
	le.PutUint64(b[sglAddrOff:], d.Addr)
	le.PutUint32(b[sglLenOff:], d.Length)
	b[sglTypeOff] = d.Type
}

// Command converts the SQE to the nvme.Command the backend transport takes.
func (s *SQE) Command(data []byte) nvme.Command {
	return nvme.Command{
		Opcode: s.Opcode, NSID: s.NSID, CDW2: s.CDW2, CDW3: s.CDW3,
		CDW10: s.CDW[0], CDW11: s.CDW[1], CDW12: s.CDW[2], CDW13: s.CDW[3], CDW14: s.CDW[4], CDW15: s.CDW[5],
		Data: data, BufIndex: -1,
	}
}

// CQE is a 16-byte completion queue entry. Status is in the Linux form of nvme.Status
// (the CQE status field without the phase bit).
type CQE struct {
	Result uint64 // DW0 | DW1<<32
	SQHD   uint16
	SQID   uint16
	CID    uint16
	Status nvme.Status
}

// Put encodes the CQE into b[:16].
func (c CQE) Put(b []byte) {
	le.PutUint32(b[cqeDW0:], uint32(c.Result))
	le.PutUint32(b[cqeDW1:], uint32(c.Result>>32))
	le.PutUint16(b[cqeSQHD:], c.SQHD)
	le.PutUint16(b[cqeSQID:], c.SQID)
	le.PutUint16(b[cqeCID:], c.CID)
	le.PutUint16(b[cqeStatus:], uint16(c.Status)<<1)
}

// DecodeCQE decodes a 16-byte completion queue entry.
func DecodeCQE(b []byte) CQE {
	return CQE{
		Result: uint64(le.Uint32(b[cqeDW0:])) | uint64(le.Uint32(b[cqeDW1:]))<<32,
		SQHD:   le.Uint16(b[cqeSQHD:]), SQID: le.Uint16(b[cqeSQID:]), CID: le.Uint16(b[cqeCID:]),
		Status: nvme.Status(le.Uint16(b[cqeStatus:]) >> 1),
	}
}
