package nvme

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
)

func TestStatusDecoding(t *testing.T) {
	for _, tc := range []struct {
		s          Status
		sct, sc    uint8
		crd        uint8
		more, dnr  bool
		text       string
		sentinel   error
		notSentinl error
	}{
		{0x4001, 0, 0x01, 0, false, true, "Invalid Command Opcode", ErrInvalidOpcode, ErrInvalidField},
		{0x4002, 0, 0x02, 0, false, true, "Invalid Field in Command", ErrInvalidField, ErrInvalidOpcode},
		{0x0002, 0, 0x02, 0, false, false, "Invalid Field in Command", ErrInvalidField, nil},
		{0x400B, 0, 0x0B, 0, false, true, "Invalid Namespace or Format", ErrInvalidNamespace, nil},
		{0x400C, 0, 0x0C, 0, false, true, "Command Sequence Error", ErrCommandSequence, nil},
		{0x4029, 0, 0x29, 0, false, true, "FDP Disabled", ErrFDPDisabled, nil},
		{0x402A, 0, 0x2A, 0, false, true, "Invalid Placement Handle List", ErrInvalidPHList, nil},
		{0x4080, 0, 0x80, 0, false, true, "LBA Out of Range", ErrLBAOutOfRange, nil},
		{0x4109, 1, 0x09, 0, false, true, "Invalid Log Page", ErrInvalidLogPage, ErrInvalidField},
		{0x0281, 2, 0x81, 0, false, false, "Unrecovered Read Error", ErrUnrecoveredRead, nil},
		{0x2806, 0, 0x06, 1, true, false, "Internal Error", ErrInternal, nil},
		{0x1004, 0, 0x04, 2, false, false, "Data Transfer Error", ErrDataTransfer, nil},
		{0x47C1, 7, 0xC1, 0, false, true, "Vendor Specific status 0xc1", nil, ErrInvalidOpcode},
		{0x0102, 1, 0x02, 0, false, false, "Invalid Queue Size", nil, ErrInvalidField},
	} {
		s := tc.s
		if s.SCT() != tc.sct || s.SC() != tc.sc || s.CRD() != tc.crd || s.More() != tc.more || s.DNR() != tc.dnr {
			t.Errorf("%#x: sct %d sc %#x crd %d more %v dnr %v", uint16(s), s.SCT(), s.SC(), s.CRD(), s.More(), s.DNR())
		}
		if s.Text() != tc.text {
			t.Errorf("%#x: Text %q, want %q", uint16(s), s.Text(), tc.text)
		}
		err := Completion{Status: s}.Check("Identify (CNS 0x01)")
		var se *StatusError
		if !errors.As(err, &se) || se.Status != s {
			t.Fatalf("%#x: Check gave %v", uint16(s), err)
		}
		if !strings.Contains(err.Error(), "Identify (CNS 0x01)") || !strings.Contains(err.Error(), tc.text) ||
			strings.Contains(err.Error(), "DNR") != tc.dnr {
			t.Errorf("%#x: message %q", uint16(s), err)
		}
		wrapped := fmt.Errorf("ctx: %w", err)
		if tc.sentinel != nil && !errors.Is(wrapped, tc.sentinel) {
			t.Errorf("%#x: not errors.Is %v", uint16(s), tc.sentinel)
		}
		if tc.notSentinl != nil && errors.Is(wrapped, tc.notSentinl) {
			t.Errorf("%#x: wrongly errors.Is %v", uint16(s), tc.notSentinl)
		}
	}
	if MakeStatus(SCTGeneric, 2, true) != 0x4002 || StatusInvalidOpcode != 0x4001 || StatusInvalidLogPage != 0x4109 {
		t.Error("MakeStatus encodings")
	}
	if err := (Completion{}).Check("Flush"); err != nil {
		t.Errorf("success gave %v", err)
	}
	err := Completion{Err: syscall.ENOTTY}.Check("Identify (CNS 0x01)")
	if !errors.Is(err, syscall.ENOTTY) || !strings.Contains(err.Error(), "Identify") {
		t.Errorf("transport error: %v", err)
	}
}

func TestStatusString(t *testing.T) {
	if got := Status(0x4002).String(); got != "status 0x4002 (Invalid Field in Command; SCT 0 SC 0x02 DNR)" {
		t.Errorf("String = %q", got)
	}
	if got := Status(0x0281).String(); got != "status 0x0281 (Unrecovered Read Error; SCT 2 SC 0x81)" {
		t.Errorf("String = %q", got)
	}
}
