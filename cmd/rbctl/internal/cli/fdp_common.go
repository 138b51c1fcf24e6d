package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/nvme"
	"github.com/rbctl/rbctl/reports"
)

// exitNoFDP is the exit status of every FDP command on a device without FDP.
const exitNoFDP = 2

// openFDP opens DEV for the FDP commands: an emu: spec gives the emulated SSD, anything else
// goes to nvme.Open (/dev/ngXnY, /dev/nvmeXnY, /dev/nvmeX). It then checks CTRATT bit 19 so
// that nothing else is sent to a controller without FDP. The emulated SSD is opened
// read-only and must exist; the commands that change its FDP state (feature, set-events,
// update) get it to themselves on their first change (emu.OpenOptions.ReadOnly).
func openFDP(dev string, nsid uint32) (nvme.Transport, *nvme.ControllerData, error) {
	var t nvme.Transport
	var err error
	if emu.IsSpec(dev) {
		t, err = emu.OpenWith(dev, emu.OpenOptions{ReadOnly: true})
	} else {
		t, err = nvme.Open(dev, nvme.OpenOptions{NSID: nsid})
	}
	if err != nil {
		return nil, nil, err
	}
	ctrl, err := fdp.CheckSupported(t)
	if err != nil {
		t.Close()
		return nil, nil, fdpError(dev, err)
	}
	return t, ctrl, nil
}

// fdpError turns "no FDP" into a plain message and exit status 2.
func fdpError(dev string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, fdp.ErrFDPNotSupported) {
		return &ExitError{Code: exitNoFDP, Err: fmt.Errorf("%s: %w", dev, err)}
	}
	if errors.Is(err, nvme.ErrFDPDisabled) {
		return &ExitError{Code: exitNoFDP, Err: fmt.Errorf("%s: FDP is disabled in this endurance group; enable it with `rbctl fdp feature %s -c 0 --yes`: %w", dev, dev, err)}
	}
	return err
}

// outputFlags are nvme-cli's -o/--output-format and -b/--raw-binary, plus --json.
type outputFlags struct {
	format string
	raw    bool
	json   bool
}

func (o *outputFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&o.format, "output-format", "o", "normal", "output format: normal|json|binary")
	cmd.Flags().BoolVarP(&o.raw, "raw-binary", "b", false, "write the raw log/buffer to stdout")
	cmd.Flags().BoolVar(&o.json, "json", false, "same as --output-format json")
}

func (o *outputFlags) mode() (string, error) {
	switch {
	case o.raw:
		return "binary", nil
	case o.json:
		return "json", nil
	}
	switch f := strings.ToLower(o.format); f {
	case "normal", "json", "binary":
		return f, nil
	}
	return "", fmt.Errorf("unknown output format %q; use normal, json or binary", o.format)
}

// writeJSON prints v as indented JSON with a trailing newline (like nvme-cli's pretty JSON),
// without escaping '&' and '<' (device specs contain '&').
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// fdpTable prints a plain table with the given header.
func fdpTable(w io.Writer, header []string, rows [][]string) error {
	t := reports.NewTable(w)
	t.Header(header)
	for _, r := range rows {
		if err := t.Append(r); err != nil {
			return err
		}
	}
	return t.Render()
}

// parseUintList parses nvme-cli's comma lists ("1,2,0x10") of bits-wide numbers.
func parseUintList(s string, bits int) ([]uint64, error) {
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.ParseUint(f, 0, bits)
		if err != nil {
			return nil, fmt.Errorf("bad value %q in list %q (want %d-bit numbers separated by commas)", f, s, bits)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty list %q", s)
	}
	return out, nil
}

// needYes refuses a device-changing command without --yes.
func needYes(yes bool, what string) error {
	if !yes {
		return fmt.Errorf("%s changes the device's FDP state; add --yes to do it", what)
	}
	return nil
}
