package torture

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
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

// TestSummaryJSONSnakeCase: torture --json uses snake_case keys like every other --json.
func TestSummaryJSONSnakeCase(t *testing.T) {
	s := &Summary{Seed: 7, TornKills: 2, KillTornContainers: 1, Lost: 3, Elapsed: 1500 * time.Millisecond}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]float64{"seed": 7, "torn_kills": 2, "kill_torn_containers": 1, "lost": 3, "violations": 3, "elapsed_seconds": 1.5} {
		if got, ok := m[k].(float64); !ok || got != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
	for k := range m {
		if k != strings.ToLower(k) {
			t.Errorf("key %q is not snake_case", k)
		}
	}
	if _, ok := m["interrupted"]; ok {
		t.Errorf("interrupted present on a whole run: %s", b)
	}
}
