package flagsets

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Suggest makes root and every command under it answer a mistyped flag with the nearest
// one ("unknown flag: --plcement; did you mean --placement?"), and sets every command's
// SuggestionsMinimumDistance for mistyped sub-commands ("rbctl benhc": bench).
func Suggest(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.SuggestionsMinimumDistance = 2
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		var ne *pflag.NotExistError
		if iv := (*pflag.InvalidValueError)(nil); errors.As(err, &iv) {
			return invalidValue(iv, err)
		}
		if !errors.As(err, &ne) || ne.GetSpecifiedName() == "" {
			return err
		}
		if near := NearestFlag(c, ne.GetSpecifiedName()); near != "" {
			return fmt.Errorf("%w; did you mean --%s? (%s --help lists them)", err, near, c.CommandPath())
		}
		return fmt.Errorf("%w (%s --help lists the flags)", err, c.CommandPath())
	})
}

// NearestFlag is the visible flag of c (its own or inherited) closest to name: within two
// edits, or one that starts with it; "" for none.
func NearestFlag(c *cobra.Command, name string) string {
	best, bestD := "", 3
	visit := func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		d := Distance(name, f.Name)
		if len(name) >= 3 && len(f.Name) > len(name) && f.Name[:len(name)] == name {
			d = min(d, 1)
		}
		if d < bestD || (d == bestD && f.Name < best) {
			best, bestD = f.Name, d
		}
	}
	c.Flags().VisitAll(visit)
	c.InheritedFlags().VisitAll(visit)
	return best
}

// Distance is the Levenshtein distance of a and b (bytes; flag names are ASCII).
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, sub)
		}
		prev = cur
	}
	return prev[len(b)]
}

// invalidValue phrases a value that does not parse as its flag's number or boolean ("--rank
// "-1": want a whole number in [0, 18446744073709551615]") instead of strconv's
// "strconv.ParseUint: parsing "-1": invalid syntax"; other errors pass unchanged. A flag's
// own range (flagcheck rules) is checked once the flags parse.
func invalidValue(iv *pflag.InvalidValueError, err error) error {
	var num *strconv.NumError
	if !errors.As(err, &num) {
		return err
	}
	want := "a whole number"
	switch typ := iv.GetFlag().Value.Type(); typ {
	case "uint8", "uint16", "uint32", "uint64", "uint":
		bits := map[string]int{"uint8": 8, "uint16": 16, "uint32": 32}[typ]
		if bits == 0 {
			bits = 64
		}
		want += fmt.Sprintf(" in [0, %d]", uint64(math.MaxUint64)>>(64-bits))
	case "float32", "float64":
		want = "a number"
	case "bool":
		want = "true or false"
	case "int", "int8", "int16", "int32", "int64":
	default:
		return err
	}
	return fmt.Errorf("--%s %s: want %s", iv.GetFlag().Name, strconv.Quote(iv.GetValue()), want)
}
