package flagsets

import (
	"fmt"
	"math"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagcheck"
	"github.com/rbctl/rbctl/sim"
	"github.com/rbctl/rbctl/units"
)

// SweepFlags names, for each parameter simulate sweeps (sim.ParseSweep), the flag that sets
// it alone: every sweep point must be a value that flag accepts.
var SweepFlags = map[string]string{"util": "util", "op": "op", "ru": "ru", "size": "device-size"}

// SweepFlag registers --sweep on fs, parsed by sim.ParseSweep into *dst when it is set; a
// point outside the range rule(flag) gives the flag of its parameter (SweepFlags) is refused
// then, before anything runs.
func SweepFlag(fs *pflag.FlagSet, dst **sim.Sweep, rule func(flag string) (flagcheck.Rule, bool)) {
	fs.Var(Parsed(dst, "", func(s string) (*sim.Sweep, error) { return parseSweep(s, rule) }), "sweep",
		"sweep a parameter: util=FROM:TO:STEP, op=..., ru=... (sizes with suffixes)")
}

func parseSweep(s string, rule func(flag string) (flagcheck.Rule, bool)) (*sim.Sweep, error) {
	if s == "" {
		return nil, nil
	}
	sw, err := sim.ParseSweep(s)
	if err != nil {
		return nil, err
	}
	flag, known := SweepFlags[sw.Name]
	r, ok := rule(flag)
	if !known || !ok {
		return sw, nil
	}
	r.Words = nil // a sweep point is a number
	for _, v := range sw.Values {
		if !r.Contains(v) {
			val := strconv.FormatFloat(v, 'g', -1, 64)
			if r.Kind == flagcheck.Size && v == math.Trunc(v) {
				val = units.FormatExact(int64(v))
			}
			return nil, fmt.Errorf("%s=%s is out of range; want %s, as --%s takes", sw.Name, val, r.RangeText(), flag)
		}
	}
	return sw, nil
}
