package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/p2p/clusterbench"
	"github.com/rbctl/rbctl/units"
)

func init() { register(newClusterBenchCmd) }

func newClusterBenchCmd() *cobra.Command {
	o := clusterbench.Defaults()
	var modes []string
	var chunk, devSize, ru string
	var asJSON bool
	var directory string
	cmd := &cobra.Command{
		Use:   "cluster-bench",
		Short: "Measure cache sharing between peers: N nodes on emulated FDP SSDs, shared prefixes, P2P off vs on",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch directory {
			case "static", "gossip":
				o.Gossip = directory == "gossip"
			default:
				return fmt.Errorf("directory %q is not static or gossip", directory)
			}
			o.Modes = o.Modes[:0]
			for _, m := range modes {
				mode, err := clusterbench.ParseMode(m)
				if err != nil {
					return err
				}
				o.Modes = append(o.Modes, mode)
			}
			for _, s := range []struct {
				v   string
				dst *int64
			}{{devSize, &o.DeviceBytes}, {ru, &o.RUBytes}} {
				n, err := units.ParseSize(s.v)
				if err != nil {
					return err
				}
				*s.dst = n
			}
			n, err := units.ParseSize(chunk)
			if err != nil {
				return err
			}
			o.ChunkBytes = int(n)
			if o.Dir == "" {
				o.Dir = os.TempDir()
			}
			rs, err := clusterbench.Run(cmd.Context(), o)
			if cmd.Context().Err() != nil {
				err = errInterrupted
			}
			if asJSON {
				printJSON(cmd.OutOrStdout(), map[string]any{"waf_source": clusterbench.WAFSource, "results": rs})
			} else if werr := clusterbench.WriteText(cmd.OutOrStdout(), rs); err == nil {
				err = werr
			}
			return err
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Nodes, "nodes", o.Nodes, "cache nodes, each an engine on its own emulated FDP SSD, on loopback")
	f.IntVar(&o.Requests, "requests", o.Requests, "requests in all, spread round-robin over the nodes")
	f.IntVar(&o.Tenants, "tenants", o.Tenants, "tenants (cache_salt values), each with its own shared prefix")
	f.IntVar(&o.PrefixChunks, "prefix-chunks", o.PrefixChunks, "chunks of each tenant's shared prefix (system prompt, RAG document)")
	f.IntVar(&o.UniqueChunks, "unique-chunks", o.UniqueChunks, "chunks unique to each request")
	f.StringVar(&chunk, "chunk-size", "256K", "payload bytes of one KV chunk (a multiple of 4K)")
	f.StringVar(&devSize, "device-size", "256M", "emulated SSD size per node")
	f.StringVar(&ru, "ru", "4M", "reclaim unit size of the emulated SSDs")
	f.IntVar(&o.Handles, "handles", o.Handles, "placement handles (RUHs) per emulated SSD")
	f.Float64Var(&o.OP, "op", o.OP, "over-provisioning of the emulated SSDs")
	f.StringVar(&o.Policy, "placement", o.Policy, "placement policy of every node (as bench --placement)")
	f.StringSliceVar(&modes, "modes", []string{"off", "shared", "shared-replica-handle", "fetch-only"}, "modes to run, each on fresh devices: off, shared, shared-replica-handle, fetch-only")
	f.StringVar(&directory, "directory", "static", "how a node finds the peer holding a key: static (every peer is asked) or gossip (memberlist and Bloom digests, p2p/cluster)")
	f.DurationVar(&o.Interval, "interval", 0, "pause between requests (0: back to back)")
	f.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the tenant choice")
	f.StringVar(&o.Dir, "dir", "", "directory for the device images, removed after each mode (default: the system temp dir)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
