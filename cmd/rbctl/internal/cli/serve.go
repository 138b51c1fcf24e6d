package cli

import (
	"log/slog"
	"os"
	"strings"
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
			f.Announce(n)
			p := n.Peer()
			if asJSON {
				printJSON(cmd, map[string]any{"device": args[0], "devices": args, "control": p.Control, "data": p.Data, "pid": os.Getpid()})
			} else {
				cmd.Printf("serving %s: control %s, data %s, pid %d\n", rbEscape(strings.Join(args, " ")), p.Control, p.Data, os.Getpid())
			}
			<-cmd.Context().Done()
			return n.Close() // with the final checkpoint
		},
	}
	f.Add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the bound addresses as JSON")
	return cmd
}
