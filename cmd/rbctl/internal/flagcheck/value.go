package flagcheck

import (
	"fmt"
	"slices"

	"github.com/spf13/pflag"

	"github.com/rbctl/rbctl/units"
)

// sizeValue is a size flag (units.ParseSize) read into an int64; "" and words read as 0.
// Its Type is "string" so that the contract's size rules apply to it.
type sizeValue struct {
	v     *int64
	s     string
	words []string
}

func (f *sizeValue) String() string { return f.s }
func (f *sizeValue) Type() string   { return "string" }
func (f *sizeValue) Set(s string) error {
	if f.s, *f.v = s, 0; s == "" || slices.Contains(f.words, s) {
		return nil
	}
	n, err := units.ParseSize(s)
	if err == nil && n <= 0 {
		err = fmt.Errorf("want a positive size such as 64K")
	}
	*f.v = n
	return err
}

// SizeVar defines a size flag read into *p; words (such as "auto") read as 0. It panics if
// def is not a size: the default is the program's, not the user's.
func SizeVar(fs *pflag.FlagSet, p *int64, name, def, usage string, words ...string) {
	f := &sizeValue{v: p, words: words}
	if err := f.Set(def); err != nil {
		panic(err)
	}
	fs.Var(f, name, usage)
}

// Alias makes old a hidden spelling of the flag new on fs (kept for a release after a
// rename), on top of whatever normalization fs already does.
func Alias(fs *pflag.FlagSet, old, new string) {
	prev := fs.GetNormalizeFunc()
	fs.SetNormalizeFunc(func(f *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == old {
			name = new
		}
		return prev(f, name)
	})
}
