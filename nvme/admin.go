package nvme

import "fmt"

// Builders for admin commands. Each returns a Command whose Data is the caller's buffer;
// BufIndex is -1 (no registered buffer). Encodings follow the NVMe base specification and
// match libnvme's (docs/nvme.md has the table).

// Identify builds an Identify command (opcode 0x06): CDW10 = CNS[7:0] | CNTID[31:16],
// CDW11 = CNSSID[15:0] | CSI[31:24]. buf must be IdentifyDataLen (4096) bytes.
func Identify(cns uint8, nsid uint32, cntid uint16, csi uint8, buf []byte) Command {
	return Command{
		Opcode:   OpIdentify,
		NSID:     nsid,
		CDW10:    uint32(cns) | uint32(cntid)<<16,
		CDW11:    uint32(csi) << 24,
		Data:     buf,
		BufIndex: -1,
	}
}

// IdentifyController builds Identify CNS 0x01 (controller data structure) into buf (4096 bytes).
func IdentifyController(buf []byte) Command { return Identify(CNSController, 0, 0, 0, buf) }

// IdentifyNamespace builds Identify CNS 0x00 (NVM namespace data structure) for nsid.
func IdentifyNamespace(nsid uint32, buf []byte) Command {
	return Identify(CNSNamespace, nsid, 0, 0, buf)
}

// IdentifyIndependentNamespace builds Identify CNS 0x08 (I/O command set independent
// namespace data structure, which carries the endurance group id) for nsid.
func IdentifyIndependentNamespace(nsid uint32, buf []byte) Command {
	return Identify(CNSIndependentNamespace, nsid, 0, 0, buf)
}

// IdentifyActiveNamespaces builds Identify CNS 0x02: the list of up to 1024 active NSIDs
// greater than after (0 for the first page).
func IdentifyActiveNamespaces(after uint32, buf []byte) Command {
	return Identify(CNSActiveNamespaces, after, 0, 0, buf)
}

// IdentifyNSDescriptors builds Identify CNS 0x03 (namespace identification descriptor list).
func IdentifyNSDescriptors(nsid uint32, buf []byte) Command {
	return Identify(CNSNSDescriptors, nsid, 0, 0, buf)
}

// LogPage selects a log page and the part of it a Get Log Page command reads.
type LogPage struct {
	LID    LogID  // log identifier
	LSP    uint8  // log specific parameter (7 bits), e.g. 1 = host events for LID 0x23
	LSI    uint16 // log specific identifier, e.g. the endurance group for FDP logs
	RAE    bool   // retain asynchronous event
	Offset uint64 // log page offset in bytes (multiple of 4)
	NSID   uint32 // 0 (none) or a namespace, or NSIDAll
	CSI    uint8  // command set identifier (0 = NVM)
	UUIDX  uint8  // UUID index (7 bits)
	OT     bool   // offset type: Offset is an index, not bytes
}

// GetLogPage builds Get Log Page (opcode 0x02) reading len(buf) bytes of p:
// NUMD = len/4 - 1; CDW10 = LID | LSP<<8 | RAE<<15 | NUMDL<<16; CDW11 = NUMDU | LSI<<16;
// CDW12/13 = offset low/high; CDW14 = UUIDX | OT<<23 | CSI<<24. It returns an error if
// len(buf) is not a positive multiple of 4 or the offset is not dword aligned.
func GetLogPage(p LogPage, buf []byte) (Command, error) {
	if len(buf) == 0 || len(buf)%4 != 0 || uint64(len(buf)/4) > 1<<32 {
		return Command{}, fmt.Errorf("nvme: Get Log Page length %d must be a positive multiple of 4", len(buf))
	}
	if !p.OT && p.Offset%4 != 0 {
		return Command{}, fmt.Errorf("nvme: Get Log Page offset %d must be a multiple of 4", p.Offset)
	}
	numd := uint32(len(buf)/4 - 1)
	c := Command{
		Opcode:   OpGetLogPage,
		NSID:     p.NSID,
		CDW10:    uint32(p.LID) | uint32(p.LSP&0x7f)<<8 | (numd&0xffff)<<16,
		CDW11:    numd>>16 | uint32(p.LSI)<<16,
		CDW12:    uint32(p.Offset),
		CDW13:    uint32(p.Offset >> 32),
		CDW14:    uint32(p.UUIDX&0x7f) | uint32(p.CSI)<<24,
		Data:     buf,
		BufIndex: -1,
	}
	if p.RAE {
		c.CDW10 |= 1 << 15
	}
	if p.OT {
		c.CDW14 |= 1 << 23
	}
	return c, nil
}

// ParseGetLogPage recovers the LogPage and transfer length from a Get Log Page command (the
// controller side: the emulated SSD decodes with it).
func ParseGetLogPage(c *Command) (p LogPage, length int) {
	p = LogPage{
		LID:    LogID(c.CDW10),
		LSP:    uint8(c.CDW10>>8) & 0x7f,
		RAE:    c.CDW10&(1<<15) != 0,
		LSI:    uint16(c.CDW11 >> 16),
		Offset: uint64(c.CDW12) | uint64(c.CDW13)<<32,
		NSID:   c.NSID,
		UUIDX:  uint8(c.CDW14) & 0x7f,
		OT:     c.CDW14&(1<<23) != 0,
		CSI:    uint8(c.CDW14 >> 24),
	}
	numd := uint64(c.CDW10>>16) | uint64(c.CDW11&0xffff)<<16
	return p, int((numd + 1) * 4)
}

// GetFeatures builds Get Features (opcode 0x0A): CDW10 = FID | SEL<<8, CDW11 = cdw11
// (feature specific, e.g. the endurance group for FDP 0x1D). buf may be nil for features
// without a data structure.
func GetFeatures(fid FeatureID, sel uint8, nsid, cdw11 uint32, buf []byte) Command {
	return Command{
		Opcode:   OpGetFeatures,
		NSID:     nsid,
		CDW10:    uint32(fid) | uint32(sel&7)<<8,
		CDW11:    cdw11,
		Data:     buf,
		BufIndex: -1,
	}
}

// SetFeatures builds Set Features (opcode 0x09): CDW10 = FID | SV<<31, CDW11/12 feature
// specific (for FDP 0x1D: CDW11 = endurance group, CDW12 = config index<<8 | enable).
func SetFeatures(fid FeatureID, save bool, nsid, cdw11, cdw12 uint32, buf []byte) Command {
	c := Command{
		Opcode:   OpSetFeatures,
		NSID:     nsid,
		CDW10:    uint32(fid),
		CDW11:    cdw11,
		CDW12:    cdw12,
		Data:     buf,
		BufIndex: -1,
	}
	if save {
		c.CDW10 |= 1 << 31
	}
	return c
}
