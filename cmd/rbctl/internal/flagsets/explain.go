package flagsets

import (
	"errors"

	"github.com/spf13/pflag"

	"github.com/rbctl/rbctl/reports"
	"github.com/rbctl/rbctl/sim"
)

// SimCauses registers simulate's WAF-by-cause flags on fs: --explain (sequential when
// given bare, or shapley) and --slot-reuse, which sets the slot reuse the explanation
// starts from.
func SimCauses(fs *pflag.FlagSet, o *sim.Options) {
	ExplainFlag(fs, &o.Explain, "counterfactual runs of the same workload (isolation, slot reuse, deallocate, region eviction, RU halved, more spare)")
	fs.Var(Parsed(&o.AnySlot, "handle", parseSlotReuse), "slot-reuse",
		"which free slot a store reuses: handle (one last written through the same placement handle) or any (the most recently freed; LMCache's fdp_slot_reuse_policy none)")
}

// ExplainFlag registers --explain: WAF by cause, made by how (the help's words).
func ExplainFlag(fs *pflag.FlagSet, dst *string, how string) {
	fs.Var(Parsed(dst, "", parseExplain), "explain", "add WAF by cause (modelled): WAF − 1 split over "+how+"; docs/bench.md. "+
		"--explain alone or =sequential: one change after another, =shapley: averaged over every order (2^n runs)")
	fs.Lookup("explain").NoOptDefVal = sim.ExplainSequential
}

func parseExplain(s string) (string, error) {
	switch s {
	case "", sim.ExplainSequential, sim.ExplainShapley:
		return s, nil
	}
	return "", errors.New("want " + sim.ExplainSequential + " or " + sim.ExplainShapley)
}

func parseSlotReuse(s string) (bool, error) {
	switch s {
	case "handle":
		return false, nil
	case "any":
		return true, nil
	}
	return false, errors.New("want handle or any")
}

// DriveFlag registers --drive, an endurance rating the report projects drive life against
// (reports.ParseDrive: refused with the reason when it is set).
func DriveFlag(fs *pflag.FlagSet, dst **reports.Drive) {
	fs.Var(Parsed(dst, "", parseDrive), "drive", "project drive life (a projection, not a measurement): tbw=TB, or dwpd=N,years=N "+
		"(capacity from the device or --device-size; capacity=SIZE overrides); host-rate=SIZE supplies a write rate per second a run has no clock for")
}

func parseDrive(s string) (*reports.Drive, error) {
	if s == "" {
		return nil, nil
	}
	return reports.ParseDrive(s)
}
