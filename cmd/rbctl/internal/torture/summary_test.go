package torture

import (
	"bytes"
	"strings"
	"testing"
)

func TestSummaryWriteText(t *testing.T) {
	s := &Summary{Seed: 7, Cycles: 3, Lost: 2, Interrupted: true, Problems: []string{"cycle 1: key 5 lost"},
		Backends: []string{"posix"}, CyclesByBackend: map[string]int{"posix": 3}}
	var b bytes.Buffer
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"| seed ", "through posix", "| lost keys ", "| violations ", " 2 ", "interrupted: partial result", "problem: cycle 1: key 5 lost"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary text lacks %q:\n%s", want, out)
		}
	}
	if s.Violations() != 2 {
		t.Errorf("violations %d, want 2", s.Violations())
	}
}

func TestOptionsSlots(t *testing.T) {
	o := Options{Slots: 40}
	o.defaults()
	if o.Geometry.Slots != 40 || o.Geometry.SlotBytes != DefaultGeometry().SlotBytes {
		t.Errorf("geometry %+v", o.Geometry)
	}
	o = Options{}
	o.defaults()
	if o.Geometry != DefaultGeometry() {
		t.Errorf("default geometry %+v", o.Geometry)
	}
}
