package cli

import (
	"strings"
	"testing"
)

// A mistyped command or flag gets the nearest one; an unknown one with nothing near gets
// where to look.
func TestSuggestions(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"benhc"}, `unknown command "benhc" for "rbctl"; did you mean bench?`},
		{[]string{"fdp", "stauts"}, "did you mean stats or status?"},
		{[]string{"bench", "--plcement", "none", "x.img"}, "unknown flag: --plcement; did you mean --placement?"},
		{[]string{"simulate", "--devce-size", "1T"}, "did you mean --device-size?"},
		{[]string{"simulate", "--zzzzzzzz"}, "unknown flag: --zzzzzzzz (rbctl simulate --help lists the flags)"},
	} {
		_, err := runCLI(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("rbctl %s: %v; want %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}

// The enumerated flags complete their values, the last element of a list too.
func TestFlagValueCompletion(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
		not  string
	}{
		{[]string{"bench", "--placement", "none,cache-salt:h"}, []string{"none,cache-salt:hash"}, "none\n"},
		{[]string{"simulate", "--placement", "oracle:salt-l"}, []string{"oracle:salt-lifetime"}, ""},
		{[]string{"simulate", "--model", "llama3"}, []string{"llama3-8b", "llama3-70b"}, "tiny"},
		{[]string{"bench", "--eviction", "reg"}, []string{"region", "region-fifo"}, "lru"},
		{[]string{"simulate", "--workload", "moon"}, []string{"mooncake:"}, ""},
		{[]string{"simulate", "--admission", "all,t"}, []string{"all,tinylfu"}, ""},
		{[]string{"serve", "--eviction", ""}, []string{"lru", "none"}, ""},
	} {
		out, err := runCLI(t, append([]string{"__complete"}, c.args...)...)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w+"\n") {
				t.Errorf("complete %v: %q lacks %q", c.args, out, w)
			}
		}
		if c.not != "" && strings.Contains(out, c.not) {
			t.Errorf("complete %v: %q offers %q", c.args, out, c.not)
		}
	}
}

// Help lists commands under headings and a long flag list in groups, with no internal tags.
func TestHelpGroups(t *testing.T) {
	out, err := runCLI(t, "--help")
	if err != nil || !strings.Contains(out, "A cache on a device:\n  format") || !strings.Contains(out, "Measuring placement:") {
		t.Fatalf("rbctl --help: %v\n%s", err, out)
	}
	for _, cmd := range []string{"bench", "simulate"} {
		out, err := runCLI(t, cmd, "--help")
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range []string{"Device and layout flags:", "Drive model (FTL) flags:", "Placement, eviction, admission flags:", "Workload and window flags:", "Output flags:"} {
			if cmd == "simulate" && h == "Device and layout flags:" {
				continue
			}
			if !strings.Contains(out, "\n"+h+"\n") {
				t.Errorf("%s --help has no %q", cmd, h)
			}
		}
		if strings.Contains(out, "(H4)") || strings.Contains(out, "(H6)") {
			t.Errorf("%s --help carries an internal tag", cmd)
		}
	}
}
