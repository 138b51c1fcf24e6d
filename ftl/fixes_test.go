package ftl

import (
	"errors"
	"strings"
	"testing"
)

// The fixes CheckFeasible offers are feasible, the OP fix is the smallest one in 0.01
// steps, and only the parameters the caller can change are offered.
func TestCheckFeasibleFixes(t *testing.T) {
	c := Config{MappingUnit: 4096, LogicalBytes: 512 << 20, OP: 0.07, RUBytes: 8 << 20, Handles: 8}
	all := Tunable{OP: true, OPMax: 1, RU: true, Handles: true}
	err := c.CheckFeasible("this device", all)
	var ie *InfeasibleError
	if !errors.As(err, &ie) || !errors.Is(err, ErrCannotReclaim) {
		t.Fatalf("err %v", err)
	}
	if ie.MinOP != 0.15 || ie.MaxRUBytes != 2<<20 || ie.MaxHandles != 3 {
		t.Fatalf("fixes: op %g, ru %d, handles %d; want 0.15, 2 MiB, 3", ie.MinOP, ie.MaxRUBytes, ie.MaxHandles)
	}
	for _, w := range []string{"needs 9 spare RUs", "7 open RUs of the other handles + 1 shared GC RU + a reserve of 1", "this device has 4 (512 MiB, 8 MiB RUs, op 0.07)"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q lacks %q", err, w)
		}
	}
	fixed := []Config{c, c, c}
	fixed[0].OP, fixed[1].RUBytes, fixed[2].Handles = ie.MinOP, ie.MaxRUBytes, ie.MaxHandles
	for _, f := range fixed {
		if err := f.CheckFeasible("x", all); err != nil {
			t.Errorf("suggested %+v is refused: %v", f, err)
		}
	}
	below := c
	below.OP = ie.MinOP - 0.01
	if below.CheckFeasible("x", all) == nil {
		t.Errorf("op %g is feasible too: %g was not the smallest", below.OP, ie.MinOP)
	}
	if err := c.CheckFeasible("x", Tunable{OP: true, OPMax: 0.1}); !errors.As(err, &ie) || ie.MinOP != 0 || ie.MaxRUBytes != 0 || ie.MaxHandles != 0 ||
		!strings.Contains(err.Error(), "cannot hold its open RUs") {
		t.Fatalf("nothing within reach: %v (%+v)", err, ie)
	}
	if err := fixed[0].CheckFeasible("x", all); err != nil {
		t.Fatal(err)
	}
}
