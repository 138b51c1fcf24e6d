package nvme

import (
	"errors"
	"fmt"
)

var sprintf = fmt.Sprintf

// Status code types (SCT).
const (
	SCTGeneric         uint8 = 0
	SCTCommandSpecific uint8 = 1
	SCTMedia           uint8 = 2
	SCTPath            uint8 = 3
	SCTVendor          uint8 = 7
)

// MakeStatus composes a Status as Linux passthrough reports it (the emulator answers with
// these too).
func MakeStatus(sct, sc uint8, dnr bool) Status {
	s := Status(sc) | Status(sct&7)<<8
	if dnr {
		s |= 1 << 14
	}
	return s
}

// Common statuses, all with DNR set as controllers report them for these conditions.
var (
	StatusInvalidOpcode    = MakeStatus(SCTGeneric, 0x01, true) // 0x4001
	StatusInvalidField     = MakeStatus(SCTGeneric, 0x02, true) // 0x4002
	StatusInvalidNamespace = MakeStatus(SCTGeneric, 0x0B, true)
	StatusCommandSequence  = MakeStatus(SCTGeneric, 0x0C, true)
	StatusLBAOutOfRange    = MakeStatus(SCTGeneric, 0x80, true)
	StatusInvalidLogPage   = MakeStatus(SCTCommandSpecific, 0x09, true)
)

type statusKey struct{ sct, sc uint8 }

// statusSentinel is an error matched by errors.Is against a *StatusError with the same
// SCT and SC (DNR, More and CRD are ignored).
type statusSentinel struct {
	key  statusKey
	text string
}

func (e *statusSentinel) Error() string { return "nvme: " + e.text }

func newSentinel(sct, sc uint8) *statusSentinel {
	k := statusKey{sct, sc}
	return &statusSentinel{key: k, text: statusTexts[k]}
}

// Sentinels for the statuses callers branch on; use errors.Is(err, nvme.ErrInvalidOpcode).
var (
	ErrInvalidOpcode     error = newSentinel(SCTGeneric, 0x01)
	ErrInvalidField      error = newSentinel(SCTGeneric, 0x02)
	ErrDataTransfer      error = newSentinel(SCTGeneric, 0x04)
	ErrInternal          error = newSentinel(SCTGeneric, 0x06)
	ErrAborted           error = newSentinel(SCTGeneric, 0x07)
	ErrInvalidNamespace  error = newSentinel(SCTGeneric, 0x0B)
	ErrCommandSequence   error = newSentinel(SCTGeneric, 0x0C)
	ErrFDPDisabled       error = newSentinel(SCTGeneric, 0x29)
	ErrInvalidPHList     error = newSentinel(SCTGeneric, 0x2A)
	ErrLBAOutOfRange     error = newSentinel(SCTGeneric, 0x80)
	ErrCapacityExceeded  error = newSentinel(SCTGeneric, 0x81)
	ErrNamespaceNotReady error = newSentinel(SCTGeneric, 0x82)
	ErrInvalidLogPage    error = newSentinel(SCTCommandSpecific, 0x09)
	ErrUnrecoveredRead   error = newSentinel(SCTMedia, 0x81)
	ErrWriteFault        error = newSentinel(SCTMedia, 0x80)
)

var statusTexts = map[statusKey]string{
	{0, 0x00}: "Successful Completion",
	{0, 0x01}: "Invalid Command Opcode",
	{0, 0x02}: "Invalid Field in Command",
	{0, 0x03}: "Command ID Conflict",
	{0, 0x04}: "Data Transfer Error",
	{0, 0x05}: "Commands Aborted due to Power Loss Notification",
	{0, 0x06}: "Internal Error",
	{0, 0x07}: "Command Abort Requested",
	{0, 0x08}: "Command Aborted due to SQ Deletion",
	{0, 0x09}: "Command Aborted due to Failed Fused Command",
	{0, 0x0A}: "Command Aborted due to Missing Fused Command",
	{0, 0x0B}: "Invalid Namespace or Format",
	{0, 0x0C}: "Command Sequence Error",
	{0, 0x0D}: "Invalid SGL Segment Descriptor",
	{0, 0x0E}: "Invalid Number of SGL Descriptors",
	{0, 0x0F}: "Data SGL Length Invalid",
	{0, 0x10}: "Metadata SGL Length Invalid",
	{0, 0x11}: "SGL Descriptor Type Invalid",
	{0, 0x15}: "Operation Denied",
	{0, 0x1A}: "Sanitize In Progress",
	{0, 0x1D}: "Command Interrupted",
	{0, 0x20}: "Namespace is Write Protected",
	{0, 0x21}: "Command Interrupted",
	{0, 0x22}: "Transient Transport Error",
	{0, 0x29}: "FDP Disabled",
	{0, 0x2A}: "Invalid Placement Handle List",
	{0, 0x80}: "LBA Out of Range",
	{0, 0x81}: "Capacity Exceeded",
	{0, 0x82}: "Namespace Not Ready",
	{0, 0x83}: "Reservation Conflict",
	{0, 0x84}: "Format In Progress",
	{1, 0x00}: "Completion Queue Invalid",
	{1, 0x01}: "Invalid Queue Identifier",
	{1, 0x02}: "Invalid Queue Size",
	{1, 0x05}: "Invalid Firmware Slot",
	{1, 0x06}: "Invalid Firmware Image",
	{1, 0x09}: "Invalid Log Page",
	{1, 0x0A}: "Invalid Format",
	{1, 0x0D}: "Feature Identifier Not Saveable",
	{1, 0x0E}: "Feature Not Changeable",
	{1, 0x0F}: "Feature Not Namespace Specific",
	{1, 0x80}: "Conflicting Attributes",
	{1, 0x81}: "Invalid Protection Information",
	{1, 0x82}: "Attempted Write to Read Only Range",
	{2, 0x80}: "Write Fault",
	{2, 0x81}: "Unrecovered Read Error",
	{2, 0x82}: "End-to-end Guard Check Error",
	{2, 0x83}: "End-to-end Application Tag Check Error",
	{2, 0x84}: "End-to-end Reference Tag Check Error",
	{2, 0x85}: "Compare Failure",
	{2, 0x86}: "Access Denied",
	{2, 0x87}: "Deallocated or Unwritten Logical Block",
	{3, 0x00}: "Internal Path Error",
	{3, 0x60}: "Internal Path Error",
	{3, 0x70}: "Path Error: Controller Pathing Error",
	{3, 0x71}: "Path Error: Host Pathing Error",
}

var sctNames = [8]string{"Generic", "Command Specific", "Media and Data Integrity", "Path Related", "SCT 4", "SCT 5", "SCT 6", "Vendor Specific"}

// Text is the status' meaning from the specification ("Invalid Field in Command"), or a
// description by type for codes without a name here.
func (s Status) Text() string {
	if t, ok := statusTexts[statusKey{s.SCT(), s.SC()}]; ok {
		return t
	}
	return sprintf("%s status 0x%02x", sctNames[s.SCT()], s.SC())
}

// StatusError is a command that completed with a non-zero NVMe status.
type StatusError struct {
	Cmd    string // the command, as CommandName names it
	Status Status
}

func (e *StatusError) Error() string {
	dnr := ""
	if e.Status.DNR() {
		dnr = ", DNR"
	}
	return sprintf("nvme %s: %s (status 0x%04x: SCT %d SC 0x%02x%s)", e.Cmd, e.Status.Text(), uint16(e.Status), e.Status.SCT(), e.Status.SC(), dnr)
}

// Is matches the status sentinels (ErrInvalidOpcode, ...) by SCT and SC.
func (e *StatusError) Is(target error) bool {
	var s *statusSentinel
	if errors.As(target, &s) {
		return s.key == statusKey{e.Status.SCT(), e.Status.SC()}
	}
	return false
}

// Check turns a completion into an error naming the command: the transport error (wrapped
// with the name), a *StatusError for a non-zero status, or nil.
func (c Completion) Check(cmd string) error {
	if c.Err != nil {
		return fmt.Errorf("nvme %s: %w", cmd, c.Err)
	}
	if c.Status != 0 {
		return &StatusError{Cmd: cmd, Status: c.Status}
	}
	return nil
}

// RunAdmin sends an admin command through t and returns its completion result (DW0) or
// an error naming the command.
func RunAdmin(t Transport, c *Command) (uint64, error) {
	comp := t.Admin(c)
	return comp.Result, comp.Check(CommandName(true, c))
}

// RunIO sends one I/O command through t and returns its result or an error naming it.
func RunIO(t Transport, c *Command) (uint64, error) {
	cmds := []Command{*c}
	done := make([]Completion, 1)
	t.IO(cmds, done)
	return done[0].Result, done[0].Check(CommandName(false, c))
}
