package fdp

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseLists(t *testing.T) {
	p, err := ParsePIDs(" 1, 0x10,,2 ")
	if err != nil || !slices.Equal(p, []uint16{1, 16, 2}) {
		t.Errorf("PIDs %v %v", p, err)
	}
	for _, bad := range []string{"", ",", "1,x", "65536", "-1"} {
		if _, err := ParsePIDs(bad); err == nil {
			t.Errorf("PIDs %q accepted", bad)
		}
	}
	e, err := ParseEventTypes("0,3")
	if err != nil || !slices.Equal(e, []EventType{EventRUNotFullyWritten, 3}) {
		t.Errorf("event types %v %v", e, err)
	}
	if _, err := ParseEventTypes("256"); err == nil {
		t.Error("event type 256 accepted")
	}
	if _, err := ParseEventTypes(strings.Repeat("1,", 256)); !errors.Is(err, ErrBadSize) {
		t.Errorf("256 event types: %v", err)
	}
}
