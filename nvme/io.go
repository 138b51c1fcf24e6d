package nvme

import (
	"encoding/binary"
	"fmt"
)

// Builders for NVM command set I/O commands.

// RWOptions are the optional fields of Read and Write.
type RWOptions struct {
	FUA   bool          // force unit access (CDW12 bit 30)
	DType DirectiveType // directive type (CDW12 bits 23:20); DirTypeDataPlacement for FDP
	DSpec uint16        // directive specific (CDW13 bits 31:16); the placement identifier for FDP
}

// Read builds Read (opcode 0x02) of nlb blocks (1..65536) at slba into buf.
func Read(nsid uint32, slba uint64, nlb uint32, buf []byte) Command {
	return rw(OpRead, nsid, slba, nlb, buf, RWOptions{})
}

// Write builds Write (opcode 0x01) of nlb blocks (1..65536) from buf at slba:
// CDW10/11 = SLBA, CDW12 = NLB-1 | DTYPE<<20 | FUA<<30, CDW13 = DSPEC<<16.
func Write(nsid uint32, slba uint64, nlb uint32, buf []byte, o RWOptions) Command {
	return rw(OpWrite, nsid, slba, nlb, buf, o)
}

// ReadOpt is Read with options (FUA).
func ReadOpt(nsid uint32, slba uint64, nlb uint32, buf []byte, o RWOptions) Command {
	return rw(OpRead, nsid, slba, nlb, buf, o)
}

func rw(op uint8, nsid uint32, slba uint64, nlb uint32, buf []byte, o RWOptions) Command {
	c := Command{
		Opcode:   op,
		NSID:     nsid,
		CDW10:    uint32(slba),
		CDW11:    uint32(slba >> 32),
		CDW12:    (nlb-1)&0xffff | uint32(o.DType&0xf)<<20,
		CDW13:    uint32(o.DSpec) << 16,
		Data:     buf,
		BufIndex: -1,
	}
	if o.FUA {
		c.CDW12 |= 1 << 30
	}
	return c
}

// RWFields are the fields of a Read or Write command, decoded (the controller side).
type RWFields struct {
	SLBA uint64
	NLB  uint32 // 1-based block count
	RWOptions
}

// ParseRW decodes the SLBA, block count, FUA and directive fields of a Read or Write.
func ParseRW(c *Command) RWFields {
	return RWFields{
		SLBA: uint64(c.CDW10) | uint64(c.CDW11)<<32,
		NLB:  c.CDW12&0xffff + 1,
		RWOptions: RWOptions{
			FUA:   c.CDW12&(1<<30) != 0,
			DType: DirectiveType(c.CDW12>>20) & 0xf,
			DSpec: uint16(c.CDW13 >> 16),
		},
	}
}

// Flush builds Flush (opcode 0x00) for nsid.
func Flush(nsid uint32) Command {
	return Command{Opcode: OpFlush, NSID: nsid, BufIndex: -1}
}

// DSMRange is one Dataset Management range: 16 bytes on the wire, {le32 context
// attributes; le32 NLB (a 1-based block count); le64 SLBA}.
type DSMRange struct {
	Attrs uint32
	NLB   uint32
	SLBA  uint64
}

// EncodeDSMRanges writes the ranges into buf (16 bytes each) and returns the bytes used.
func EncodeDSMRanges(buf []byte, ranges []DSMRange) (int, error) {
	n := len(ranges) * DSMRangeLen
	if len(buf) < n {
		return 0, fmt.Errorf("nvme: DSM buffer of %d bytes holds fewer than %d ranges", len(buf), len(ranges))
	}
	for i, r := range ranges {
		b := buf[i*DSMRangeLen:]
		binary.LittleEndian.PutUint32(b[0:], r.Attrs)
		binary.LittleEndian.PutUint32(b[4:], r.NLB)
		binary.LittleEndian.PutUint64(b[8:], r.SLBA)
	}
	return n, nil
}

// DecodeDSMRanges reads n ranges (the controller side: NR from CDW10 + 1) from buf.
func DecodeDSMRanges(buf []byte, n int) ([]DSMRange, error) {
	if n < 1 || n > DSMMaxRanges {
		return nil, fmt.Errorf("nvme: DSM range count %d outside 1..%d", n, DSMMaxRanges)
	}
	if len(buf) < n*DSMRangeLen {
		return nil, fmt.Errorf("%w: DSM data of %d bytes for %d ranges", ErrShortData, len(buf), n)
	}
	out := make([]DSMRange, n)
	for i := range out {
		b := buf[i*DSMRangeLen:]
		out[i] = DSMRange{
			Attrs: binary.LittleEndian.Uint32(b[0:]),
			NLB:   binary.LittleEndian.Uint32(b[4:]),
			SLBA:  binary.LittleEndian.Uint64(b[8:]),
		}
	}
	return out, nil
}

// DatasetManagement builds Dataset Management (opcode 0x09) over ranges (1..256), encoding
// them into buf (at least 16 bytes per range; Data is buf[:16*len(ranges)]):
// CDW10 = NR-1, CDW11 = attrs (DSMDeallocate for a deallocate/TRIM).
func DatasetManagement(nsid uint32, attrs uint32, ranges []DSMRange, buf []byte) (Command, error) {
	if len(ranges) < 1 || len(ranges) > DSMMaxRanges {
		return Command{}, fmt.Errorf("nvme: Dataset Management takes 1..%d ranges, got %d", DSMMaxRanges, len(ranges))
	}
	n, err := EncodeDSMRanges(buf, ranges)
	if err != nil {
		return Command{}, err
	}
	return Command{
		Opcode:   OpDatasetManagement,
		NSID:     nsid,
		CDW10:    uint32(len(ranges) - 1),
		CDW11:    attrs,
		Data:     buf[:n],
		BufIndex: -1,
	}, nil
}

// Deallocate builds a Dataset Management deallocate (AD) of ranges; see DatasetManagement.
func Deallocate(nsid uint32, ranges []DSMRange, buf []byte) (Command, error) {
	return DatasetManagement(nsid, DSMDeallocate, ranges, buf)
}

// IOMgmtRecv builds I/O Management Receive (opcode 0x12): CDW10 = MO[7:0] | MOS[31:16],
// CDW11 = NUMD (len(buf)/4 - 1). len(buf) must be a positive multiple of 4. Package fdp
// gives MO 1 (Reclaim Unit Handle Status) its meaning.
func IOMgmtRecv(nsid uint32, mo IOMgmtOp, mos uint16, buf []byte) (Command, error) {
	if len(buf) == 0 || len(buf)%4 != 0 {
		return Command{}, fmt.Errorf("nvme: I/O Management Receive length %d must be a positive multiple of 4", len(buf))
	}
	return Command{
		Opcode:   OpIOMgmtRecv,
		NSID:     nsid,
		CDW10:    uint32(mo) | uint32(mos)<<16,
		CDW11:    uint32(len(buf)/4 - 1),
		Data:     buf,
		BufIndex: -1,
	}, nil
}

// IOMgmtSend builds I/O Management Send (opcode 0x1D): CDW10 = MO[7:0] | MOS[31:16], data
// buf (may be empty). For RUH Update (MO 1) MOS is the number of PIDs - 1 and buf holds the
// little-endian 16-bit PIDs.
func IOMgmtSend(nsid uint32, mo IOMgmtOp, mos uint16, buf []byte) Command {
	return Command{
		Opcode:   OpIOMgmtSend,
		NSID:     nsid,
		CDW10:    uint32(mo) | uint32(mos)<<16,
		Data:     buf,
		BufIndex: -1,
	}
}
