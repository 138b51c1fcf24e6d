package fdp

import (
	"encoding/binary"
	"fmt"
)

// Reclaim Unit Handle Usage log (LID 0x21). Wire format: do not change.
const (
	usageHdrSize  = 8 // u16 NRUH, 6 reserved
	usageDescSize = 8 // u8 RUHA, 7 reserved
)

// RUHAttr says who uses a reclaim unit handle.
type RUHAttr uint8

const (
	RUHUnused              RUHAttr = 0
	RUHHostSpecified       RUHAttr = 1
	RUHControllerSpecified RUHAttr = 2
)

func (a RUHAttr) String() string {
	switch a {
	case RUHUnused:
		return "Unused"
	case RUHHostSpecified:
		return "Host Specified"
	case RUHControllerSpecified:
		return "Controller Specified"
	}
	return "Unknown"
}

// UsageLog is the RUH usage log: one attribute per reclaim unit handle.
type UsageLog struct {
	Attrs []RUHAttr
}

// UsageLogSize is the size of a usage log with nruh descriptors.
func UsageLogSize(nruh int) int { return usageHdrSize + usageDescSize*nruh }

// Encode lays the log out as a device returns it.
func (l *UsageLog) Encode() ([]byte, error) {
	if len(l.Attrs) > 0xffff {
		return nil, fmt.Errorf("%w: %d handles", ErrBadSize, len(l.Attrs))
	}
	b := make([]byte, UsageLogSize(len(l.Attrs)))
	binary.LittleEndian.PutUint16(b, uint16(len(l.Attrs)))
	for i, a := range l.Attrs {
		b[usageHdrSize+usageDescSize*i] = uint8(a)
	}
	return b, nil
}

// UsageLogNRUH reads the handle count from the 8-byte header.
func UsageLogNRUH(hdr []byte) (int, error) {
	if len(hdr) < usageHdrSize {
		return 0, fmt.Errorf("%w: usage log header is %d bytes, need %d", ErrShort, len(hdr), usageHdrSize)
	}
	return int(binary.LittleEndian.Uint16(hdr)), nil
}

// DecodeUsageLog decodes a RUH usage log.
func DecodeUsageLog(b []byte) (*UsageLog, error) {
	n, err := UsageLogNRUH(b)
	if err != nil {
		return nil, err
	}
	if len(b) < UsageLogSize(n) {
		return nil, fmt.Errorf("%w: usage log with %d handles needs %d bytes, have %d", ErrShort, n, UsageLogSize(n), len(b))
	}
	l := &UsageLog{Attrs: make([]RUHAttr, n)}
	for i := range l.Attrs {
		l.Attrs[i] = RUHAttr(b[usageHdrSize+usageDescSize*i])
	}
	return l, nil
}
