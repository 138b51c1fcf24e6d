package fdp

import (
	"encoding/binary"
	"fmt"

	"github.com/rbctl/rbctl/nvme"
)

// RUH Status (I/O Management Receive, MO 1): a 16-byte header whose u16 at 14 is the
// descriptor count, then 32-byte descriptors. Wire format: do not change.
const (
	RUHStatusHdrSize  = 16
	RUHStatusDescSize = 32
	ruhsNOff          = 14
	ruhsPIDOff        = 0 // u16
	ruhsRUHIDOff      = 2 // u16
	ruhsEARUTROff     = 4 // u32 seconds
	ruhsRUAMWOff      = 8 // u64 logical blocks
)

// RUHStatusDesc is one placement handle's status.
type RUHStatusDesc struct {
	PID    uint16 `json:"pid"`
	RUHID  uint16 `json:"ruhid"`
	EARUTR uint32 `json:"earutr"` // estimated active reclaim unit time remaining, seconds
	RUAMW  uint64 `json:"ruamw"`  // reclaim unit available media writes, logical blocks
}

// RUHStatus is the whole RUH status payload.
type RUHStatus struct {
	Descs []RUHStatusDesc
}

// RUHStatusSize is the payload size for n descriptors.
func RUHStatusSize(n int) int { return RUHStatusHdrSize + RUHStatusDescSize*n }

// Encode lays the status out. A controller returns as much of it as the host asked for; the
// count in the header always says how many descriptors exist.
func (s *RUHStatus) Encode() ([]byte, error) {
	if len(s.Descs) > 0xffff {
		return nil, fmt.Errorf("%w: %d descriptors", ErrBadSize, len(s.Descs))
	}
	b := make([]byte, RUHStatusSize(len(s.Descs)))
	binary.LittleEndian.PutUint16(b[ruhsNOff:], uint16(len(s.Descs)))
	for i, d := range s.Descs {
		p := b[RUHStatusHdrSize+RUHStatusDescSize*i:]
		binary.LittleEndian.PutUint16(p[ruhsPIDOff:], d.PID)
		binary.LittleEndian.PutUint16(p[ruhsRUHIDOff:], d.RUHID)
		binary.LittleEndian.PutUint32(p[ruhsEARUTROff:], d.EARUTR)
		binary.LittleEndian.PutUint64(p[ruhsRUAMWOff:], d.RUAMW)
	}
	return b, nil
}

// RUHStatusCount reads the descriptor count from the 16-byte header.
func RUHStatusCount(hdr []byte) (int, error) {
	if len(hdr) < RUHStatusHdrSize {
		return 0, fmt.Errorf("%w: RUH status header is %d bytes, need %d", ErrShort, len(hdr), RUHStatusHdrSize)
	}
	return int(binary.LittleEndian.Uint16(hdr[ruhsNOff:])), nil
}

// DecodeRUHStatus decodes a RUH status payload.
func DecodeRUHStatus(b []byte) (*RUHStatus, error) {
	n, err := RUHStatusCount(b)
	if err != nil {
		return nil, err
	}
	if len(b) < RUHStatusSize(n) {
		return nil, fmt.Errorf("%w: %d RUH status descriptors need %d bytes, have %d", ErrShort, n, RUHStatusSize(n), len(b))
	}
	s := &RUHStatus{Descs: make([]RUHStatusDesc, n)}
	for i := range s.Descs {
		p := b[RUHStatusHdrSize+RUHStatusDescSize*i:]
		s.Descs[i] = RUHStatusDesc{
			PID:    binary.LittleEndian.Uint16(p[ruhsPIDOff:]),
			RUHID:  binary.LittleEndian.Uint16(p[ruhsRUHIDOff:]),
			EARUTR: binary.LittleEndian.Uint32(p[ruhsEARUTROff:]),
			RUAMW:  binary.LittleEndian.Uint64(p[ruhsRUAMWOff:]),
		}
	}
	return s, nil
}

// RUHUpdate is the I/O Management Send MO 1 payload: the PIDs whose reclaim units to close.
// The command carries CDW10 = 1 | (len(PIDs)−1)<<16 and the PIDs as little-endian u16s.
type RUHUpdate struct {
	PIDs []uint16
}

// CDW10 returns the I/O Management Send CDW10 for this update.
func (u *RUHUpdate) CDW10() (uint32, error) {
	if len(u.PIDs) == 0 || len(u.PIDs) > 1<<16 {
		return 0, fmt.Errorf("%w: RUH update with %d PIDs", ErrBadSize, len(u.PIDs))
	}
	return uint32(nvme.IOMgmtSendRUHUpdate) | uint32(len(u.PIDs)-1)<<16, nil
}

// Encode returns the data buffer.
func (u *RUHUpdate) Encode() []byte {
	b := make([]byte, 2*len(u.PIDs))
	for i, p := range u.PIDs {
		binary.LittleEndian.PutUint16(b[2*i:], p)
	}
	return b
}

// DecodeRUHUpdate decodes the data of an I/O Management Send with the given CDW10 (the
// controller side). It checks MO and that the data holds NPID PIDs.
func DecodeRUHUpdate(cdw10 uint32, data []byte) (*RUHUpdate, error) {
	if nvme.IOMgmtOp(cdw10) != nvme.IOMgmtSendRUHUpdate {
		return nil, fmt.Errorf("%w: management operation %d is not RUH update", ErrBadSize, uint8(cdw10))
	}
	n := int(cdw10>>16) + 1
	if len(data) < 2*n {
		return nil, fmt.Errorf("%w: %d PIDs need %d bytes, have %d", ErrShort, n, 2*n, len(data))
	}
	u := &RUHUpdate{PIDs: make([]uint16, n)}
	for i := range u.PIDs {
		u.PIDs[i] = binary.LittleEndian.Uint16(data[2*i:])
	}
	return u, nil
}
