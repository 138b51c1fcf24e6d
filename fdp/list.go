package fdp

import (
	"fmt"
	"strconv"
	"strings"
)

// ParsePIDs parses a comma list of placement identifiers as nvme-cli takes them ("1,2,0x10").
func ParsePIDs(s string) ([]uint16, error) {
	v, err := parseList(s, 16)
	out := make([]uint16, len(v))
	for i, x := range v {
		out[i] = uint16(x)
	}
	return out, err
}

// ParseEventTypes parses a comma list of FDP event types ("0,3"); at most 255, as the FDP
// Events feature takes them.
func ParseEventTypes(s string) ([]EventType, error) {
	v, err := parseList(s, 8)
	if err == nil && len(v) > 255 {
		err = fmt.Errorf("%w: %d event types, at most 255", ErrBadSize, len(v))
	}
	out := make([]EventType, len(v))
	for i, x := range v {
		out[i] = EventType(x)
	}
	return out, err
}

func parseList(s string, bits int) ([]uint64, error) {
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.ParseUint(f, 0, bits)
		if err != nil {
			return nil, fmt.Errorf("bad value %q in list %q (want %d-bit numbers separated by commas)", f, s, bits)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty list %q", s)
	}
	return out, nil
}
