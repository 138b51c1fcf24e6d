package flagsets

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/devices"
)

// keepsNothing are the commands whose every DEV argument must outlive the process: they
// read a cache that an earlier command formatted and filled, or leave one for a later
// command, and a memory device (devices.InMemory) is new and empty on every open.
var keepsNothing = map[string]bool{
	"rbctl format": true, "rbctl put": true, "rbctl get": true, "rbctl rm": true, "rbctl ls": true,
	"rbctl inspect": true, "rbctl recover": true, "rbctl serve": true,
}

// InMemoryTakers names the commands that take a memory device: each makes and uses it
// within its own run.
const InMemoryTakers = "rbctl bench, identify, fdp-status, fdp, nvme log and emu serve"

// RefuseInMemory refuses a memory device given to a command in keepsNothing, before
// anything runs: format would report success for a cache gone at exit, and every later
// command would find an unformatted device.
func RefuseInMemory(cmd *cobra.Command, args []string) error {
	if !keepsNothing[cmd.CommandPath()] {
		return nil
	}
	for _, a := range args {
		if devices.InMemory(a) {
			return fmt.Errorf("%s is a memory device: it lives only inside one rbctl process and is gone when it exits, so %s cannot use it (give a file, an emu:PATH spec or a device; %s take a memory device)",
				a, strings.TrimPrefix(cmd.CommandPath(), "rbctl "), InMemoryTakers)
		}
	}
	return nil
}
