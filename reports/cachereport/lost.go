package cachereport

import (
	"fmt"

	"github.com/rbctl/rbctl/engine"
)

// LostText says in a clause what a fallback lost, about the rejected container ("it holds
// 2 keys the chosen checkpoint lacks (a, b)").
func LostText(sel engine.Selection) string {
	switch {
	case !sel.Fallback:
		return "nothing lost"
	case !sel.LostKnown:
		return "the keys it held are unknown (it cannot be read)"
	case sel.Lost == 0:
		return "it holds no key the chosen checkpoint lacks"
	}
	noun := "keys"
	if sel.Lost == 1 {
		noun = "key"
	}
	return fmt.Sprintf("it holds %d %s the chosen checkpoint lacks (%s)", sel.Lost, noun, LostSample(sel))
}
