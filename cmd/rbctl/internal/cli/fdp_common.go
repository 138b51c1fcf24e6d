package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagcheck"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/reports"
)

// exitNoFDP is the exit status of every FDP command on a device without FDP.
const exitNoFDP = exitUnsupported

// openFDP opens DEV for NVMe admin commands and checks CTRATT bit 19 first, so that nothing
// else is sent to a controller without FDP.
func openFDP(dev string, nsid uint32) (*devices.Admin, error) {
	a, err := devices.OpenAdmin(dev, devices.AdminOptions{NSID: nsid})
	if err != nil {
		return nil, fdpError(dev, err) // a regular file or a SCSI disk has no FDP either: 2
	}
	if err := a.CheckFDP(); err != nil {
		a.Close()
		return nil, fdpError(dev, err)
	}
	return a, nil
}

// fdpError turns "no FDP" (not an NVMe device, FDP not supported, FDP disabled) into exit
// status 2, with the command that enables FDP.
func fdpError(dev string, err error) error {
	switch {
	case errors.Is(err, fdp.ErrFDPNotSupported) && !strings.HasPrefix(err.Error(), dev+": "):
		return &ExitError{Code: exitNoFDP, Err: fmt.Errorf("%s: %w", dev, err)}
	case errors.Is(err, fdp.ErrFDPNotSupported):
		return &ExitError{Code: exitNoFDP, Err: err}
	case errors.Is(err, devices.ErrNotNVMe):
		return &ExitError{Code: exitNoFDP, Err: err}
	case errors.Is(err, devices.ErrFDPDisabled):
		return &ExitError{Code: exitNoFDP, Err: fmt.Errorf("%s: FDP is disabled in this endurance group; enable it with `rbctl fdp feature %s -c 0 --yes`: %w", dev, dev, err)}
	}
	return err
}

// nsidAlias accepts the old --nsid as a hidden spelling of --namespace-id.
func nsidAlias(cmd *cobra.Command) {
	flagcheck.Alias(cmd.Flags(), "nsid", "namespace-id")
}

// writeSections prints a library's report: each section's lines, then its table.
func writeSections(w io.Writer, secs []devices.Section) error {
	for _, s := range secs {
		for _, l := range s.Lines {
			fmt.Fprintln(w, l)
		}
		if s.Header == nil {
			continue
		}
		t := reports.NewTable(w)
		t.Header(s.Header)
		for _, r := range s.Rows {
			if err := t.Append(r); err != nil {
				return err
			}
		}
		if err := t.Render(); err != nil {
			return err
		}
	}
	return nil
}

// needYes refuses a device-changing command without --yes.
func needYes(yes bool, what string) error {
	if !yes {
		return fmt.Errorf("%s changes the device's FDP state; add --yes to do it", what)
	}
	return nil
}
