package cli

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
	"github.com/rbctl/rbctl/p2p/clusterbench"
)

func init() { register(newClusterBenchCmd) }

func newClusterBenchCmd() *cobra.Command {
	var f flagsets.ClusterBench
	cmd := &cobra.Command{
		Use:   "cluster-bench",
		Short: "Measure cache sharing between peers: N nodes on emulated FDP SSDs, shared prefixes, P2P off vs on",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := f.Options()
			if err != nil {
				return err
			}
			finish := flagsets.ClusterProgress(&o)
			rs, err := clusterbench.Run(cmd.Context(), o)
			finish()
			if cmd.Context().Err() != nil {
				err = errInterrupted
			}
			if err != nil && len(rs) == 0 && !errors.Is(err, errInterrupted) {
				return err // refused before a mode ran (the options, the first mode's setup): no legend, no empty table
			}
			if f.JSON {
				printJSON(cmd, map[string]any{"waf_source": clusterbench.WAFSource, "results": rs})
			} else if werr := clusterbench.WriteText(cmd.OutOrStdout(), rs); err == nil {
				err = werr
			}
			return err
		},
	}
	f.Register(cmd.Flags())
	return cmd
}
