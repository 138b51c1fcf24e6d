package placement

import (
	"errors"
	"strings"
	"sync"
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
		{"rag", "", "want SALT=BUDGET"},
		{"rag=1,rag=2", "", `salt "rag" has two budgets`},
		{"rag=0", "", "a slot count must be an integer >= 1"},
		{"rag=0%", "", "above 0% and at most 100%"},
		{"rag=101%", "", "above 0% and at most 100%"},
		{"rag=x%", "", "above 0% and at most 100%"},
		{"rag=-3", "", "want a slot count (1000), a size (64G) or a share (25%)"},
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

func TestBudgetSlots(t *testing.T) {
	b, err := ParseBudgets("rag=40%,chat=100,agent=4M,=1%,*=10")
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.Slots(1000, 64<<10) // 1000 slots of 64 KiB
	if err != nil {
		t.Fatal(err)
	}
	for salt, want := range map[string]int64{"rag": 400, "chat": 100, "agent": 64, "": 10, "other": 10} {
		if got, ok := sb.Limit(salt); !ok || got != want {
			t.Errorf("Limit(%q) = %d, %v; want %d", salt, got, ok, want)
		}
	}
	none, _ := ParseBudgets("rag=1")
	sb2, _ := none.Slots(10, 4096)
	if _, ok := sb2.Limit("chat"); ok {
		t.Error("an unlisted salt without '*' has a budget")
	}
	for spec, msg := range map[string]string{
		"rag=60%,chat=50%": "add up to 1100 slots, the cache holds 1000",
		"rag=1K":           "less than one slot of 65536 bytes",
		"rag=0.01%":        "less than one slot",
		"rag=1001":         "is 1001 slots, the cache holds 1000",
	} {
		b, err := ParseBudgets(spec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Slots(1000, 64<<10); err == nil || !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want %q", spec, err, msg)
		}
	}
	// "*" is per salt: 60% for every other salt fits even with rag's 50%.
	if b, _ := ParseBudgets("rag=50%,*=60%"); true {
		if _, err := b.Slots(1000, 1); err != nil {
			t.Errorf("per-salt '*': %v", err)
		}
	}
}

func TestLedger(t *testing.T) {
	b, _ := ParseBudgets("rag=3,*=1")
	sb, _ := b.Slots(10, 1)
	l := NewLedger(sb)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { l.Charge("rag") })
	}
	wg.Wait()
	if !l.Over("rag") || l.Used("rag") != 3 {
		t.Fatalf("rag used %d, over %v; want 3, true", l.Used("rag"), l.Over("rag"))
	}
	l.Credit("rag")
	if l.Over("rag") {
		t.Error("rag over its budget after a credit")
	}
	if l.Over("chat") {
		t.Error("chat over before storing")
	}
	l.Charge("chat")
	if !l.Over("chat") {
		t.Error("chat not over its '*' budget of 1")
	}
	l.Credit("chat")
	l.Credit("chat") // never below zero
	if l.Used("chat") != 0 || strings.Join(l.Salts(), ",") != "rag" {
		t.Errorf("chat used %d, salts %v", l.Used("chat"), l.Salts())
	}
}

// FuzzParseBudgets: a spec parses into budgets whose canonical form parses back the same,
// or fails with ErrBudget; resolving never panics.
func FuzzParseBudgets(f *testing.F) {
	for _, s := range []string{"rag=40%,chat=1000,agent=64G", "=1,*=2%", "a=b=0x10K", ",,", "x=1e400%"} {
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
		if sb, err := b.Slots(1000, 4096); err == nil {
			var sum int64
			for _, n := range sb.BySalt {
				sum += n
			}
			if sum > 1000 {
				t.Fatalf("budgets %v exceed the cache", sb.BySalt)
			}
		}
	})
}
