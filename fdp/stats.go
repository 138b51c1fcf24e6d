package fdp

import "fmt"

// FDP Statistics log (LID 0x22), 64 bytes. Wire format: do not change.
const (
	statsHBMWOff = 0  // host bytes with metadata written
	statsMBMWOff = 16 // media bytes with metadata written
	statsMBEOff  = 32 // media bytes erased
)

// Stats is the FDP statistics log of an endurance group.
type Stats struct {
	HBMW Uint128 `json:"hbmw"`
	MBMW Uint128 `json:"mbmw"`
	MBE  Uint128 `json:"mbe"`
}

// Encode returns the 64-byte log page.
func (s *Stats) Encode() []byte {
	b := make([]byte, StatsLogSize)
	s.HBMW.Put(b[statsHBMWOff:])
	s.MBMW.Put(b[statsMBMWOff:])
	s.MBE.Put(b[statsMBEOff:])
	return b
}

// DecodeStats decodes the statistics log.
func DecodeStats(b []byte) (*Stats, error) {
	if len(b) < 48 {
		return nil, fmt.Errorf("%w: statistics log is %d bytes, need 48", ErrShort, len(b))
	}
	return &Stats{HBMW: GetUint128(b[statsHBMWOff:]), MBMW: GetUint128(b[statsMBMWOff:]), MBE: GetUint128(b[statsMBEOff:])}, nil
}

// WAF is MBMW/HBMW, or 0 when nothing was written.
func (s *Stats) WAF() float64 { return WAF(s.HBMW, s.MBMW) }

// Sub is the per-counter difference s − prev (the activity between two reads).
func (s *Stats) Sub(prev *Stats) Stats {
	return Stats{HBMW: s.HBMW.Sub(prev.HBMW), MBMW: s.MBMW.Sub(prev.MBMW), MBE: s.MBE.Sub(prev.MBE)}
}

// WAF is media bytes over host bytes, 0 when host is zero.
func WAF(host, media Uint128) float64 {
	if host.IsZero() {
		return 0
	}
	return media.Float64() / host.Float64()
}
