package cli

import (
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
	"github.com/rbctl/rbctl/reports/cachereport"
)

func init() { register(newLsCmd) }

func newLsCmd() *cobra.Command {
	var dev flagsets.Device
	var asJSON bool
	var salt string
	cmd := &cobra.Command{
		Use:   "ls DEV",
		Short: "List the keys in the cache",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := dev.OpenEngine(nil, args[0], true, nil)
			if err != nil {
				return err
			}
			defer e.Close()
			if n := len(e.Stats().Recovery.Dropped); n > 0 {
				slog.Warn("keys the checkpoint lists are left out: their slots do not verify (rbctl inspect --verify lists them, rbctl recover drops them for good)", "dropped", n)
			}
			keys := cache.Keys(e, salt)
			return show(cmd, asJSON, keys, func(w io.Writer) error { return cachereport.WriteKeys(w, keys) })
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&salt, "salt", "", "only keys with this cache_salt")
	dev.Add(cmd)
	return cmd
}
