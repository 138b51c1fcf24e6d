package reports

import (
	"bytes"
	"strings"
	"testing"
)

func TestPerDeviceTable(t *testing.T) {
	one := Run{Policy: "none", Devices: []DeviceRun{{Device: "a.img", Ops: 10, WAFSource: "none"}}}
	r := New("bench")
	r.Runs = []Run{one}
	var b bytes.Buffer
	if err := Table(&b, r); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "last ok s") {
		t.Fatalf("one device printed a per-device table:\n%s", b.String())
	}
	waf := 1.25
	last := 2.5
	r.Runs = []Run{{Policy: "none", Devices: []DeviceRun{
		{Device: "a.img", Ops: 10, Errors: 3, WAF: &waf, WAFSource: SourceModelled, LastOK: &last},
		{Device: "b.img", Ops: 12, WAFSource: "none"},
	}, DevicesTotal: &DeviceRun{Device: "total", Ops: 22, Errors: 3, WAFSource: "none"}}}
	b.Reset()
	if err := Table(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"a.img", "b.img", "total", "1.250", "2.5", "3 device errors ([a.img])"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if err := r.DeviceError(); err == nil || !strings.Contains(err.Error(), "3 I/O errors on a.img") {
		t.Errorf("DeviceError = %v", err)
	}
	if n, names := r.DeviceErrors(); n != 3 || len(names) != 1 || names[0] != "a.img" {
		t.Errorf("DeviceErrors = %d %v", n, names)
	}
}
