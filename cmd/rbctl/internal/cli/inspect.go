package cli

import (
	"fmt"
	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagcheck"
	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
)

func init() { register(newInspectCmd) }

func newInspectCmd() *cobra.Command {
	var dev flagsets.Device
	var opts cache.InspectOptions
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect DEV [DEV...]",
		Short: "Show a raw-block cache's layout, metadata containers, entries and usage (read-only)",
		Long: `inspect opens DEV read-only, detects its layout, key namespace and checkpoint format
from the checkpoint recovery chooses (rbctl compact or LMCache v1 JSON), and shows both
metadata containers with their sequence number (and whether a checksum covers it), CRC,
validity, format and entry count; which checkpoint was chosen and why, and what a
fallback from a newer, damaged one lost; the entry count, usage, free slots and bytes per
cache_salt. Nothing is written to the device. Several DEVs (the shards of one cache) are
inspected in parallel, each as one, then a row each and a total; a device that cannot be read
gets an error row and the exit status 1 (3 when every such device is missing).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.MaxKeys != 0 && !opts.Keys {
				return fmt.Errorf("--max-keys %d limits --list-keys: give --list-keys too", opts.MaxKeys)
			}
			rep, err := cache.InspectAll(args, func(p string) (blockdev.Device, error) { return dev.Open(p, true) }, opts)
			if v := rep.Output(asJSON); v != nil { // for one device: the containers and the choice, then the error
				if perr := show(cmd, asJSON, v, rep.WriteText); perr != nil {
					return perr
				}
			}
			return err
		},
	}
	flagcheck.Alias(cmd.Flags(), "keys", "list-keys") // its name until issue 25; --keys is a key space elsewhere
	cmd.Flags().BoolVar(&opts.Keys, "list-keys", false, "list the keys")
	cmd.Flags().IntVar(&opts.MaxKeys, "max-keys", 0, "with --list-keys, list at most this many (0 = all)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&opts.Verify, "verify", false, "also read every slot header and report entries recovery would drop")
	dev.Add(cmd)
	return cmd
}
