package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
	"github.com/rbctl/rbctl/devices"
)

func init() { register(newFDPStatusCmd) }

func newFDPStatusCmd() *cobra.Command {
	var asJSON bool
	var watch time.Duration
	var count, nevents int
	cmd := &cobra.Command{
		Use:   "fdp-status DEV",
		Short: "Everything FDP about a device on one screen: configuration, RUH usage and status, statistics and WAF, events",
		Long: `fdp-status reads Identify, the FDP feature, the four FDP log pages and the RUH status
of DEV (/dev/ngXnY, /dev/nvmeXnY, /dev/nvmeX or an emu: spec) and prints them on one screen.
WAF = MBMW/HBMW. With --watch it refreshes and also shows the WAF over each interval.
It only reads: nothing it sends changes the device. A device without FDP gets
"FDP not supported" and exit status 2; a device with FDP supported but disabled gets its
screen (the configurations it could enable) and exit status 2.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if count > 0 && watch <= 0 {
				return fmt.Errorf("--count %d counts --watch refreshes: give --watch DUR too, or drop --count", count)
			}
			a, err := openFDP(args[0], 0)
			if err != nil {
				return err
			}
			defer a.Close()
			return runFDPStatus(cmd.Context(), cmd.OutOrStdout(), a, args[0], asJSON, watch, count, nevents)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (nvme-cli field names inside)")
	cmd.Flags().DurationVar(&watch, "watch", 0, "refresh every DUR (e.g. 2s) until interrupted, with the WAF over each interval (with --json: one JSON document a line)")
	cmd.Flags().IntVar(&count, "count", 0, "with --watch: stop after this many refreshes (0: until interrupted)")
	cmd.Flags().IntVar(&nevents, "events", 5, "latest events to show from each events log")
	return cmd
}

// runFDPStatus prints the status of a once, or every watch until ctx ends or count screens.
func runFDPStatus(ctx context.Context, w io.Writer, a *devices.Admin, dev string, asJSON bool, watch time.Duration, count, nevents int) error {
	clear := watch > 0 && !asJSON && isTerminal(w)
	enabled := false
	err := devices.WatchFDPStatus(ctx, a.Transport, dev, nevents, watch, count, func(i int, s *devices.FDPStatus) error {
		enabled = s.Enabled
		switch {
		case asJSON && watch > 0: // JSON Lines: one whole document a line, each parseable alone
			enc := json.NewEncoder(w)
			enc.SetEscapeHTML(false)
			return enc.Encode(s)
		case asJSON:
			return flagsets.WriteJSON(w, s)
		case clear:
			fmt.Fprint(w, "\033[H\033[2J")
		case i > 0:
			fmt.Fprintln(w)
		}
		return writeSections(w, s.Sections())
	})
	if err == nil && !enabled && ctx.Err() == nil {
		err = devices.ErrFDPDisabled // the screen is printed; the exit status says so (2)
	}
	return fdpError(dev, err)
}
