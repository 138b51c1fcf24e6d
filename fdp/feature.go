package fdp

import "fmt"

// FDP feature (FID 0x1D), per endurance group.
//   Get:  CDW11 = ENDGID; result DW0 bit 0 = FDPE, bits 15:8 = FDPCIDX.
//   Set:  CDW11 = ENDGID; CDW12 = FDPCIDX<<8 | FDPE.
// nvme-cli masks the index with 0xf when printing; the full byte is kept here.

// FeatureState is the FDP feature value of one endurance group.
type FeatureState struct {
	Enabled     bool  `json:"fdpe"`
	ConfigIndex uint8 `json:"fdpcidx"`
}

// Value returns the encoding used in Set Features CDW12 and Get Features DW0.
func (f FeatureState) Value() uint32 {
	v := uint32(f.ConfigIndex) << 8
	if f.Enabled {
		v |= 1
	}
	return v
}

// DecodeFeature decodes Get Features DW0 (or Set Features CDW12).
func DecodeFeature(v uint32) FeatureState {
	return FeatureState{Enabled: v&1 != 0, ConfigIndex: uint8(v >> 8)}
}

// FDP Events feature (FID 0x1E), per placement handle.
//   Get:  CDW11 = PHNDL[15:0] | NOET[23:16]; data = NOET 2-byte descriptors {type, attrs
//         (bit 0 enabled)}; DW0 = number of descriptors returned.
//   Set:  CDW11 = PHNDL | NOET<<16; CDW12 bit 0 = enable; data = NOET one-byte types.

// EventsFeatureCDW11 builds CDW11 of the FDP Events feature.
func EventsFeatureCDW11(phndl uint16, noet uint8) uint32 {
	return uint32(phndl) | uint32(noet)<<16
}

// SplitEventsFeatureCDW11 is the inverse of EventsFeatureCDW11.
func SplitEventsFeatureCDW11(cdw11 uint32) (phndl uint16, noet uint8) {
	return uint16(cdw11), uint8(cdw11 >> 16)
}

// EventEnable is one descriptor of Get Features FDP Events.
type EventEnable struct {
	Type    EventType `json:"evt"`
	Enabled bool      `json:"evta"`
}

// EncodeEventEnables lays out Get Features FDP Events data.
func EncodeEventEnables(ev []EventEnable) []byte {
	b := make([]byte, 2*len(ev))
	for i, e := range ev {
		b[2*i] = uint8(e.Type)
		if e.Enabled {
			b[2*i+1] = 1
		}
	}
	return b
}

// DecodeEventEnables decodes n descriptors of Get Features FDP Events data.
func DecodeEventEnables(b []byte, n int) ([]EventEnable, error) {
	if n < 0 || len(b) < 2*n {
		return nil, fmt.Errorf("%w: %d event descriptors need %d bytes, have %d", ErrShort, n, 2*n, len(b))
	}
	ev := make([]EventEnable, n)
	for i := range ev {
		ev[i] = EventEnable{Type: EventType(b[2*i]), Enabled: b[2*i+1]&1 != 0}
	}
	return ev, nil
}

// EncodeEventTypes lays out Set Features FDP Events data (one byte per type).
func EncodeEventTypes(types []EventType) []byte {
	b := make([]byte, len(types))
	for i, t := range types {
		b[i] = uint8(t)
	}
	return b
}

// DecodeEventTypes reads noet event types from Set Features FDP Events data.
func DecodeEventTypes(b []byte, noet int) ([]EventType, error) {
	if len(b) < noet {
		return nil, fmt.Errorf("%w: %d event types need %d bytes, have %d", ErrShort, noet, noet, len(b))
	}
	t := make([]EventType, noet)
	for i := range t {
		t[i] = EventType(b[i])
	}
	return t, nil
}
