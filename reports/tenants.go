package reports

import (
	"strconv"
	"unicode"

	"github.com/rbctl/rbctl/workloads"
)

// Per-tenant rows of runs with tenant slot budgets (workloads.DriverConfig.Budgets).

// tenantBudget fills tenant i's eviction and residency figures and, when the run had
// budgets, its budget or the shared rest.
func tenantBudget(t *Tenant, r *workloads.Result, i int) {
	if c := r.Counters; i < len(c.TenantEvicted) {
		t.Evicted = c.TenantEvicted[i]
	}
	if i < len(r.TenantHeld) {
		t.SlotsHeld = r.TenantHeld[i]
	}
	if r.Budgets == nil {
		return
	}
	if n, own := r.Budgets.Limit(i); own {
		t.BudgetSlots = I64(n)
	} else {
		t.SharedSlots = I64(n)
	}
}

// perTenant returns a row per tenant of every run that had budgets: its budget (or the
// shared rest), the slots it held at the end, its evictions and hit ratio.
func perTenant(r *Report) ([]string, [][]string) {
	h := []string{"policy", "tenant", "budget slots", "held", "held % of budget", "evicted", "hit %", "requests"}
	var rows [][]string
	for _, run := range shown(r) {
		name := run.Policy
		if r.Sweep != "" {
			name += " @ " + r.Sweep + "=" + strconv.FormatFloat(run.Param, 'g', 4, 64)
		}
		for _, t := range run.Tenants {
			var budget int64
			cell := ""
			switch {
			case t.BudgetSlots != nil:
				budget = *t.BudgetSlots
				cell = strconv.FormatInt(budget, 10)
			case t.SharedSlots != nil:
				budget = *t.SharedSlots
				cell = "shared " + strconv.FormatInt(budget, 10)
			default:
				continue
			}
			rows = append(rows, []string{name, saltCell(t.Salt), cell, strconv.FormatInt(t.SlotsHeld, 10),
				f2(100 * float64(t.SlotsHeld) / float64(max(budget, 1))), strconv.FormatInt(t.Evicted, 10),
				f2(100 * t.HitRatio), strconv.FormatInt(t.Requests, 10)})
		}
	}
	return h, rows
}

// saltCell shows a salt as it is when it is plain printable text, quoted with escapes
// otherwise (salts come from trace files too); the empty salt is "".
func saltCell(s string) string {
	for _, c := range s {
		if !unicode.IsPrint(c) || c == '\\' || c == '"' {
			return strconv.Quote(s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}
