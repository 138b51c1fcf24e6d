package flagsets

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/units"
)

// ModelHints phrases the fix of the FTL model's refusals of a geometry (bench's shadow
// model, simulate, an emulated device): too little over-provisioning, or one GC cannot run
// in. The fix is in the emu: spec's parameters for an emulated device (emu.ErrSpec), else in
// the command's flags; has says which flags the command has.
func ModelHints(has func(string) bool, err error) []string {
	var hints []string
	if errors.Is(err, ftl.ErrNoSpare) {
		switch {
		case has("op"):
			hints = append(hints, "--op sets the over-provisioning")
		case errors.Is(err, emu.ErrSpec):
			hints = append(hints, "op= in the emu: spec sets the over-provisioning")
		}
	}
	var ie *ftl.InfeasibleError
	if !errors.As(err, &ie) {
		return hints
	}
	op, ru, handles, where := "--op ", "--ru", "--handles", ""
	if errors.Is(err, emu.ErrSpec) {
		op, ru, handles, where = "op=", "ru=", "ruhs=", " in the emu: spec"
	}
	var fixes []string
	if ie.MinOP > 0 && (where != "" || has("op")) {
		fixes = append(fixes, op+strconv.FormatFloat(math.Round(ie.MinOP*100)/100, 'f', -1, 64))
	}
	if ie.MaxRUBytes > 0 && (where != "" || has("ru")) {
		fixes = append(fixes, "a smaller "+ru+" (at most "+units.FormatSpec(ie.MaxRUBytes)+")")
	}
	if ie.MaxHandles > 0 && (where != "" || has("handles")) {
		fixes = append(fixes, "fewer "+handles+" (at most "+strconv.Itoa(ie.MaxHandles)+")")
	}
	if n := len(fixes); n > 1 {
		fixes = []string{strings.Join(fixes[:n-1], ", ") + " or " + fixes[n-1]}
	}
	if len(fixes) == 1 {
		hints = append(hints, "use "+fixes[0]+where)
	}
	return hints
}
