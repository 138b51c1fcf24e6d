package flagsets

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// bench's, rm's and simulate's --deallocate takes serve's words all and none besides true
// and false, as a value ("--deallocate none" is the flag's value, not an argument), and
// refuses devices and anything else saying what to give.
func TestDeallocateBool(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
		err  string
		rest int // positional arguments left
	}{
		{args: nil, want: true},
		{args: []string{"--deallocate", "none", "DEV"}, want: false, rest: 1},
		{args: []string{"--deallocate=none"}, want: false},
		{args: []string{"--deallocate", "all"}, want: true},
		{args: []string{"--deallocate=false"}, want: false},
		{args: []string{"--deallocate=NONE"}, want: false},
		{args: []string{"--deallocate", "true"}, want: true},
		{args: []string{"--deallocate", "devices"}, err: "give all or none"},
		{args: []string{"--deallocate", "off"}, err: "give all or none"},
		{args: []string{"--deallocate"}, err: "needs an argument"},
	} {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		fs.SetOutput(&strings.Builder{})
		var on bool
		DeallocateBool(fs, &on, true, "deallocate")
		err := fs.Parse(tc.args)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want one saying %q", tc.args, err, tc.err)
			}
		case err != nil || on != tc.want || fs.NArg() != tc.rest:
			t.Errorf("%q: %v, %d arguments left, err %v; want %v, %d", tc.args, on, fs.NArg(), err, tc.want, tc.rest)
		}
	}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	var on bool
	DeallocateBool(fs, &on, false, "deallocate")
	if f := fs.Lookup("deallocate"); f.DefValue != "none" || on {
		t.Errorf("default false shows as %q, value %v", f.DefValue, on)
	}
}
