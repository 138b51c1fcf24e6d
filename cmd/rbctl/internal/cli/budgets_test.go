package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/reports"
)

// simulate --preset workers:4 --budgets equal: every worker gets a quarter of the cache's
// target, holds no more, and the tenant rows add up to the run; the table shows them.
func TestSimulateBudgetsEqual(t *testing.T) {
	args := []string{"simulate", "--device-size", "1G", "--model", "tiny", "--placement", "cache-salt", "--measure", "1",
		"--preset", "workers:4", "--budgets", "equal"}
	out, err := runCLI(t, append(args, "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	var r reports.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	run := r.Runs[0]
	if len(run.Tenants) != 4 {
		t.Fatalf("tenants %+v", run.Tenants)
	}
	var evicted int64
	for _, tn := range run.Tenants {
		if tn.BudgetSlots == nil || *tn.BudgetSlots != *run.Tenants[0].BudgetSlots || tn.SlotsHeld > *tn.BudgetSlots || tn.SharedSlots != nil {
			t.Errorf("tenant %s: held %d, budget %v, shared %v", tn.Salt, tn.SlotsHeld, tn.BudgetSlots, tn.SharedSlots)
		}
		evicted += tn.Evicted
	}
	if want := int64(0.9*float64(r.Workload.Slots)) / 4; *run.Tenants[0].BudgetSlots != want || evicted != run.Evicted || evicted == 0 {
		t.Errorf("budget %d (want %d), tenants evicted %d, run %d", *run.Tenants[0].BudgetSlots, want, evicted, run.Evicted)
	}
	out, err = runCLI(t, args...)
	if err != nil || !strings.Contains(out, "held % of budget") || !strings.Contains(out, "worker3:kv") {
		t.Fatalf("table: %v\n%s", err, out)
	}
}

// A budget spec that is malformed, names a salt the workload lacks, or does not fit the
// cache is refused with a one-line error before anything runs: simulate prints nothing,
// bench creates no file and leaves a formatted one as it was.
func TestBudgetsRefused(t *testing.T) {
	dir := t.TempDir()
	dev := filepath.Join(dir, "cache.img")
	if _, err := runCLI(t, "format", "--create", "16M", "--slot-bytes", "64K", dev); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(dev)
	if err != nil {
		t.Fatal(err)
	}
	for spec, msg := range map[string]string{
		"chat":               "want SALT=BUDGET",
		"chat=-3":            "a budget cannot be negative",
		"chat=-5%":           "a budget cannot be negative",
		"chat=lots":          "want a slot count (1000), a size (64G) or a share (25%)",
		"chat=0":             "a slot count must be an integer >= 1",
		"chat=equal":         `applies to "*"`,
		"chta=10%":           `salt "chta" has a budget, but the workload has no such tenant (its salts: "chat", "rag", "agent")`,
		"chat=60%,rag=50%":   "the shares add up to 110% of the cache",
		"chat=1000000000":    "is 1000000000 slots, the cache holds",
		"rag=100%":           `none is left for the salts without one ("chat", "agent")`,
		"chat=10%,chat=20%":  `salt "chat" has two budgets`,
		"chat=1%,*=equal,=3": `salt "" has a budget, but the workload has no such tenant`,
	} {
		for _, cmd := range [][]string{
			{"simulate", "--device-size", "1G", "--model", "tiny"},
			{"bench", dev, "--force", "--model", "tiny", "--duration", "1s"},
			{"bench", filepath.Join(dir, "new.img"), "--create", "16M", "--model", "tiny", "--duration", "1s"},
		} {
			if strings.HasPrefix(spec, "chat=1000000000") && slices.Contains(cmd, "--create") {
				continue // capacity is known only once the file exists (see docs/simulate.md)
			}
			out, err := runCLI(t, append(cmd, "--budgets", spec)...)
			if err == nil || !strings.Contains(err.Error(), msg) || strings.Contains(err.Error(), "\n") || out != "" {
				t.Errorf("%s --budgets %s: err %v, output %q; want one line with %q", cmd[0], spec, err, out, msg)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "new.img")); err == nil {
			t.Fatalf("--budgets %s: bench created its --create file", spec)
		}
		if after, _ := os.ReadFile(dev); !bytes.Equal(before, after) {
			t.Fatalf("--budgets %s: bench changed the formatted device", spec)
		}
	}
}
