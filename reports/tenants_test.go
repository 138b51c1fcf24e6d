package reports

import (
	"bytes"
	"strings"
	"testing"
)

// With budgets the table gets a row per tenant (its budget or the shared rest, held, held
// share, evictions, hit ratio); without, none; a salt with control characters is escaped.
func TestPerTenantTable(t *testing.T) {
	r := New("simulate")
	r.Runs = []Run{{Policy: "cache-salt", Tenants: []Tenant{
		{Salt: "hot", Requests: 10, HitRatio: 0.5, Evicted: 3, SlotsHeld: 40, BudgetSlots: I64(50)},
		{Salt: "a\x1b[2Jb", Requests: 7, Evicted: 9, SlotsHeld: 20, SharedSlots: I64(25)},
	}}}
	var buf bytes.Buffer
	if err := Table(&buf, r); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"held % of budget", "| hot ", "| 50 ", "80.00", "shared 25", `"a\x1b[2Jb"`} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Error("a control character reached the table")
	}
	r.Runs[0].Tenants[0].BudgetSlots, r.Runs[0].Tenants[1].SharedSlots = nil, nil
	if h, rows := perTenant(r); len(rows) != 0 {
		t.Errorf("rows without budgets: %v %v", h, rows)
	}
}
