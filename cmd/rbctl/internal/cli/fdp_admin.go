package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/nvme"
)

// The FDP commands that change the device: each needs --yes.

func newFDPUpdateCmd() *cobra.Command {
	var nsid uint32
	var pids string
	var yes bool
	cmd := &cobra.Command{
		Use:   "update DEV --pids LIST --yes",
		Short: "Reclaim Unit Handle Update (I/O Management Send): move PIDs to fresh reclaim units",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			list, err := parseUintList(pids, 16)
			if err != nil {
				return fmt.Errorf("--pids: %w", err)
			}
			if err := needYes(yes, "fdp update"); err != nil {
				return err
			}
			t, _, err := openFDP(args[0], nsid)
			if err != nil {
				return err
			}
			defer t.Close()
			// Check the PIDs against the namespace's RUH status first (a read) so a typo gets
			// a list of the valid ones rather than a bare Invalid Field.
			st, _, err := fdp.ReadRUHStatus(t, nsid)
			if err != nil {
				return fdpError(args[0], err)
			}
			valid := map[uint16]bool{}
			var names []string
			for _, d := range st.Descs {
				valid[d.PID] = true
				names = append(names, strconv.Itoa(int(d.PID)))
			}
			p := make([]uint16, len(list))
			for i, v := range list {
				p[i] = uint16(v)
				if !valid[p[i]] {
					return fmt.Errorf("PID %d is not a placement identifier of this namespace; its PIDs are %s", v, strings.Join(names, ","))
				}
			}
			if err := fdp.UpdateRUH(t, nsid, p); err != nil {
				return fdpError(args[0], err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "update: Success")
			return nil
		},
	}
	cmd.Flags().Uint32VarP(&nsid, "namespace-id", "n", 0, "namespace (0: the device's)")
	cmd.Flags().StringVarP(&pids, "pids", "p", "", "comma-separated placement identifiers (required)")
	cmd.Flags().BoolVar(&yes, "yes", false, "really change the device")
	_ = cmd.MarkFlagRequired("pids")
	return cmd
}

func newFDPSetEventsCmd() *cobra.Command {
	var nsid uint32
	var ph uint16
	var enable, save, yes bool
	var types string
	cmd := &cobra.Command{
		Use:   "set-events DEV --placement-handle PH --event-types LIST [--enable] --yes",
		Short: "Enable or disable FDP event types for a placement handle (Set Features 0x1E)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			list, err := parseUintList(types, 8)
			if err != nil {
				return fmt.Errorf("--event-types: %w", err)
			}
			if len(list) > 255 {
				return fmt.Errorf("--event-types: %d types, at most 255", len(list))
			}
			if err := needYes(yes, "fdp set-events"); err != nil {
				return err
			}
			t, _, err := openFDP(args[0], nsid)
			if err != nil {
				return err
			}
			defer t.Close()
			et := make([]fdp.EventType, len(list))
			for i, v := range list {
				et[i] = fdp.EventType(v)
			}
			if err := fdp.SetEventEnables(t, nsid, ph, et, enable, save); err != nil {
				return fdpError(args[0], err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "set-events: Success")
			return nil
		},
	}
	cmd.Flags().Uint32VarP(&nsid, "namespace-id", "n", 0, "namespace (0: the device's)")
	cmd.Flags().Uint16VarP(&ph, "placement-handle", "p", 0, "placement handle")
	cmd.Flags().BoolVarP(&enable, "enable", "e", false, "enable the event types (default: disable)")
	cmd.Flags().BoolVarP(&save, "save", "s", false, "save across power cycles (SV)")
	cmd.Flags().StringVarP(&types, "event-types", "t", "", "comma-separated event types, e.g. 0,3 (required)")
	cmd.Flags().BoolVar(&yes, "yes", false, "really change the device")
	_ = cmd.MarkFlagRequired("event-types")
	return cmd
}

func newFDPFeatureCmd() *cobra.Command {
	var endgid uint16
	var cidx uint8
	var disable, verbose, yes bool
	cmd := &cobra.Command{
		Use:   "feature DEV [-c IDX | -d] [--yes]",
		Short: "Show, enable (-c IDX) or disable (-d) FDP in an endurance group (feature 0x1D)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			set := cmd.Flags().Changed("enable-conf-idx") || disable
			if cmd.Flags().Changed("enable-conf-idx") && disable {
				return fmt.Errorf("give either --enable-conf-idx or --disable, not both")
			}
			if set {
				if err := needYes(yes, "enabling or disabling FDP"); err != nil {
					return err
				}
			}
			w := cmd.OutOrStdout()
			return withEndgid(args[0], endgid, func(t nvme.Transport, endgid uint16) error {
				if !set {
					f, err := fdp.GetFeature(t, endgid)
					if err != nil {
						return err
					}
					fmt.Fprintf(w, "Endurance Group                               : %d\n", endgid)
					fmt.Fprintf(w, "Flexible Direct Placement Enable (FDPE)       : %s\n", map[bool]string{true: "Yes", false: "No"}[f.Enabled])
					fmt.Fprintf(w, "Flexible Direct Placement Configuration Index : %d\n", f.ConfigIndex&0xf)
					return nil
				}
				f := fdp.FeatureState{Enabled: !disable, ConfigIndex: cidx}
				if err := fdp.SetFeature(t, endgid, f, true); err != nil {
					return err
				}
				verb := "enabling"
				if disable {
					verb = "disabling"
				}
				fmt.Fprintf(w, "Success %s Endurance Group: %d, FDP configuration index: %d\n", verb, endgid, cidx)
				if verbose {
					fmt.Fprintf(w, "set-feature: FID 0x1d, cdw11 %#x, cdw12 %#x, save 1\n", endgid, f.Value())
				}
				return nil
			})
		},
	}
	cmd.Flags().Uint16VarP(&endgid, "endgrp-id", "e", 0, "endurance group (0: the namespace's)")
	cmd.Flags().Uint8VarP(&cidx, "enable-conf-idx", "c", 0, "enable FDP with this configuration index")
	cmd.Flags().BoolVarP(&disable, "disable", "d", false, "disable FDP")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print the command sent")
	cmd.Flags().BoolVar(&yes, "yes", false, "really change the device")
	return cmd
}
