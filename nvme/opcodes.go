package nvme

// Opcodes, CNS values, log identifiers and feature identifiers used by rbctl. Wire values
// from the NVMe base and NVM command set specifications (and TP4146 for FDP); never change.

// Admin command opcodes.
const (
	OpGetLogPage    uint8 = 0x02
	OpIdentify      uint8 = 0x06
	OpSetFeatures   uint8 = 0x09
	OpGetFeatures   uint8 = 0x0A
	OpDirectiveSend uint8 = 0x19
	OpDirectiveRecv uint8 = 0x1A
)

// I/O (NVM command set) opcodes.
const (
	OpFlush             uint8 = 0x00
	OpWrite             uint8 = 0x01
	OpRead              uint8 = 0x02
	OpDatasetManagement uint8 = 0x09
	OpIOMgmtRecv        uint8 = 0x12 // I/O Management Receive
	OpIOMgmtSend        uint8 = 0x1D // I/O Management Send
)

// Identify CNS values (CDW10 bits 7:0).
const (
	CNSNamespace            uint8 = 0x00
	CNSController           uint8 = 0x01
	CNSActiveNamespaces     uint8 = 0x02
	CNSNSDescriptors        uint8 = 0x03
	CNSCSINamespace         uint8 = 0x05
	CNSCSIController        uint8 = 0x06
	CNSIndependentNamespace uint8 = 0x08 // I/O command set independent namespace
	CNSEnduranceGroupList   uint8 = 0x19
)

// IdentifyDataLen is the size of every Identify data structure.
const IdentifyDataLen = 4096

// LogID is a log page identifier (Get Log Page CDW10 bits 7:0).
type LogID uint8

// Log page identifiers (the four FDP logs: TP4146).
const (
	LogErrorInfo       LogID = 0x01
	LogSMART           LogID = 0x02
	LogFirmwareSlot    LogID = 0x03
	LogCommandsEffects LogID = 0x05
	LogEnduranceGroup  LogID = 0x09
	LogFDPConfigs      LogID = 0x20 // FDP Configurations
	LogRUHUsage        LogID = 0x21 // Reclaim Unit Handle Usage
	LogFDPStats        LogID = 0x22 // FDP Statistics
	LogFDPEvents       LogID = 0x23 // FDP Events
)

// FeatureID is a feature identifier (Get/Set Features CDW10 bits 7:0).
type FeatureID uint8

// Feature identifiers.
const (
	FeatArbitration   FeatureID = 0x01
	FeatPowerMgmt     FeatureID = 0x02
	FeatTempThreshold FeatureID = 0x04
	FeatVolatileWC    FeatureID = 0x06
	FeatNumQueues     FeatureID = 0x07
	FeatFDP           FeatureID = 0x1D // FDP enable + configuration index, per endurance group
	FeatFDPEvents     FeatureID = 0x1E // FDP event enables, per placement handle
)

// Get Features SEL values (CDW10 bits 10:8).
const (
	SelCurrent   uint8 = 0
	SelDefault   uint8 = 1
	SelSaved     uint8 = 2
	SelSupported uint8 = 3 // supported capabilities
)

// DirectiveType is a write's directive type (Write CDW12 bits 23:20, DTYPE).
type DirectiveType uint8

// Directive types.
const (
	DirTypeIdentify      DirectiveType = 0
	DirTypeStreams       DirectiveType = 1
	DirTypeDataPlacement DirectiveType = 2 // FDP: DSPEC is the placement identifier
)

// Dataset Management attributes (CDW11) and limits.
const (
	DSMIntegralRead  uint32 = 1 << 0 // IDR
	DSMIntegralWrite uint32 = 1 << 1 // IDW
	DSMDeallocate    uint32 = 1 << 2 // AD
	DSMMaxRanges            = 256    // ranges per command
	DSMRangeLen             = 16     // bytes per range descriptor
)

// IOMgmtOp is an I/O Management Receive/Send management operation (CDW10 bits 7:0, MO).
type IOMgmtOp uint8

// I/O Management operations; package fdp gives them their payloads.
const (
	IOMgmtRecvRUHStatus IOMgmtOp = 1 // I/O Management Receive: Reclaim Unit Handle Status
	IOMgmtSendRUHUpdate IOMgmtOp = 1 // I/O Management Send: Reclaim Unit Handle Update
)

const (
	// NSIDAll addresses every namespace (or none in particular) in admin commands.
	NSIDAll uint32 = 0xFFFFFFFF
	// MaxNLB is the most blocks one Read or Write moves (16-bit, 0's based NLB field).
	MaxNLB = 1 << 16
	// DefaultMinPageSize is the controller memory page size assumed when CAP.MPSMIN is not
	// visible (it is not through Linux passthrough): 4 KiB, the minimum the spec allows.
	DefaultMinPageSize = 4096
)

// ONCS (Optional NVM Command Support) bits.
const (
	ONCSCompare      uint16 = 1 << 0
	ONCSWriteUncorr  uint16 = 1 << 1
	ONCSDSM          uint16 = 1 << 2
	ONCSWriteZeroes  uint16 = 1 << 3
	ONCSSaveSelect   uint16 = 1 << 4
	ONCSReservations uint16 = 1 << 5
	ONCSTimestamp    uint16 = 1 << 6
	ONCSVerify       uint16 = 1 << 7
	ONCSCopy         uint16 = 1 << 8
)

// CTRATT (Controller Attributes) bits.
const (
	CTRATTHostIDExt       uint32 = 1 << 0
	CTRATTEnduranceGroups uint32 = 1 << 4
	CTRATTNVMSets         uint32 = 1 << 2
	CTRATTFDPS            uint32 = 1 << 19 // Flexible Data Placement supported
)

var adminNames = map[uint8]string{
	0x00: "Delete I/O SQ", 0x01: "Create I/O SQ", OpGetLogPage: "Get Log Page",
	0x04: "Delete I/O CQ", 0x05: "Create I/O CQ", OpIdentify: "Identify", 0x08: "Abort",
	OpSetFeatures: "Set Features", OpGetFeatures: "Get Features", 0x0C: "Async Event Request",
	0x0D: "Namespace Management", 0x10: "Firmware Commit", 0x11: "Firmware Image Download",
	0x14: "Device Self-test", 0x15: "Namespace Attachment", 0x18: "Keep Alive",
	OpDirectiveSend: "Directive Send", OpDirectiveRecv: "Directive Receive",
	0x80: "Format NVM", 0x84: "Sanitize",
}

var ioNames = map[uint8]string{
	OpFlush: "Flush", OpWrite: "Write", OpRead: "Read", 0x04: "Write Uncorrectable",
	0x05: "Compare", 0x08: "Write Zeroes", OpDatasetManagement: "Dataset Management",
	0x0C: "Verify", OpIOMgmtRecv: "I/O Management Receive", 0x19: "Copy",
	OpIOMgmtSend: "I/O Management Send",
}

// CommandName names a command for messages, with the detail that tells commands of one
// opcode apart: "Identify (CNS 0x01)", "Get Log Page (LID 0x20)", "Write".
func CommandName(admin bool, c *Command) string {
	names := ioNames
	if admin {
		names = adminNames
	}
	n, ok := names[c.Opcode]
	if !ok {
		kind := "I/O"
		if admin {
			kind = "admin"
		}
		return sprintf("%s opcode 0x%02x", kind, c.Opcode)
	}
	if admin {
		switch c.Opcode {
		case OpIdentify:
			return sprintf("%s (CNS 0x%02x)", n, uint8(c.CDW10))
		case OpGetLogPage:
			return sprintf("%s (LID 0x%02x)", n, uint8(c.CDW10))
		case OpGetFeatures, OpSetFeatures:
			return sprintf("%s (FID 0x%02x)", n, uint8(c.CDW10))
		}
	} else if c.Opcode == OpIOMgmtRecv || c.Opcode == OpIOMgmtSend {
		return sprintf("%s (MO %d)", n, uint8(c.CDW10))
	}
	return n
}
