package placement

import (
	"errors"
	"strings"
	"testing"
)

func TestParseBudgets(t *testing.T) {
	cases := []struct {
		spec, canon, err string
	}{
		{"", "", ""},
		{"rag=40%, chat=1000 ,agent=64G", "rag=40%,chat=1000,agent=68719476736B", ""},
		{"=10%,*=2.5%", "=10%,*=2.5%", ""},
		{"a=b=5", "a=b=5", ""},
		{"Rag=1,rag=2", "Rag=1,rag=2", ""},
		{"equal", "*=equal", ""},
		{"rag=10%, equal", "rag=10%,*=equal", ""},
		{"rag=equal", "", `applies to "*"`},
		{"equal,*=3", "", `salt "*" has two budgets`},
		{"rag", "", "want SALT=BUDGET"},
		{"rag=1,rag=2", "", `salt "rag" has two budgets`},
		{"rag=0", "", "a slot count must be an integer >= 1"},
		{"rag=0%", "", "above 0% and at most 100%"},
		{"rag=101%", "", "above 0% and at most 100%"},
		{"rag=x%", "", "above 0% and at most 100%"},
		{"rag=-3", "", "a budget cannot be negative"},
		{"rag=x", "", "want a slot count (1000), a size (64G) or a share (25%)"},
		{"rag=", "", "want a slot count"},
		{"rag=0B", "", "a size must be at least one byte"},
		{"rag=99999999999999999999", "", "a slot count must be an integer >= 1"},
	}
	for _, tc := range cases {
		b, err := ParseBudgets(tc.spec)
		if tc.err != "" {
			if err == nil || !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseBudgets(%q) = %v, %v; want error %q", tc.spec, b, err, tc.err)
			}
			continue
		}
		if err != nil || b.String() != tc.canon {
			t.Errorf("ParseBudgets(%q) = %q, %v; want %q", tc.spec, b.String(), err, tc.canon)
			continue
		}
		if again, err := ParseBudgets(b.String()); err != nil || again.String() != b.String() {
			t.Errorf("canonical %q does not round-trip: %q, %v", b.String(), again.String(), err)
		}
	}
}

func TestBudgetResolve(t *testing.T) {
	salts := []string{"rag", "chat", "agent", "", "other"}
	b, err := ParseBudgets("rag=40%,chat=100,agent=4M,=1%,*=10")
	if err != nil {
		t.Fatal(err)
	}
	a, err := b.Resolve(salts, 1000, 64<<10) // 1000 slots of 64 KiB
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int64{400, 100, 64, 10, 10} {
		if got, ok := a.Limit(i); !ok || got != want {
			t.Errorf("Limit(%q) = %d, %v; want %d", salts[i], got, ok, want)
		}
	}
	if a.Shared != 0 {
		t.Errorf("every salt has a budget, yet %d slots are shared", a.Shared)
	}
	// Salts without a budget share what is left.
	part, _ := ParseBudgets("rag=300,chat=20%")
	a, err = part.Resolve(salts, 1000, 1)
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := a.Limit(2); ok || n != 500 || a.Shared != 500 {
		t.Errorf("agent: %d, %v, shared %d; want 500 shared", n, ok, a.Shared)
	}
	for spec, msg := range map[string]string{
		"rag=60%,chat=50%":          "shares add up to 110% of the cache",
		"rag=600,chat=500":          "add up to 1100 slots, the cache holds 1000",
		"rag=1K":                    "less than one slot of 65536 bytes",
		"rag=0.01%":                 "less than one slot",
		"rag=1001":                  "is 1001 slots, the cache holds 1000",
		"*=300":                     "add up to 1500 slots",
		"*=30%":                     "shares add up to 150%",
		"rag=100%":                  `none is left for the salts without one ("chat", "agent", "", "other")`,
		"rag=999,chat=1,*=equal":    "*=equal: the listed budgets leave 0 of 1000 slots for 3 salts",
		"rga=10":                    `salt "rga" has a budget, but the workload has no such tenant (its salts: "rag", "chat", "agent", "", "other")`,
		"rag=1,chat=1,agent=1,=999": "add up to 1002 slots",
	} {
		b, err := ParseBudgets(spec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Resolve(salts, 1000, 64<<10); err == nil || !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want %q", spec, err, msg)
		}
	}
}

func TestBudgetEqual(t *testing.T) {
	salts := []string{"w0", "w1", "w2"}
	for spec, want := range map[string][]int64{
		"equal":                  {333, 333, 333},
		"*=equal":                {333, 333, 333},
		"w0=400,equal":           {400, 300, 300},
		"w1=10%,*=equal":         {450, 100, 450},
		"w0=1,w1=1,w2=1,*=equal": {1, 1, 1},
	} {
		b, err := ParseBudgets(spec)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		a, err := b.Resolve(salts, 1000, 4096)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		var sum int64
		for i, w := range want {
			if got, ok := a.Limit(i); !ok || got != w {
				t.Errorf("%s: %s gets %d, %v; want %d", spec, salts[i], got, ok, w)
			}
			sum += a.Limits[i]
		}
		if sum > 1000 || a.Shared != 0 {
			t.Errorf("%s: %d slots budgeted of 1000, %d shared", spec, sum, a.Shared)
		}
	}
	if _, err := ParseBudgets("w0=equal"); err == nil || !strings.Contains(err.Error(), `applies to "*"`) {
		t.Errorf("w0=equal: %v", err)
	}
}

// FuzzParseBudgets: a spec parses into budgets whose canonical form parses back the same,
// or fails with ErrBudget; resolving never panics.
func FuzzParseBudgets(f *testing.F) {
	for _, s := range []string{"rag=40%,chat=1000,agent=64G", "=1,*=2%", "a=b=0x10K", ",,", "x=1e400%", "equal", "rag=40%,*=equal", "chat=equal"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		b, err := ParseBudgets(spec)
		if err != nil {
			if !errors.Is(err, ErrBudget) {
				t.Fatalf("error %v does not wrap ErrBudget", err)
			}
			return
		}
		again, err := ParseBudgets(b.String())
		if err != nil || again.String() != b.String() {
			t.Fatalf("%q → %q does not round-trip: %q, %v", spec, b.String(), again.String(), err)
		}
		salts := []string{"rag", "chat", "", "t0"}
		if a, err := b.Resolve(salts, 1000, 4096); err == nil {
			sum := a.Shared
			for _, n := range a.Limits {
				if n < 0 {
					t.Fatalf("a negative budget: %v", a.Limits)
				}
				sum += n
			}
			if sum > 1000 {
				t.Fatalf("budgets %v + %d shared exceed the cache", a.Limits, a.Shared)
			}
		} else if !errors.Is(err, ErrBudget) {
			t.Fatalf("Resolve error %v does not wrap ErrBudget", err)
		}
	})
}
