package flagsets

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagcheck"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/engine/sharded"
	"github.com/rbctl/rbctl/p2p/cluster"
	"github.com/rbctl/rbctl/p2p/node"
	"github.com/rbctl/rbctl/placement"
	"github.com/rbctl/rbctl/workloads/l2trace"
)

// Node is the flags of `rbctl serve`, bound to a node.Config: the flags only name the
// config's fields, and node.Start checks them (Explain spells its refusals with the flags).
type Node struct {
	Device     Device
	Placement  Placement
	TLS        TLS
	cfg        node.Config
	resp       node.RESPConfig
	record     l2trace.Options
	eviction   string
	deallocate string
	shardBy    string
	gossip     string
	replica    int
	cmd        *cobra.Command
}

// nodeFlags names the flag that sets each node.Config field (ConfigError's {Field}).
var nodeFlags = map[string]string{
	"Devices": "DEV", "CheckpointInterval": "--checkpoint-interval", "Eviction": "--eviction",
	"Admission": "--admission", "RegionBytes": "--region", "Deallocate": "--deallocate", "MetricsListen": "--metrics-listen",
	"Listen": "--listen", "DataListen": "--data-listen", "RESP.Listen": "--resp",
	"Record.Path": "--record", "Record.MaxBytes": "--record-max-bytes", "Record.MaxFiles": "--record-files",
	"TLSFiles.Cert": "--tls-cert", "TLSFiles.Key": "--tls-key", "TLSFiles.CA": "--tls-ca",
	"Advertise": "--advertise", "Limits.MaxLeases": "--max-leases", "Limits.MaxLeasesPerClient": "--max-leases-per-client",
	"GossipKeyFile": "--gossip-key-file", "Peers": "--peers", "Cluster.Cluster": "--cluster", "Cluster.Seeds": "--join",
	"AuthFile": "--auth-file", "PeerTokenFile": "--peer-token-file", "AllowMisrouted": "--allow-misrouted",
}

// Add defines serve's flags on cmd.
func (f *Node) Add(cmd *cobra.Command) {
	f.cmd = cmd
	c := &f.cfg
	fs := cmd.Flags()
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:7470", "HOST:PORT of the gRPC control plane (clients and peers)")
	fs.StringVar(&c.DataListen, "data-listen", "", "HOST:PORT of the data plane (default: the --listen host, any port; peers learn it from each lease)")
	fs.StringSliceVar(&c.Peers, "peers", nil, "peers asked on a miss, each HOST:PORT of its control plane or CONTROL/DATA to reach its data plane at DATA (a proxy); every peer is a candidate for every key")
	fs.IntVar(&f.replica, "replica-handle", -1, "placement handle for chunks stored after a peer fetch (-1: the --placement policy decides, like the tenant's own writes)")
	fs.DurationVar(&c.LeaseTTL, "lease", 10*time.Second, "how long a peer keeps our pins if we never unlock (and the longest lease we grant is 60s)")
	fs.DurationVar(&c.LookupTimeout, "peer-timeout", 2*time.Second, "deadline of one peer lookup-and-lock; a timeout is a miss")
	fs.DurationVar(&c.FetchTimeout, "fetch-timeout", 10*time.Second, "deadline of one data-plane transfer; a timeout is a miss")
	fs.StringVar(&c.Cluster.Cluster, "cluster", "", "cluster to join when --peers is not given (gossip membership and key digests, p2p/cluster); empty: serve alone unless --join names members (then \"default\"); none: alone")
	fs.StringVar(&c.Cluster.Name, "node-name", "", "this node's name in the cluster (default: the host name and a random part, kept across restarts in $XDG_STATE_HOME/rbctl/nodes/)")
	fs.StringSliceVar(&c.Cluster.Seeds, "join", nil, "gossip addresses (HOST:PORT) of members to join; without them nodes on this machine find each other through a registry directory")
	fs.StringVar(&f.gossip, "gossip", "127.0.0.1:0", "HOST:PORT the gossip membership listens on (UDP and TCP; port 0: any)")
	fs.StringVar(&c.Advertise, "advertise", "", "HOST:PORT peers dial for the control plane (data plane: the same host); default the --listen address, or the outbound interface's address when listening on 0.0.0.0 or ::")

	fs.DurationVar(&c.CheckpointInterval, "checkpoint-interval", 10*time.Second,
		"checkpoint the index this often while it changes (idle or not): a put acknowledged more than twice this (plus one checkpoint's duration) before a crash survives it")
	fs.StringVar(&f.eviction, "eviction", "lru", "what a full cache drops to store a put or a replica: lru (least recently stored, hit or leased), fifo, region (whole regions of one cache_salt's consecutive stores, least recent first) or none (refuse the write); leased keys are never dropped")
	fs.StringVar(&c.Admission, "admission", "all", "which writes of chunks the node does not hold (puts, replicas) are stored: all, second-hit[:W] (a chunk's second write within W misses) or tinylfu[:W] (asked for more often than what eviction would drop); a declined put is answered as declined, RESP SET as OK, and a later get misses (docs/p2p.md)")
	flagcheck.SizeVar(fs, &c.RegionBytes, "region", "", "region size for --eviction region (default 16 MiB; give the device's reclaim unit size)")
	fs.StringVar(&f.deallocate, "deallocate", "devices", "which devices deallocate the slots deletes and evictions free, before they are written again: devices (NVMe DSM deallocate, BLKDISCARD, the emulator's; not regular files), all (files too: a punched hole, which the filesystem pays for again when the slot is rewritten) or none (docs/p2p.md)")
	fs.StringVar(&f.shardBy, "shard-by", "hash", "with several DEVs, route a key by: hash (of the key) or kv-rank (device kv_rank mod N)")
	fs.StringVar(&c.MetricsListen, "metrics-listen", "", "HOST:PORT to serve Prometheus metrics at /metrics (the remote stats counters, checkpoint age, latency histograms); empty: none")
	fs.BoolVar(&c.AllowMisrouted, "allow-misrouted", false, "serve devices whose keys the route sends elsewhere (one shard of a larger cache alone, or devices out of format order)")

	fs.StringVar(&f.resp.Listen, "resp", "", "HOST:PORT of a Redis-protocol (RESP2) front-end for LMCache's resp L2 adapter, redis-cli and redis-py: GET/SET/EXISTS/DEL/MGET/MSET/SCAN/INFO... on the same cache; a key in LMCache's native spelling is the raw-block key's entry, any other a generic one (docs/resp.md); empty: none")
	fs.DurationVar(&f.resp.Conns.Idle, "resp-idle-timeout", 0, "close a RESP connection that authenticated (any, without --auth-file) after this long without a request; 0: never, as valkey's default (LMCache's client never reconnects; TCP keepalive finds dead peers)")
	fs.IntVar(&f.resp.Conns.MaxConns, "resp-max-conns", 1024, "RESP connections open at once; more are closed at accept (with --auth-file an eighth is kept for clients that authenticated)")
	fs.IntVar(&f.resp.Conns.PerAddr, "resp-conns-per-addr", 128, "RESP connections one IP address may hold before they authenticate (without --auth-file: in all); more are closed at accept")
	flagcheck.SizeVar(fs, &f.resp.Memory, "resp-memory", "256M", "request bytes all RESP connections may hold at once; a connection that needs more is not read until others finish (back-pressure); at least 4 requests' bound (docs/resp.md)")

	fs.StringVar(&c.AuthFile, "auth-file", "", "token file: every gRPC call and RESP connection must present one of its tokens and stays within its rights and cache_salt scopes (docs/p2p.md); empty: no tokens checked (trusted network only)")
	fs.StringVar(&c.PeerTokenFile, "peer-token-file", "", "file holding the token this node presents to its peers (a token with the peer right in their --auth-file); empty: $RBCTL_PEER_TOKEN, else none")
	fs.StringVar(&c.GossipKeyFile, "gossip-key-file", "", "gossip encryption keys, one base64 key (16, 24 or 32 bytes) a line, the first used to send, all accepted (rotation); make one with: head -c32 /dev/urandom | base64")
	fs.IntVar(&c.Limits.MaxLeases, "max-leases", 16384, "leases this node grants at once, all clients together; more are misses for the requester (counted as leases_refused)")
	fs.IntVar(&c.Limits.MaxLeasesPerClient, "max-leases-per-client", 1024, "leases one client holds at once (a client: its token's name, else its address)")

	fs.StringVar(&f.record.Path, "record", "", "record every chunk operation the node answers (RESP and gRPC get, set, exists, delete; peer fetches) to this file as JSON lines, without payload bytes (docs/record.md); replay it with --workload l2trace:FILE; empty: none")
	fs.BoolVar(&f.record.Redact, "record-redact", false, "with --record: write tenants (cache_salt), models and client addresses as keyed BLAKE2b hashes")
	flagcheck.SizeVar(fs, &f.record.MaxBytes, "record-max-bytes", "256M", "with --record: start a new file (FILE.1, FILE.2, ...) once one reaches this size")
	fs.IntVar(&f.record.MaxFiles, "record-files", 0, "with --record: keep at most this many files, deleting the oldest (0: all)")

	// A node's reads are single GETs and peer fetches from many connections at once: on a
	// regular file they ran faster through native AIO than through io_uring (docs/resp.md).
	f.Device.AutoFile = devices.PathAio
	f.Device.Add(cmd)
	f.Device.Choices.AddNamespace(cmd)
	f.Placement.Add(cmd, "the node's writes")
	f.TLS.Add(cmd, true)
}

// Config is the node.Config the flags give for the devices devs. Only what a flag's syntax
// or a pairing of flags decides is refused here; node.Config.Check checks the rest.
func (f *Node) Config(devs []string, log *slog.Logger, version string) (node.Config, error) {
	c := f.cfg
	c.Devices, c.Logger, c.Version, c.TLSFiles = devs, log, version, f.TLS.Files
	if c.CheckpointInterval <= 0 { // the CLI's contract refuses it first
		return c, fmt.Errorf("--checkpoint-interval %v: must be positive", c.CheckpointInterval)
	}
	c.Eviction = node.Eviction(f.eviction)
	c.Deallocate = node.Deallocation(f.deallocate)
	route, err := sharded.ParseRoute(f.shardBy)
	if err != nil {
		return c, fmt.Errorf("--shard-by: %w", err)
	}
	c.ShardBy = route
	if f.resp.Listen != "" {
		r := f.resp
		c.RESP = &r
	}
	if f.record.Path == "" {
		for _, n := range []string{"record-redact", "record-max-bytes", "record-files"} {
			if f.cmd.Flags().Changed(n) {
				return c, fmt.Errorf("--%s needs --record FILE", n)
			}
		}
	} else {
		r := f.record
		c.Record = &r
	}
	if err := f.Placement.Check(); err != nil {
		return c, err
	}
	if c.Open, err = f.Device.OpenOptions(&f.Placement, false); err != nil {
		return c, err
	}
	c.SeparateReplicas, c.ReplicaHandle = f.replica >= 0, placement.Handle(f.replica)
	if c.Cluster.BindAddr, c.Cluster.BindPort, err = cluster.SplitBind(f.gossip); err != nil {
		return c, err
	}
	alone := c.Cluster.Cluster == "none" || (c.Cluster.Cluster == "" && len(c.Cluster.Seeds) == 0)
	if f.cmd.Flags().Changed("gossip") && (alone || len(c.Peers) > 0) {
		return c, fmt.Errorf("--gossip %s is where cluster membership listens, and this node joins no cluster (--peers, or no --cluster NAME nor --join): give --cluster NAME or --join HOST:PORT, or drop --gossip", f.gossip)
	}
	if c.PeerTokenFile == "" {
		c.PeerToken = os.Getenv("RBCTL_PEER_TOKEN")
	}
	return c, nil
}

// Warn logs, for a config that passed Check, what an operator should know before the node
// starts: that it serves alone, where its peer token comes from, and that it is plain TCP.
func (f *Node) Warn(c node.Config, log *slog.Logger) {
	alone := c.Cluster.Cluster == "none" || (c.Cluster.Cluster == "" && len(c.Cluster.Seeds) == 0)
	if len(c.Peers) == 0 && alone {
		log.Info("serving alone: no cluster joined; --cluster NAME, --join or --peers share a cache with other nodes")
	}
	switch {
	case c.PeerTokenFile == "" && c.PeerToken == "" && c.AuthFile != "" && (len(c.Peers) > 0 || c.Cluster.Cluster != "none"):
		log.Warn("no --peer-token-file: peers that check tokens will refuse this node's lookups (misses)")
	case c.PeerTokenFile != "":
		log.Info("peer token", "from", c.PeerTokenFile)
	case c.PeerToken != "":
		log.Info("peer token", "from", "$RBCTL_PEER_TOKEN")
	}
	if f.TLS.Files.Empty() {
		log.Warn("serve: plain TCP: no --tls-cert/--tls-key/--tls-ca given; anyone who can reach the control and data ports can read, write and delete keys")
	}
}

// Explain spells what node.Start refused with serve's flags (other errors pass unchanged:
// package hints adds what gets past them).
func (f *Node) Explain(err error) error {
	var ce *node.ConfigError
	if errors.As(err, &ce) {
		msg := ce.Render(func(field string) string {
			if fl, ok := nodeFlags[field]; ok {
				return fl
			}
			return field
		})
		if inner := errors.Unwrap(ce); inner != nil {
			return &explained{msg, inner}
		}
		return errors.New(msg)
	}
	return err
}

// explained is a refusal spelt with flags that still wraps its cause (errors.Is).
type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }

// Announce writes serve's result once the node serves, to stdout (docs/cli.md, "Logs"):
// where its control and data planes listen and its pid, then where its RESP front end and
// its /metrics listen when it has them; with asJSON one document with the same addresses
// (resp and metrics only when set).
func (f *Node) Announce(n *node.Node, devs []string, asJSON bool, escape func(string) string) error {
	p := n.Peer()
	w := f.cmd.OutOrStdout()
	if asJSON {
		doc := map[string]any{"device": devs[0], "devices": devs, "control": p.Control, "data": p.Data, "pid": os.Getpid()}
		if a := n.RESPAddr(); a != "" {
			doc["resp"] = a
		}
		if a := n.MetricsAddr(); a != "" {
			doc["metrics"] = a
		}
		return Document(w, SchemaOf(f.cmd.CommandPath()), "keys", doc)
	}
	if _, err := fmt.Fprintf(w, "serving %s: control %s, data %s, pid %d\n", escape(strings.Join(devs, " ")), p.Control, p.Data, os.Getpid()); err != nil {
		return err
	}
	if a := n.RESPAddr(); a != "" {
		fmt.Fprintf(w, "RESP (Redis protocol) on %s\n", a)
	}
	if a := n.MetricsAddr(); a != "" {
		fmt.Fprintf(w, "metrics on http://%s/metrics\n", a)
	}
	return nil
}

// ReleaseStartMemory hands the garbage of n's start back to the OS while n serves:
// recovery's (both checkpoints read whole, keys spelled while indexing: 600 MB at 4M
// entries) at once, the eviction order's seeding walk once it is done. The runtime would
// keep those pages until the heap grew back to them (a 4M-entry serve --eviction none: 1.02
// GB resident instead of 0.41 GB).
func ReleaseStartMemory(n *node.Node) {
	debug.FreeOSMemory()
	n.WaitSeeded()
	debug.FreeOSMemory()
}
