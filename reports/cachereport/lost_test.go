package cachereport

import (
	"testing"

	"github.com/rbctl/rbctl/engine"
)

func TestLostText(t *testing.T) {
	for _, c := range []struct {
		sel  engine.Selection
		want string
	}{
		{engine.Selection{}, "nothing lost"},
		{engine.Selection{Fallback: true}, "the keys it held are unknown (it cannot be read)"},
		{engine.Selection{Fallback: true, LostKnown: true}, "it holds no key the chosen checkpoint lacks"},
		{engine.Selection{Fallback: true, LostKnown: true, Lost: 1, LostSample: []string{"k\x01"}}, `it holds 1 key the chosen checkpoint lacks (k\x01)`},
		{engine.Selection{Fallback: true, LostKnown: true, Lost: 3, LostSample: []string{"a", "b"}}, "it holds 3 keys the chosen checkpoint lacks (a, b, ...)"},
	} {
		if got := LostText(c.sel); got != c.want {
			t.Errorf("LostText(%+v) = %q, want %q", c.sel, got, c.want)
		}
	}
}
