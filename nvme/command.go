// Package nvme builds and decodes NVMe commands and talks to a controller through a
// Transport: io_uring URING_CMD or ioctl on Linux, or the in-process emulated FDP SSD. One
// encoding path serves every transport, so testing against the emulator tests the real path.
package nvme

import "fmt"

// Command is a 64-byte NVMe submission as the Linux passthrough interface takes it: the
// driver fills CID, PRPs/SGLs and CDW0 flags itself, so they are not modelled.
type Command struct {
	Opcode uint8
	Flags  uint8 // must be 0 for Linux passthrough
	NSID   uint32
	CDW2   uint32
	CDW3   uint32
	CDW10  uint32
	CDW11  uint32
	CDW12  uint32
	CDW13  uint32
	CDW14  uint32
	CDW15  uint32

	// Data is the data buffer: written to the controller for opcodes whose data-transfer
	// bits (opcode[1:0]) are 01, filled by it for 10. For passthrough transports it must not
	// move while the command is in flight (use memory from blockdev.Alloc).
	Data     []byte
	Metadata []byte

	TimeoutMs uint32
	// BufIndex, when >= 0 and the transport registered buffers, selects the fixed buffer
	// that Data lies in (io_uring IORING_URING_CMD_FIXED). -1 (or an unregistered
	// transport) means a plain user pointer.
	BufIndex int
}

// DataDirection is the direction from the opcode's two low bits (NVMe base spec, Figure "Opcodes").
func (c *Command) DataDirection() Direction { return Direction(c.Opcode & 3) }

// Direction of a command's data transfer.
type Direction uint8

const (
	DirNone          Direction = 0
	DirHostToCtrl    Direction = 1
	DirCtrlToHost    Direction = 2
	DirBidirectional Direction = 3
)

// Completion is what came back for one command.
type Completion struct {
	Status Status // 0 on success; the NVMe status as Linux reports it (see Status)
	Result uint64 // CQE DW0 (low 32 bits) and DW1 (high), as the transport provides
	Err    error  // transport-level failure (an errno from the kernel, a cancelled command)
}

// Status is the NVMe completion status as Linux returns it from passthrough (the CQE status
// field shifted right by one): SC bits 7:0, SCT 10:8, CRD 12:11, More 13, DNR 14.
type Status uint16

func (s Status) SC() uint8  { return uint8(s) }
func (s Status) SCT() uint8 { return uint8(s>>8) & 7 }
func (s Status) CRD() uint8 { return uint8(s>>11) & 3 }
func (s Status) More() bool { return s&(1<<13) != 0 }
func (s Status) DNR() bool  { return s&(1<<14) != 0 }
func (s Status) OK() bool   { return s&0x7ff == 0 }
func (s Status) String() string {
	dnr := ""
	if s.DNR() {
		dnr = " DNR"
	}
	return fmt.Sprintf("status 0x%04x (%s; SCT %d SC 0x%02x%s)", uint16(s), s.Text(), s.SCT(), s.SC(), dnr)
}

// Transport carries commands to a controller and back. Implementations are safe for
// concurrent use.
type Transport interface {
	// Admin runs one admin command and waits for it.
	Admin(cmd *Command) Completion
	// IO runs a batch of I/O commands, keeping up to the transport's queue depth in flight,
	// and fills done[i] for cmds[i]. It returns when all have completed.
	IO(cmds []Command, done []Completion)
	// NSID is the namespace the transport's I/O commands address.
	NSID() uint32
	Close() error
}
