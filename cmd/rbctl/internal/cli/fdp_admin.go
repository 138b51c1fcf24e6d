package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagcheck"
	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/fdp"
)

// The FDP commands that change the device: each needs --yes.

// newFDPChangeCmd builds update and set-events: parse their flags (prepare, before the
// device is opened), then change the namespace -n and print "<name>: Success" as nvme-cli.
func newFDPChangeCmd(use, short string, flags func(*cobra.Command), prepare func() (func(a *devices.Admin, nsid uint32) error, error)) *cobra.Command {
	var nsid uint32
	var yes, asJSON bool
	cmd := &cobra.Command{Use: use, Short: short, Args: cobra.ExactArgs(1)}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		change, err := prepare()
		if err != nil {
			return err
		}
		if err := needYes(yes, "fdp "+cmd.Name()); err != nil {
			return err
		}
		a, err := openFDP(args[0], nsid)
		if err != nil {
			return err
		}
		defer a.Close()
		if err := change(a, nsid); err != nil {
			return fdpError(args[0], err)
		}
		if asJSON {
			return flagsets.WriteJSON(cmd.OutOrStdout(), map[string]string{"command": cmd.Name(), "status": "Success"})
		}
		fmt.Fprintln(cmd.OutOrStdout(), cmd.Name()+": Success")
		return nil
	}
	cmd.Flags().Uint32VarP(&nsid, "namespace-id", "n", 0, "namespace (0: the device's)")
	cmd.Flags().BoolVar(&yes, "yes", false, "really change the device")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"command": NAME, "status": "Success"}`)
	flags(cmd)
	nsidAlias(cmd)
	return cmd
}

func newFDPUpdateCmd() *cobra.Command {
	var pids string
	return newFDPChangeCmd("update DEV --pids LIST --yes", "Reclaim Unit Handle Update (I/O Management Send): move PIDs to fresh reclaim units",
		func(cmd *cobra.Command) {
			cmd.Flags().StringVarP(&pids, "pids", "p", "", "comma-separated placement identifiers (required)")
			_ = cmd.MarkFlagRequired("pids")
		}, func() (func(*devices.Admin, uint32) error, error) {
			p, err := fdp.ParsePIDs(pids)
			if err != nil {
				return nil, fmt.Errorf("--pids: %w", err)
			}
			return func(a *devices.Admin, nsid uint32) error { return devices.UpdateRUH(a.Transport, nsid, p) }, nil
		})
}

func newFDPSetEventsCmd() *cobra.Command {
	var ph uint16
	var enable, save bool
	var types string
	return newFDPChangeCmd("set-events DEV --placement-handle PH --event-types LIST [--enable] --yes",
		"Enable or disable FDP event types for a placement handle (Set Features 0x1E)",
		func(cmd *cobra.Command) {
			cmd.Flags().Uint16VarP(&ph, "placement-handle", "p", 0, "placement handle")
			cmd.Flags().BoolVarP(&enable, "enable", "e", false, "enable the event types (default: disable)")
			flagcheck.Alias(cmd.Flags(), "save", "persist") // nvme-cli's spelling; --save is a report file elsewhere
			cmd.Flags().BoolVarP(&save, "persist", "s", false, "keep the setting across power cycles (SV; nvme-cli's --save)")
			cmd.Flags().StringVarP(&types, "event-types", "t", "", "comma-separated event types, e.g. 0,3 (required)")
			_ = cmd.MarkFlagRequired("event-types")
		}, func() (func(*devices.Admin, uint32) error, error) {
			et, err := fdp.ParseEventTypes(types)
			if err != nil {
				return nil, fmt.Errorf("--event-types: %w", err)
			}
			return func(a *devices.Admin, nsid uint32) error {
				return fdp.SetEventEnables(a.Transport, nsid, ph, et, enable, save)
			}, nil
		})
}

func newFDPFeatureCmd() *cobra.Command {
	var endgid uint16
	var cidx uint8
	var disable, verbose, yes, asJSON bool
	cmd := &cobra.Command{
		Use:   "feature DEV [-c IDX | -d] [--yes]",
		Short: "Show, enable (-c IDX) or disable (-d) FDP in an endurance group (feature 0x1D)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			enable := cmd.Flags().Changed("enable-conf-idx")
			if enable && disable {
				return fmt.Errorf("give either --enable-conf-idx or --disable, not both")
			}
			if err := needYes(yes || !(enable || disable), "enabling or disabling FDP"); err != nil {
				return err
			}
			a, err := openFDP(args[0], 0)
			if err != nil {
				return err
			}
			defer a.Close()
			w := cmd.OutOrStdout()
			get := !enable && !disable
			read := a.Feature
			if !get {
				read = func(eg uint16) (uint16, fdp.FeatureState, error) { return a.SetFDP(eg, !disable, cidx) }
			}
			eg, f, err := read(endgid)
			switch {
			case err != nil:
				return fdpError(args[0], err)
			case asJSON:
				return flagsets.WriteJSON(w, map[string]any{"endgid": eg, "fdpe": f.Enabled, "fdpcidx": f.ConfigIndex & 0xf, "changed": !get})
			case get:
				f.WriteText(w, eg)
				return nil
			}
			fmt.Fprintf(w, "Success %s Endurance Group: %d, FDP configuration index: %d\n", map[bool]string{true: "disabling", false: "enabling"}[disable], eg, cidx)
			if verbose {
				fmt.Fprintf(w, "set-feature: FID 0x1d, cdw11 %#x, cdw12 %#x, save 1\n", eg, f.Value())
			}
			return nil
		},
	}
	cmd.Flags().Uint16VarP(&endgid, "endgrp-id", "e", 0, "endurance group (0: the namespace's)")
	cmd.Flags().Uint8VarP(&cidx, "enable-conf-idx", "c", 0, "enable FDP with this configuration index")
	cmd.Flags().BoolVarP(&disable, "disable", "d", false, "disable FDP")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print the command sent")
	cmd.Flags().BoolVar(&yes, "yes", false, "really change the device")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the endurance group and its FDP enable and configuration index as JSON")
	return cmd
}
