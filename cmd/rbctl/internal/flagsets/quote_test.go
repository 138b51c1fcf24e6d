package flagsets

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// A key repeated in a message is escaped and, when long, cut to 64 bytes (never inside a
// UTF-8 sequence) with its length.
func TestQuoteKey(t *testing.T) {
	for in, want := range map[string]string{
		"m@0x00000000@00":                    "m@0x00000000@00",
		"a\x1bb":                             `a\x1bb`,
		strings.Repeat("k", 65536):           strings.Repeat("k", 64) + "... (65536 bytes)",
		strings.Repeat("k", 63) + "é" + "zz": strings.Repeat("k", 63) + "... (67 bytes)",
	} {
		if got := QuoteKey(in); got != want {
			t.Errorf("QuoteKey(%.20q...): %q, want %q", in, got, want)
		}
	}
}

// A number flag given something that does not parse names the flag, the value and what it
// takes, not strconv's words.
func TestInvalidNumberNamesFlagAndRange(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"--rank -1", `--rank "-1": want a whole number in [0, 18446744073709551615]`},
		{"--lid 300", `--lid "300": want a whole number in [0, 255]`},
		{"--depth x", `--depth "x": want a whole number`},
		{"--util abc", `--util "abc": want a number`},
		{"--json=maybe", `--json "maybe": want true or false`},
	} {
		root := &cobra.Command{Use: "rbctl"}
		c := &cobra.Command{Use: "c", RunE: func(*cobra.Command, []string) error { return nil }}
		c.Flags().Uint64("rank", 0, "")
		c.Flags().Uint8("lid", 0, "")
		c.Flags().Int("depth", 0, "")
		c.Flags().Float64("util", 0, "")
		c.Flags().Bool("json", false, "")
		root.AddCommand(c)
		root.SilenceErrors, root.SilenceUsage = true, true
		Suggest(root)
		root.SetArgs(append([]string{"c"}, strings.Fields(tc.args)...))
		if err := root.Execute(); err == nil || err.Error() != tc.want || strings.Contains(err.Error(), "strconv") {
			t.Errorf("%s: %v, want %q", tc.args, err, tc.want)
		}
	}
}
