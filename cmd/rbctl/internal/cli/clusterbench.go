package cli

import (
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
