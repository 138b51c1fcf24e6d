package flagsets

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/placement"
)

// Placement is the --placement flag of the commands that write single keys.
type Placement struct{ Spec string }

// Add defines --placement on cmd; what says which writes it places.
func (f *Placement) Add(cmd *cobra.Command, what string) {
	cmd.Flags().StringVar(&f.Spec, "placement", "none", "placement policy for "+what+" ("+strings.Join(placement.Known(), ", ")+
		", compositions with +; docs/placement.md); needs a device with placement handles (FDP or emu:)")
}

// None reports whether the flag asks for no placement.
func (f *Placement) None() bool {
	return f == nil || strings.TrimSpace(f.Spec) == "" || strings.EqualFold(strings.TrimSpace(f.Spec), "none")
}

// Check validates the spec before any device is touched (handle counts are checked once
// the device is open).
func (f *Placement) Check() error {
	if f.None() {
		return nil
	}
	if _, err := placement.Parse(f.Spec, 1<<16); err != nil {
		return fmt.Errorf("--placement %s: %w", f.Spec, err)
	}
	return nil
}

// Policies is the comma-separated --placement list of bench and simulate, blanks dropped;
// it must name at least one policy.
func Policies(spec string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(spec, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--placement: give at least one policy, e.g. none,cache-salt")
	}
	return out, nil
}
