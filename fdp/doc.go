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

// Sizes of the fixed-size FDP structures. Wire constants: do not change. The log page,
// feature, opcode and directive identifiers are package nvme's (nvme.LogFDPConfigs,
// nvme.FeatFDP, nvme.IOMgmtRecvRUHStatus, nvme.DirTypeDataPlacement, nvme.CTRATTFDPS):
// one spelling each.
const (
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
