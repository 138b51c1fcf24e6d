package cli

import (
	"log/slog"
	"sync/atomic"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
	"github.com/rbctl/rbctl/p2p/node"
)

func init() { register(newServeCmd) }

// newServeCmd binds serve's flags to a node.Config (flagsets.Node), starts the node, says
// where it serves, and closes it on SIGINT or SIGTERM; SIGHUP reloads its certificates.
func newServeCmd() *cobra.Command {
	var f flagsets.Node
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "serve DEV [DEV...]",
		Short: "Serve a cache (several DEVs: the shards of one) to clients and peers (gRPC control plane, TCP data plane) until interrupted",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			log := slog.Default() // --log-format, --log-level (root.go)
			var started atomic.Pointer[node.Node]
			flagsets.HangUp(cmd.Context(), log, func() string {
				if n := started.Load(); n != nil {
					n.ReloadTLS()
				}
				return f.TLS.Reloads()
			})
			cfg, err := f.Config(args, log, Version)
			if err == nil {
				err = cfg.Check()
			}
			if err != nil {
				return f.Explain(err)
			}
			f.Warn(cfg, log)
			n, err := node.Start(cmd.Context(), cfg)
			if err != nil {
				return f.Explain(err)
			}
			started.Store(n)
			go flagsets.ReleaseStartMemory(n)
			if err := f.Announce(n, args, asJSON, rbEscape); err != nil {
				n.Close()
				return err
			}
			<-cmd.Context().Done()
			return n.Close() // with the final checkpoint
		},
	}
	f.Add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the bound addresses as JSON")
	return cmd
}
