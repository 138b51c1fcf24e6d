package fdp

import (
	"encoding/binary"
	"fmt"
	"time"
)

// FDP Events log (LID 0x23): 4096 bytes, a u32 count, 60 reserved bytes, then up to 63
// 64-byte event descriptors. Wire format: do not change.
const (
	eventsNOff   = 0
	eventsFirst  = 64
	eventSize    = 64
	evTypeOff    = 0             // u8
	evFlagsOff   = 1             // u8: PIV, NSIDV, LV
	evPIDOff     = 2             // u16
	evTSOff      = 4             // 8 bytes: 48-bit milliseconds, attributes, reserved
	evNSIDOff    = 12            // u32
	evSpecOff    = 16            // 16 bytes type specific
	evRGIDOff    = 32            // u16
	evRUHIDOff   = 34            // u8
	evVendorOff  = 40            // 24 bytes
	evMRFlagsOff = evSpecOff + 0 // Media Reallocated: u8 flags (LBAV)
	evMRNLBAMOff = evSpecOff + 2 // u16
	evMRLBAOff   = evSpecOff + 8 // u64
	tsMillisMask = 1<<48 - 1
	evMRFlagLBAV = 1
)

// Event flags.
const (
	EventFlagPIV   uint8 = 1 << 0 // PID valid
	EventFlagNSIDV uint8 = 1 << 1 // NSID valid
	EventFlagLV    uint8 = 1 << 2 // location (RGID/RUHID) valid
)

// EventType identifies an FDP event. Types below 0x80 are host events, 0x80 and up
// controller events.
type EventType uint8

const (
	EventRUNotFullyWritten     EventType = 0x00
	EventRUTimeLimitExceeded   EventType = 0x01
	EventCtrlResetModifiedRUHs EventType = 0x02
	EventInvalidPID            EventType = 0x03
	EventMediaReallocated      EventType = 0x80
	EventImplicitlyModifiedRUH EventType = 0x81
)

// HostEvent reports whether the type is reported in the host events log.
func (t EventType) HostEvent() bool { return t < 0x80 }

func (t EventType) String() string {
	switch t {
	case EventRUNotFullyWritten:
		return "Reclaim Unit Not Fully Written"
	case EventRUTimeLimitExceeded:
		return "Reclaim Unit Active Time Limit Exceeded"
	case EventCtrlResetModifiedRUHs:
		return "Controller Level Reset Modified Reclaim Unit Handles"
	case EventInvalidPID:
		return "Invalid Placement Identifier"
	case EventMediaReallocated:
		return "Media Reallocated"
	case EventImplicitlyModifiedRUH:
		return "Implicitly Modified Reclaim Unit Handle"
	}
	return "Reserved"
}

// Event is one FDP event descriptor.
type Event struct {
	Type      EventType
	Flags     uint8
	PID       uint16
	Timestamp uint64 // milliseconds since the epoch (48 bits on the wire)
	TSAttr    uint8  // timestamp attributes byte
	NSID      uint32
	// Media Reallocated specifics.
	MRFlags uint8
	NLBAM   uint16
	LBA     uint64
	// Location.
	RGID   uint16
	RUHID  uint8
	Vendor [24]byte
}

// Time returns the timestamp as a time.Time.
func (e *Event) Time() time.Time { return time.UnixMilli(int64(e.Timestamp)) }

// LBAValid reports the Media Reallocated LBAV flag.
func (e *Event) LBAValid() bool { return e.MRFlags&evMRFlagLBAV != 0 }

func (e *Event) encode(d []byte) {
	d[evTypeOff] = uint8(e.Type)
	d[evFlagsOff] = e.Flags
	binary.LittleEndian.PutUint16(d[evPIDOff:], e.PID)
	binary.LittleEndian.PutUint64(d[evTSOff:], e.Timestamp&tsMillisMask|uint64(e.TSAttr)<<48)
	binary.LittleEndian.PutUint32(d[evNSIDOff:], e.NSID)
	d[evMRFlagsOff] = e.MRFlags
	binary.LittleEndian.PutUint16(d[evMRNLBAMOff:], e.NLBAM)
	binary.LittleEndian.PutUint64(d[evMRLBAOff:], e.LBA)
	binary.LittleEndian.PutUint16(d[evRGIDOff:], e.RGID)
	d[evRUHIDOff] = e.RUHID
	copy(d[evVendorOff:], e.Vendor[:])
}

func decodeEvent(d []byte) Event {
	ts := binary.LittleEndian.Uint64(d[evTSOff:])
	e := Event{
		Type:      EventType(d[evTypeOff]),
		Flags:     d[evFlagsOff],
		PID:       binary.LittleEndian.Uint16(d[evPIDOff:]),
		Timestamp: ts & tsMillisMask,
		TSAttr:    uint8(ts >> 48),
		NSID:      binary.LittleEndian.Uint32(d[evNSIDOff:]),
		MRFlags:   d[evMRFlagsOff],
		NLBAM:     binary.LittleEndian.Uint16(d[evMRNLBAMOff:]),
		LBA:       binary.LittleEndian.Uint64(d[evMRLBAOff:]),
		RGID:      binary.LittleEndian.Uint16(d[evRGIDOff:]),
		RUHID:     d[evRUHIDOff],
	}
	copy(e.Vendor[:], d[evVendorOff:evVendorOff+24])
	return e
}

// EventsLog is the FDP events log (host or controller events).
type EventsLog struct {
	Events []Event
}

// Encode returns the 4096-byte log page. At most MaxEvents are kept (the newest).
func (l *EventsLog) Encode() []byte {
	b := make([]byte, EventsLogSize)
	ev := l.Events
	if len(ev) > MaxEvents {
		ev = ev[len(ev)-MaxEvents:]
	}
	binary.LittleEndian.PutUint32(b[eventsNOff:], uint32(len(ev)))
	for i := range ev {
		ev[i].encode(b[eventsFirst+eventSize*i:])
	}
	return b
}

// DecodeEventsLog decodes an events log. The buffer may be shorter than 4096 bytes if it
// still holds the count's worth of events.
func DecodeEventsLog(b []byte) (*EventsLog, error) {
	if len(b) < eventsFirst {
		return nil, fmt.Errorf("%w: events log is %d bytes, need at least %d", ErrShort, len(b), eventsFirst)
	}
	n := binary.LittleEndian.Uint32(b[eventsNOff:])
	if n > MaxEvents {
		return nil, fmt.Errorf("%w: events log holds %d events, at most %d fit", ErrBadSize, n, MaxEvents)
	}
	if need := eventsFirst + eventSize*int(n); len(b) < need {
		return nil, fmt.Errorf("%w: %d events need %d bytes, have %d", ErrShort, n, need, len(b))
	}
	l := &EventsLog{Events: make([]Event, n)}
	for i := range l.Events {
		l.Events[i] = decodeEvent(b[eventsFirst+eventSize*i:])
	}
	return l, nil
}
