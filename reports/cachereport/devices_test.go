package cachereport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
)

func TestDevicesErrorMatchesNotFoundOnlyWhenEveryFailureIs(t *testing.T) {
	gone := fmt.Errorf("open b.img: %w", fs.ErrNotExist)
	other := errors.New("no valid checkpoint")
	if err := DevicesErr([]string{"a.img", "b.img"}, []error{nil, nil}); err != nil {
		t.Fatalf("no failure: %v", err)
	}
	one := DevicesErr([]string{"b.img"}, []error{gone})
	if one.Error() != gone.Error() || !errors.Is(one, fs.ErrNotExist) {
		t.Errorf("one device: %q", one)
	}
	both := DevicesErr([]string{"a.img", "b.img", "c.img"}, []error{nil, gone, other})
	if errors.Is(both, fs.ErrNotExist) || !errors.Is(both, other) {
		t.Errorf("a missing and a broken device: not-found %v", errors.Is(both, fs.ErrNotExist))
	}
	if want := "2 of 3 devices failed: open b.img: file does not exist; c.img: no valid checkpoint"; both.Error() != want {
		t.Errorf("message %q, want %q", both, want)
	}
	if missing := DevicesErr([]string{"a.img", "b.img"}, []error{gone, gone}); !errors.Is(missing, fs.ErrNotExist) {
		t.Errorf("every failure a missing device: %v", missing)
	}
}

func TestFormatsSumAndText(t *testing.T) {
	r := &Formats{Devices: []DeviceFormat{
		{Rank: 0, Device: "a.img", Kind: "file", State: Formatted, Placement: "none", Layout: &Layout{CapacityBytes: 8 << 20, MaxSlots: 112}},
		{Rank: 1, Device: "b\x1b.img", Kind: "file", Placement: "none"},
	}}
	r.Devices[1].Fail(HalfFormatted, errors.New("format b: EIO\nat 0"))
	err := r.Sum()
	if r.Total != (FormatTotal{Devices: 2, Formatted: 1, Capacity: 8 << 20, Slots: 112}) || err == nil || !strings.Contains(err.Error(), "1 of 2 devices failed") {
		t.Fatalf("total %+v, %v", r.Total, err)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| half-formatted |", `b\x1b.img: half-formatted: format b: EIO at 0`, "| 1 formatted ", "| 8.0 MiB "} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	js, _ := json.Marshal(r)
	for _, want := range []string{`"state":"half-formatted"`, `"total":{"devices":2,"formatted":1,"capacity_bytes":8388608,"slots":112}`, `"rank":1`} {
		if !bytes.Contains(js, []byte(want)) {
			t.Errorf("JSON lacks %s:\n%s", want, js)
		}
	}
}

// An interrupted recover of one device still gives --json its JSON: the device, the error
// and interrupted; text gets nothing (the error says it).
func TestRecoveriesOutputInterrupted(t *testing.T) {
	r, err := NewRecoveries([]string{"c.img"}, []*Recovery{nil}, []error{fmt.Errorf("verifying slots: %w", context.Canceled)})
	if err == nil {
		t.Fatal("no error for a failed device")
	}
	b, jerr := json.Marshal(r.Output(true))
	if jerr != nil || !strings.Contains(string(b), `"device":"c.img"`) || !strings.Contains(string(b), `"interrupted":true`) {
		t.Errorf("JSON %s, %v", b, jerr)
	}
	if r.Output(false) != nil {
		t.Errorf("text output for a device without a recovery: %v", r.Output(false))
	}
}
