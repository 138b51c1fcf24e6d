package cli

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/fdp"
)

func init() { register(newFDPCmd) }

// rbctl fdp …: nvme-cli's fdp plugin (v2.x) with its flags, output lines and JSON keys, so
// the two can be diffed. Differences: -e defaults to the namespace's endurance group instead
// of being required, DEV may be an emu: spec, update/set-events/feature changes need --yes,
// and an empty events log prints a line saying so (nvme-cli prints nothing).
func newFDPCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fdp",
		Short: "NVMe Flexible Data Placement commands (nvme-cli fdp plugin compatible)",
		Long: `FDP log pages, reclaim unit handle status and update, and the FDP features, with
nvme-cli's flags and JSON field names. DEV is /dev/ngXnY, /dev/nvmeXnY, /dev/nvmeX or an
emulated SSD spec (emu:PATH?size=...; see docs/emulator.md). A device without FDP gets
"FDP not supported" and exit status 2, and nothing is sent to it beyond Identify.`,
	}
	var human, host bool
	cmd.AddCommand(
		newFDPReadCmd("configs DEV", "FDP Configurations log (0x20)", true, func(c *cobra.Command) {
			c.Flags().BoolVarP(&human, "human-readable", "H", false, "decode the FDP attributes bits")
		}, func(a *devices.Admin, id uint32) (fdpOut, error) {
			l, raw, err := fdp.ReadConfigs(a.Transport, uint16(id))
			return fdpOut{raw, func() any { return l.JSON() }, func(w io.Writer) { l.WriteText(w, human) }}, err
		}),
		newFDPReadCmd("usage DEV", "Reclaim Unit Handle Usage log (0x21)", true, nil, func(a *devices.Admin, id uint32) (fdpOut, error) {
			l, raw, err := fdp.ReadUsage(a.Transport, uint16(id))
			return fdpOut{raw, func() any { return l.JSON() }, func(w io.Writer) { l.WriteText(w) }}, err
		}),
		newFDPReadCmd("stats DEV", "FDP Statistics log (0x22): HBMW, MBMW, MBE", true, nil, func(a *devices.Admin, id uint32) (fdpOut, error) {
			s, raw, err := fdp.ReadStats(a.Transport, uint16(id))
			return fdpOut{raw, func() any { return s }, func(w io.Writer) { s.WriteText(w) }}, err
		}),
		newFDPReadCmd("events DEV", "FDP Events log (0x23): controller events, or host events with -E", true, func(c *cobra.Command) {
			c.Flags().BoolVarP(&host, "host-events", "E", false, "host events instead of controller events")
		}, func(a *devices.Admin, id uint32) (fdpOut, error) {
			l, raw, err := fdp.ReadEvents(a.Transport, uint16(id), host)
			return fdpOut{raw, func() any { return l.JSON() }, func(w io.Writer) { flagsets.WriteEvents(w, l, id, host) }}, err
		}),
		newFDPReadCmd("status DEV", "Reclaim Unit Handle Status (I/O Management Receive): PID, RUHID, EARUTR, RUAMW", false, nil, func(a *devices.Admin, nsid uint32) (fdpOut, error) {
			s, raw, err := fdp.ReadRUHStatus(a.Transport, nsid)
			return fdpOut{raw, func() any { return s.JSON() }, func(w io.Writer) { s.WriteText(w) }}, err
		}),
		newFDPUpdateCmd(), newFDPSetEventsCmd(), newFDPFeatureCmd())
	return cmd
}

// fdpOut is what one read gives: the raw bytes (-b), the JSON value and the normal printer.
type fdpOut struct {
	raw    []byte
	js     func() any
	normal func(io.Writer)
}

// newFDPReadCmd builds a sub-command that reads one log page (byGroup: of endurance group
// -e, 0 meaning the namespace's) or the RUH status (of namespace -n), with nvme-cli's flags.
func newFDPReadCmd(use, short string, byGroup bool, flags func(*cobra.Command), read func(*devices.Admin, uint32) (fdpOut, error)) *cobra.Command {
	var out flagsets.NVMeOutput
	var endgid uint16
	var nsid uint32
	cmd := &cobra.Command{
		Use: use, Short: short, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			mode, err := out.Mode()
			if err != nil {
				return err
			}
			a, err := openFDP(args[0], nsid)
			if err != nil {
				return err
			}
			defer a.Close()
			id := nsid
			if byGroup {
				eg, err := a.EnduranceGroup(endgid)
				if err != nil {
					return fdpError(args[0], err)
				}
				id = uint32(eg)
			}
			o, err := read(a, id)
			if err != nil {
				return fdpError(args[0], err)
			}
			return flagsets.Emit(cmd.OutOrStdout(), mode, o.raw, o.js(), o.normal)
		},
	}
	if byGroup {
		cmd.Flags().Uint16VarP(&endgid, "endgrp-id", "e", 0, "endurance group (0: the namespace's)")
	} else {
		cmd.Flags().Uint32VarP(&nsid, "namespace-id", "n", 0, "namespace (0: the device's)")
		nsidAlias(cmd)
	}
	if flags != nil {
		flags(cmd)
	}
	out.Add(cmd)
	return cmd
}
