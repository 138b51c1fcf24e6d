package cli

import (
	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
	"github.com/rbctl/rbctl/reports/cachereport"
)

func init() { register(newInspectCmd) }

func newInspectCmd() *cobra.Command {
	var dev flagsets.Device
	var opts cachereport.InspectOptions
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect DEV",
		Short: "Show a raw-block cache's layout, metadata containers, entries and usage (read-only)",
		Long: `inspect opens DEV read-only, detects its layout, key namespace and checkpoint format
from the checkpoint recovery chooses (rbctl compact or LMCache v1 JSON), and shows both
metadata containers with their sequence number (and whether a checksum covers it), CRC,
validity, format and entry count; which checkpoint was chosen and why, and what a
fallback from a newer, damaged one lost; the entry count, usage, free slots and bytes per
cache_salt. Nothing is written to the device.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := dev.Open(args[0], true)
			if err != nil {
				return err
			}
			rep, err := cachereport.Inspect(d, args[0], opts)
			switch {
			case err != nil && rep != nil && !asJSON:
				_ = rep.WriteText(cmd.OutOrStdout()) // the containers and the choice, then the error
				return err
			case err != nil:
				return err
			}
			return show(cmd, asJSON, rep, rep.WriteText)
		},
	}
	cmd.Flags().BoolVar(&opts.Keys, "keys", false, "list the keys")
	cmd.Flags().IntVar(&opts.MaxKeys, "max-keys", 0, "with --keys, list at most this many (0 = all)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&opts.Verify, "verify", false, "also read every slot header and report entries recovery would drop")
	dev.Add(cmd)
	return cmd
}
