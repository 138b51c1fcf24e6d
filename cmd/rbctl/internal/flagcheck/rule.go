// Package flagcheck enforces rbctl's flag contract (docs/cli.md): each numeric and size
// flag has a Rule, every value is checked against it before a command runs, and the flag
// tables of docs/cli.md are rendered from the command tree and the rules. The rules
// themselves live in one table in the CLI (cmd/rbctl/internal/cli/contract.go). It also
// holds the generic flag helpers (value.go): size flags read into an int64, old names as
// hidden aliases.
package flagcheck

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rbctl/rbctl/units"
)

// Kind says how a flag's value is checked.
type Kind int

const (
	Int      Kind = iota // integer in [Min, Max]
	Float                // float in [Min, Max] (finite)
	Fraction             // float in [0, 1] unless Min/Max narrow it
	Duration             // duration in [Min, Max] (seconds)
	Size                 // size string in [Min, Max] bytes, or one of Words
	Any                  // any value the type accepts (IDs decided by the device)
)

// Rule is the accepted range of one flag. OpenMin excludes Min itself.
type Rule struct {
	Kind       Kind
	Min, Max   float64
	OpenMin    bool
	Words      []string // size flags: words accepted besides sizes (auto, "")
	Zero       string   // what 0 means, when 0 is outside [Min, Max] but accepted
	Pow2       bool     // integer or size: a power of two
	MultipleOf int64    // integer or size: a multiple of this
	ZeroNeeds  string   // 0 is accepted only when this other flag is non-zero
}

// Numeric reports whether f's type is one a Rule other than Size applies to.
func Numeric(f *pflag.Flag) bool {
	switch f.Value.Type() {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64",
		"float32", "float64", "duration":
		return true
	}
	return false
}

// IsZero reports whether a numeric flag holds 0.
func IsZero(f *pflag.Flag) bool {
	if d, err := time.ParseDuration(f.Value.String()); err == nil {
		return d == 0
	}
	v, err := strconv.ParseFloat(f.Value.String(), 64)
	return err == nil && v == 0
}

// RangeText says in words what the rule accepts ("[1, 4096]", "> 0 (or 0: never)").
func (r Rule) RangeText() string {
	lo := "["
	if r.OpenMin {
		lo = "("
	}
	num := func(v float64) string {
		switch {
		case r.Kind == Duration:
			return (time.Duration(v * float64(time.Second))).String()
		case r.Kind == Size:
			return units.FormatExact(int64(v))
		case v >= 1<<20 && v == math.Trunc(v) && r.Kind == Int:
			return "2^" + strconv.Itoa(int(math.Round(math.Log2(v))))
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	s := lo + num(r.Min) + ", " + num(r.Max) + "]"
	if r.Kind == Duration && r.Max >= 365*24*3600 {
		s = "> 0"
		if !r.OpenMin {
			s = ">= " + num(r.Min)
		}
	}
	if r.Kind == Size {
		s = "a size of at least " + num(r.Min) + " (e.g. 4096, 64K, 1MiB, 2G)"
	}
	if r.Pow2 {
		s += ", a power of two"
	}
	if r.MultipleOf > 1 {
		s += ", a multiple of " + strconv.FormatInt(r.MultipleOf, 10)
	}
	if r.Kind == Size {
		var w []string
		for _, x := range r.Words {
			if x != "" {
				w = append(w, strconv.Quote(x))
			}
		}
		if len(w) > 0 {
			s += " or " + strings.Join(w, ", ")
		}
	}
	if r.Zero != "" {
		s += " (or 0: " + r.Zero + ")"
	}
	return s
}

// in reports whether v is in [Min, Max] (OpenMin: Min excluded), or 0 with a Zero meaning.
func (r Rule) in(v float64) bool {
	if r.Zero != "" && v == 0 {
		return true
	}
	return !math.IsNaN(v) && !math.IsInf(v, 0) && v <= r.Max && v >= r.Min && !(r.OpenMin && v == r.Min)
}

// shaped reports whether the whole number n has the rule's shape: a power of two, a
// multiple (0, when accepted, has every shape).
func (r Rule) shaped(n int64) bool {
	return !(r.Pow2 && n > 0 && n&(n-1) != 0) && !(r.MultipleOf > 1 && n%r.MultipleOf != 0)
}

// Contains reports whether the number v is a value the rule accepts: in range and, for an
// integer or a size, a whole number of the rule's shape (a size in bytes, a duration in
// seconds). A value that is not a flag's (a sweep point, say) is checked with it.
func (r Rule) Contains(v float64) bool {
	switch r.Kind {
	case Any:
		return true
	case Int, Size:
		return r.in(v) && v == math.Trunc(v) && r.shaped(int64(v))
	}
	return r.in(v)
}

// Check checks f's value against the rule; the error names the flag and the range.
func (r Rule) Check(f *pflag.Flag) error {
	bad := func() error {
		return fmt.Errorf("--%s %s: out of range; want %s", f.Name, f.Value.String(), r.RangeText())
	}
	in := r.in
	switch r.Kind {
	case Any:
		return nil
	case Duration:
		d, err := time.ParseDuration(f.Value.String())
		if err != nil {
			return fmt.Errorf("--%s %s: %v", f.Name, f.Value.String(), err)
		}
		if !in(d.Seconds()) {
			return bad()
		}
	case Int:
		s := f.Value.String()
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("--%s %s: not a number", f.Name, s)
		}
		n, _ := strconv.ParseInt(s, 10, 64)
		if !in(v) || !r.shaped(n) {
			return bad()
		}
	case Float, Fraction:
		v, err := strconv.ParseFloat(f.Value.String(), 64)
		if err != nil {
			return fmt.Errorf("--%s %s: not a number", f.Name, f.Value.String())
		}
		if !in(v) {
			return bad()
		}
	case Size:
		s := strings.TrimSpace(f.Value.String())
		for _, w := range r.Words {
			if strings.EqualFold(s, w) {
				return nil
			}
		}
		n, err := units.ParseSize(s)
		if err != nil {
			return fmt.Errorf("--%s %q: %v; want %s", f.Name, f.Value.String(), err, r.RangeText())
		}
		if !in(float64(n)) || !r.shaped(n) {
			return bad()
		}
	}
	return nil
}
