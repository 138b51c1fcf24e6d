package flagsets

import (
	"errors"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// DeallocateBool adds --deallocate to a command that deallocates on the one device it is
// given (bench, rm, simulate), default def: all (deallocate) or none, the words of serve's
// --deallocate, and true or false as before. It takes a value, as serve's does, so that
// "--deallocate none" is read as the flag's value and not as an argument. serve's third
// word, devices, is refused with what to give instead: it chooses among a node's devices.
func DeallocateBool(fs *pflag.FlagSet, p *bool, def bool, usage string) {
	*p = def
	fs.Var(deallocBool{p}, "deallocate", usage)
}

type deallocBool struct{ p *bool }

func (d deallocBool) String() string {
	if d.p == nil || !*d.p {
		return "none"
	}
	return "all"
}

func (d deallocBool) Set(s string) error {
	switch strings.ToLower(s) {
	case "all":
		*d.p = true
		return nil
	case "none":
		*d.p = false
		return nil
	case "devices":
		return errors.New("devices chooses among a node's devices (serve, cluster-bench); this command deallocates on the device it is given or not at all: give all or none")
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("give all or none (true or false)")
	}
	*d.p = v
	return nil
}

func (d deallocBool) Type() string { return "string" }
