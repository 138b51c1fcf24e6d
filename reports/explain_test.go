package reports

import (
	"bytes"
	"strings"
	"testing"
)

// Smallest picks the fewest changes that reach the target, the lower WAF among equals, and
// the table states it with the caveat.
func TestExplainSmallestAndTable(t *testing.T) {
	e := Explanation{Policy: "cache-salt", WAF: 1.4, Method: "shapley", Residual: 0.01,
		Steps: []ExplainStep{{Cause: "a", Change: "--a", Part: 0.2, Alone: F64(1.2)}, {Cause: "b", Change: "--b", Part: 0.19, Alone: F64(1.04)},
			{Cause: "c", Change: "", Skipped: "already"}},
		Combos: []ExplainCombo{{nil, 1.4}, {[]string{"--a"}, 1.2}, {[]string{"--b"}, 1.04}, {[]string{"--a", "--b"}, 1.01}}}
	c, w, ok := e.Smallest(1.05)
	if !ok || len(c) != 1 || c[0] != "--b" || w != 1.04 {
		t.Errorf("smallest %v %v %v, want [--b] 1.04", c, w, ok)
	}
	if _, _, ok := e.Smallest(1.0); ok {
		t.Error("nothing reaches 1.0, yet Smallest found a set")
	}
	r := New("simulate")
	r.Explain = []Explanation{e}
	var b bytes.Buffer
	if err := Table(&b, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"WAF by cause, cache-salt", "--b (modelled WAF 1.040)", "Causes interact", "skipped: already", "remaining"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
