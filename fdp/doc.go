// Package fdp speaks NVMe Flexible Data Placement (TP4146): it decodes and encodes the four
// FDP log pages (configurations 0x20, reclaim unit handle usage 0x21, statistics 0x22,
// events 0x23), the RUH Status and RUH Update payloads of I/O Management Receive/Send, the
// FDP (0x1D) and FDP Events (0x1E) features, and placement identifiers. The decoders read
// what a device returns; the encoders are used by the emulated FDP SSD (package emu), so
// both sides share one definition of every byte. Layouts: docs/fdp.md and
// /work/shared/docs/nvme-fdp-reference.md §2.3.
//
// Discover finds out, through any nvme.Transport, whether a namespace has FDP, whether it is
// enabled, and which placement identifiers its placement handles map to.
package fdp

import "errors"

// Log identifiers, features and management operations. Wire constants: do not change.
const (
	LogConfigs uint8 = 0x20 // FDP Configurations
	LogUsage   uint8 = 0x21 // Reclaim Unit Handle Usage
	LogStats   uint8 = 0x22 // FDP Statistics
	LogEvents  uint8 = 0x23 // FDP Events

	FeatureFDP    uint8 = 0x1D // FDP enable + configuration index, per endurance group
	FeatureEvents uint8 = 0x1E // FDP event enables, per placement handle

	OpIOMgmtRecv uint8 = 0x12 // I/O Management Receive
	OpIOMgmtSend uint8 = 0x1D // I/O Management Send
	MORUHStatus  uint8 = 1    // I/O Management Receive MO: Reclaim Unit Handle Status
	MORUHUpdate  uint8 = 1    // I/O Management Send MO: Reclaim Unit Handle Update

	// DirectiveDataPlacement is the DTYPE for FDP writes (CDW12 bits 23:20).
	DirectiveDataPlacement uint8 = 2

	// CtrattFDPS is Identify Controller CTRATT bit 19: FDP supported.
	CtrattFDPS uint32 = 1 << 19
	// CtrattEnduranceGroups is CTRATT bit 4: endurance groups supported.
	CtrattEnduranceGroups uint32 = 1 << 4

	// EventsLogSize is the fixed size of the FDP Events log page.
	EventsLogSize = 4096
	// MaxEvents is how many events fit in the events log.
	MaxEvents = 63
	// StatsLogSize is the size of the FDP Statistics log page.
	StatsLogSize = 64
)

// Decoder errors, in the order decoders check them.
var (
	// ErrShort: the buffer is shorter than the structure it must hold.
	ErrShort = errors.New("fdp: buffer too short")
	// ErrBadSize: a size or count field is inconsistent with the buffer or the structure.
	ErrBadSize = errors.New("fdp: inconsistent size field")
	// ErrBadPID: a placement identifier or handle outside the configuration.
	ErrBadPID = errors.New("fdp: invalid placement identifier")
	// ErrFDPNotSupported: the controller does not report FDP (CTRATT bit 19 clear).
	ErrFDPNotSupported = errors.New("FDP not supported")
)
