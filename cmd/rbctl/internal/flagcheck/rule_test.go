package flagcheck

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func flagWith(t *testing.T, kind, value string) *pflag.Flag {
	t.Helper()
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	switch kind {
	case "int":
		fs.Int("x", 0, "")
	case "float":
		fs.Float64("x", 0, "")
	case "duration":
		fs.Duration("x", 0, "")
	default:
		fs.String("x", "", "")
	}
	if err := fs.Set("x", value); err != nil {
		t.Fatal(err)
	}
	return fs.Lookup("x")
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		rule        Rule
		kind, value string
		ok          bool
	}{
		{Rule{Kind: Int, Min: 1, Max: 10}, "int", "10", true},
		{Rule{Kind: Int, Min: 1, Max: 10}, "int", "11", false},
		{Rule{Kind: Int, Min: 1, Max: 10, Zero: "never"}, "int", "0", true},
		{Rule{Kind: Int, Min: 512, Max: 1 << 20, Pow2: true}, "int", "768", false},
		{Rule{Kind: Int, Min: 4, Max: 64, MultipleOf: 4}, "int", "6", false},
		{Rule{Kind: Fraction, Min: 0, Max: 1, OpenMin: true}, "float", "0", false},
		{Rule{Kind: Fraction, Min: 0, Max: 1}, "float", "NaN", false},
		{Rule{Kind: Duration, Min: 0, Max: 3600, OpenMin: true}, "duration", "-5s", false},
		{Rule{Kind: Duration, Min: 0, Max: 3600, OpenMin: true}, "duration", "1ms", true},
		{Rule{Kind: Size, Min: 4096, Max: 1 << 40, Words: []string{"auto"}}, "string", "AUTO", true},
		{Rule{Kind: Size, Min: 4096, Max: 1 << 40}, "string", "1K", false},
		{Rule{Kind: Size, Min: 4096, Max: 1 << 40}, "string", "64K", true},
		{Rule{Kind: Size, Min: 4096, Max: 1 << 40}, "string", "lots", false},
		{Rule{Kind: Size, Min: 512, Max: 1 << 40, MultipleOf: 512, Words: []string{"auto"}}, "string", "3000", false},
		{Rule{Kind: Size, Min: 512, Max: 1 << 40, MultipleOf: 512}, "string", "1536", true},
		{Rule{Kind: Size, Min: 512, Max: 1 << 40, MultipleOf: 512}, "string", "12K", true},
		{Rule{Kind: Size, Min: 512, Max: 1 << 40, Pow2: true}, "string", "12K", false},
		{Rule{Kind: Any}, "int", "-7", true},
	} {
		err := tc.rule.Check(flagWith(t, tc.kind, tc.value))
		if (err == nil) != tc.ok {
			t.Errorf("%+v %s: %v, want ok=%v", tc.rule, tc.value, err, tc.ok)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "--x ") {
			t.Errorf("error does not start with the flag: %v", err)
		}
	}
}

// Contains checks a bare number (a sweep point) as Check checks a flag's value.
func TestContains(t *testing.T) {
	frac := Rule{Kind: Fraction, Min: 0, Max: 1, OpenMin: true}
	size := Rule{Kind: Size, Min: 4096, Max: 1 << 40, MultipleOf: 512}
	for _, tc := range []struct {
		rule Rule
		v    float64
		ok   bool
	}{
		{frac, 0.5, true}, {frac, 1, true}, {frac, 1.5, false}, {frac, 0, false},
		{size, 8192, true}, {size, 4000, false}, {size, 4096.5, false}, {size, 5000, false},
		{Rule{Kind: Int, Min: 1, Max: 10, Zero: "never"}, 0, true},
		{Rule{Kind: Any}, -1, true},
	} {
		if got := tc.rule.Contains(tc.v); got != tc.ok {
			t.Errorf("%+v contains %v: %v, want %v", tc.rule, tc.v, got, tc.ok)
		}
	}
}

func TestRangeText(t *testing.T) {
	for r, want := range map[*Rule]string{
		{Kind: Int, Min: 1, Max: 1 << 40, Zero: "never"}:                   "[1, 2^40] (or 0: never)",
		{Kind: Fraction, Min: 0, Max: 1, OpenMin: true}:                    "(0, 1]",
		{Kind: Duration, Min: 0, Max: 10 * 365 * 24 * 3600, OpenMin: true}: "> 0",
		{Kind: Duration, Min: 0.001, Max: 10 * 365 * 24 * 3600}:            ">= 1ms",
		{Kind: Size, Min: 4096, Max: 1 << 62, Words: []string{"", "auto"}}: `a size of at least 4 KiB (e.g. 4096, 64K, 1MiB, 2G) or "auto"`,
		{Kind: Int, Min: 512, Max: 1 << 24, Pow2: true}:                    "[512, 2^24], a power of two",
		{Kind: Size, Min: 512, Max: 1 << 62, MultipleOf: 512}:              "a size of at least 512 B (e.g. 4096, 64K, 1MiB, 2G), a multiple of 512",
	} {
		if got := r.RangeText(); got != want {
			t.Errorf("RangeText(%+v) = %q, want %q", *r, got, want)
		}
	}
}

func tree() *cobra.Command {
	root := &cobra.Command{Use: "rb"}
	run := &cobra.Command{Use: "run", RunE: func(*cobra.Command, []string) error { return nil }}
	run.Flags().Duration("duration", time.Second, "how long")
	run.Flags().Int("requests", 0, "how many")
	run.Flags().StringP("out", "o", "-", "where | to")
	run.Flags().Bool("old", false, "")
	_ = run.Flags().MarkHidden("old")
	hidden := &cobra.Command{Use: "writer", Hidden: true, RunE: run.RunE}
	hidden.Flags().Int("requests", 1, "")
	root.AddCommand(run, hidden)
	return root
}

func rules(_ *cobra.Command, f *pflag.Flag) (Rule, bool) {
	switch f.Name {
	case "duration":
		return Rule{Kind: Duration, Min: 0, Max: 3600, OpenMin: true, Zero: "no limit", ZeroNeeds: "requests"}, true
	case "requests":
		return Rule{Kind: Int, Min: 1, Max: 100, Zero: "no limit"}, true
	}
	return Rule{}, false
}

func TestValidateZeroNeeds(t *testing.T) {
	root := tree()
	run, _, _ := root.Find([]string{"run"})
	if err := Validate(run, rules); err != nil {
		t.Fatal(err)
	}
	_ = run.Flags().Set("duration", "0s")
	if err := Validate(run, rules); err == nil || !strings.Contains(err.Error(), "--duration 0 needs --requests > 0") {
		t.Errorf("zero duration without requests: %v", err)
	}
	_ = run.Flags().Set("requests", "5")
	if err := Validate(run, rules); err != nil {
		t.Errorf("zero duration with requests: %v", err)
	}
}

func TestMarkdown(t *testing.T) {
	md := FlagsMarkdown(tree(), rules)
	for _, want := range []string{
		"| rb run | `--duration` |  | duration | `1s` | (0s, 1h0m0s] (or 0: no limit) | how long |",
		"| rb run | `--out` | `-o` | string | `-` |  | where \\| to |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("flags table lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "--old") || strings.Contains(md, "writer") {
		t.Errorf("flags table lists hidden flags or commands:\n%s", md)
	}
	if rm := RulesMarkdown(tree(), rules); !strings.Contains(rm, "| `--requests` | run, writer | [1, 100] (or 0: no limit) |") {
		t.Errorf("rules table:\n%s", rm)
	}
}
