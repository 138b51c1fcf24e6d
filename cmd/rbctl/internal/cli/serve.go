package cli

import (
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
	"github.com/rbctl/rbctl/p2p"
	"github.com/rbctl/rbctl/p2p/cluster"
	"github.com/rbctl/rbctl/p2p/node"
	"github.com/rbctl/rbctl/placement"
)

func init() { register(newServeCmd) }

func newServeCmd() *cobra.Command {
	var dev rbDevFlags
	var pf rbPlaceFlag
	var listen, dataListen string
	var peers []string
	var replica int
	var asJSON bool
	opts := node.Options{}
	var cl cluster.Config
	var gossip string
	var nf flagsets.Node
	var mf flagsets.Membership
	var tf flagsets.TLS
	var af flagsets.Access
	var rf flagsets.Record
	cmd := &cobra.Command{
		Use:   "serve DEV [DEV...]",
		Short: "Serve a cache (several DEVs: the shards of one) to clients and peers (gRPC control plane, TCP data plane) until interrupted",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := pf.check()
			if err == nil {
				err = nf.Check(&opts)
			}
			if err == nil {
				err = rf.Check(cmd)
			}
			if err != nil {
				return err
			}
			opts.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelInfo}))
			flagsets.HangUp(cmd.Context(), opts.Logger, tf.Reloads)
			for _, a := range args {
				if w := cache.SpaceWarning(a); w != "" {
					opts.Logger.Warn(w)
				}
			}
			if err := tf.Serve(cmd.Context(), &opts, opts.Logger); err != nil {
				return err
			}
			if cl.BindAddr, cl.BindPort, err = cluster.SplitBind(gossip); err != nil {
				return err
			}
			if err := mf.Apply(&cl, &opts, args, opts.Logger); err != nil {
				return err
			}
			if err := af.Apply(&opts, &cl, len(peers) > 0, opts.Logger); err != nil {
				return err
			}
			tf.Announce(cmd.ErrOrStderr())
			if len(peers) > 0 {
				opts.Directory = node.StaticPeers(peers)
			} else if cl.Cluster != "none" {
				opts.JoinDirectory = cluster.JoinFunc(cl, 5*time.Second)
			}
			opts.SeparateReplicas, opts.ReplicaHandle = replica >= 0, placement.Handle(replica)
			dev.Cache = dev.cache.Cache
			e, err := nf.OpenCache(&dev.Device, &pf.Placement, args, node.PlacementHook(&opts))
			if err != nil {
				return err
			}
			rec, err := rf.Start(e, &nf, &opts, Version)
			if err != nil {
				e.CloseNoCheckpoint()
				return err
			}
			defer rec.Close()
			ready := func(p p2p.Peer) {
				if asJSON {
					printJSON(cmd.OutOrStdout(), map[string]any{"device": args[0], "devices": args, "control": p.Control, "data": p.Data, "pid": os.Getpid()})
					return
				}
				cmd.Printf("serving %s: control %s, data %s, pid %d\n", rbEscape(strings.Join(args, " ")), p.Control, p.Data, os.Getpid())
			}
			err = node.Serve(cmd.Context(), e, listen, dataListen, opts, ready)
			if cerr := e.Close(); err == nil { // with its final checkpoint
				err = cerr
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:7470", "HOST:PORT of the gRPC control plane (clients and peers)")
	f.StringVar(&dataListen, "data-listen", "", "HOST:PORT of the data plane (default: the --listen host, any port; peers learn it from each lease)")
	f.StringSliceVar(&peers, "peers", nil, "peers asked on a miss, each HOST:PORT of its control plane or CONTROL/DATA to reach its data plane at DATA (a proxy); every peer is a candidate for every key")
	f.IntVar(&replica, "replica-handle", -1, "placement handle for chunks stored after a peer fetch (-1: the --placement policy decides, like the tenant's own writes)")
	f.DurationVar(&opts.LeaseTTL, "lease", 10*time.Second, "how long a peer keeps our pins if we never unlock (and the longest lease we grant is 60s)")
	f.DurationVar(&opts.LookupTimeout, "peer-timeout", 2*time.Second, "deadline of one peer lookup-and-lock; a timeout is a miss")
	f.DurationVar(&opts.FetchTimeout, "fetch-timeout", 10*time.Second, "deadline of one data-plane transfer; a timeout is a miss")
	f.StringVar(&cl.Cluster, "cluster", "default", "cluster to join when --peers is not given (gossip membership and key digests, p2p/cluster; none: serve alone)")
	f.StringVar(&cl.Name, "node-name", "", "this node's name in the cluster (default: the host name and a random part, kept across restarts in $XDG_STATE_HOME/rbctl/nodes/)")
	f.StringSliceVar(&cl.Seeds, "join", nil, "gossip addresses (HOST:PORT) of members to join; without them nodes on this machine find each other through a registry directory")
	f.StringVar(&gossip, "gossip", "127.0.0.1:0", "HOST:PORT the gossip membership listens on (UDP and TCP; port 0: any)")
	f.BoolVar(&asJSON, "json", false, "print the bound addresses as JSON")
	dev.add(cmd)
	nf.Add(cmd)
	mf.Add(cmd)
	tf.Add(cmd, true)
	af.Add(cmd)
	rf.Add(cmd)
	pf.add(cmd, "the node's writes")
	dev.cache.addNamespace(cmd)
	return cmd
}
