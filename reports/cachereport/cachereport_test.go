package cachereport

import (
	"strings"
	"testing"
)

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{512: "512 B", 1536: "1.5 KiB", 1 << 30: "1.0 GiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// The choice renders from the report alone: the lost-key sample is escaped once (ChoiceOf
// escapes it), the reason here.
func TestChoiceLines(t *testing.T) {
	lost := 3
	c := Choice{Container: 1, Seq: 7, Reason: "newer\x1b", Fallback: true, LostKnown: true, LostKeys: &lost, LostSample: []string{`a\n`, "b"},
		Namespace: "object", NamespaceSource: "checkpoint", Candidates: []Candidate{{Container: 0, SeqNote: "seal repaired"}}}
	got := strings.Join(c.Lines(), "\n")
	want := "checkpoint: container 1, seq 7: newer\\x1b\nfallback: keys lost: 3 (a\\n, b, ...)\ncontainer 0: seal repaired\nnamespace object (from checkpoint)"
	if got != want {
		t.Errorf("lines\n%s\nwant\n%s", got, want)
	}
	if got := c.LostText(); got != `it holds 3 keys the chosen checkpoint lacks (a\n, b, ...)` {
		t.Errorf("LostText %q", got)
	}
	none := Choice{Container: -1, Reason: "no container"}
	if l := none.Lines(); len(l) != 1 || l[0] != "checkpoint: none usable (no container)" {
		t.Errorf("no checkpoint: %q", l)
	}
}
