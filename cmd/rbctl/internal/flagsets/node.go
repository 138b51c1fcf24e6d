package flagsets

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagcheck"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/engine/sharded"
	"github.com/rbctl/rbctl/p2p/cluster"
	"github.com/rbctl/rbctl/p2p/node"
	"github.com/rbctl/rbctl/p2p/resp"
)

// Node is the flags of `rbctl serve` that shape the node's cache: how it checkpoints, how
// it evicts, how several devices are routed.
type Node struct {
	CheckpointInterval time.Duration
	Eviction           string
	Admission          string
	ShardBy            string
	AllowMisrouted     bool
	MetricsListen      string
	RESP               string // HOST:PORT of the Redis-protocol front-end ("": none)
	RESPConns          resp.ConnLimits
	RESPMemory         int64
	RegionBytes        int64

	cmd  *cobra.Command
	opts *node.Options // what Check filled; OpenCache adds the region size in slots
}

// Add defines --checkpoint-interval, --eviction, --admission, --shard-by, --metrics-listen and
// --allow-misrouted.
func (f *Node) Add(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.DurationVar(&f.CheckpointInterval, "checkpoint-interval", 10*time.Second,
		"checkpoint the index this often while it changes (idle or not): a put acknowledged more than twice this (plus one checkpoint's duration) before a crash survives it")
	fs.StringVar(&f.Eviction, "eviction", "lru", "what a full cache drops to store a put or a replica: lru (least recently stored, hit or leased), fifo, region (whole regions of one cache_salt's consecutive stores, least recent first) or none (refuse the write); leased keys are never dropped")
	fs.StringVar(&f.Admission, "admission", "all", "which writes of chunks the node does not hold (puts, replicas) are stored: all, second-hit[:W] (a chunk's second write within W misses) or tinylfu[:W] (asked for more often than what eviction would drop); a declined put is answered as declined, RESP SET as OK, and a later get misses (docs/p2p.md)")
	flagcheck.SizeVar(fs, &f.RegionBytes, "region", "", "region size for --eviction region (default 16 MiB; give the device's reclaim unit size)")
	fs.StringVar(&f.ShardBy, "shard-by", "hash", "with several DEVs, route a key by: hash (of the key) or kv-rank (device kv_rank mod N)")
	fs.StringVar(&f.MetricsListen, "metrics-listen", "", "HOST:PORT to serve Prometheus metrics at /metrics (the remote stats counters, checkpoint age, latency histograms); empty: none")
	fs.StringVar(&f.RESP, "resp", "", "HOST:PORT of a Redis-protocol (RESP2) front-end for LMCache's resp L2 adapter, redis-cli and redis-py: GET/SET/EXISTS/DEL/MGET/MSET/SCAN/INFO... on the same cache; a key in LMCache's native spelling is the raw-block key's entry, any other a generic one (docs/resp.md); empty: none")
	fs.DurationVar(&f.RESPConns.Idle, "resp-idle-timeout", 0, "close a RESP connection that authenticated (any, without --auth-file) after this long without a request; 0: never, as valkey's default (LMCache's client never reconnects; TCP keepalive finds dead peers)")
	fs.IntVar(&f.RESPConns.MaxConns, "resp-max-conns", 1024, "RESP connections open at once; more are closed at accept (with --auth-file an eighth is kept for clients that authenticated)")
	fs.IntVar(&f.RESPConns.PerAddr, "resp-conns-per-addr", 128, "RESP connections one IP address may hold before they authenticate (without --auth-file: in all); more are closed at accept")
	flagcheck.SizeVar(fs, &f.RESPMemory, "resp-memory", "256M", "request bytes all RESP connections may hold at once; a connection that needs more is not read until others finish (back-pressure); at least 4 requests' bound (docs/resp.md)")
	f.cmd = cmd
	fs.BoolVar(&f.AllowMisrouted, "allow-misrouted", false, "serve devices whose keys the route sends elsewhere (one shard of a larger cache alone, or devices out of format order)")
}

// Check validates the flags and sets opts' eviction.
func (f *Node) Check(opts *node.Options) error {
	if f.CheckpointInterval <= 0 { // the CLI's contract refuses it first; a library caller may not
		return fmt.Errorf("--checkpoint-interval %v: must be positive", f.CheckpointInterval)
	}
	ev, err := node.ParseEviction(f.Eviction)
	if err != nil {
		return fmt.Errorf("--eviction: %w", err)
	}
	if err := node.CheckAdmission(f.Admission); err != nil {
		return fmt.Errorf("--admission: %w", err)
	}
	if _, err := sharded.ParseRoute(f.ShardBy); err != nil {
		return fmt.Errorf("--shard-by: %w", err)
	}
	if f.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(f.MetricsListen); err != nil {
			return fmt.Errorf("--metrics-listen %q: want HOST:PORT", f.MetricsListen)
		}
	}
	if f.RegionBytes != 0 && ev != node.EvictRegion {
		return fmt.Errorf("--region is for --eviction region, not %s", f.Eviction)
	}
	if f.RESP != "" {
		if _, _, err := net.SplitHostPort(f.RESP); err != nil {
			return fmt.Errorf("--resp %q: want HOST:PORT", f.RESP)
		}
		opts.FrontEnds = append(opts.FrontEnds, resp.FrontEnd(resp.FrontEndOptions{Listen: f.RESP, Version: "rbctl",
			Conns: f.RESPConns, Memory: f.RESPMemory,
			Ready: func(addr string) { fmt.Fprintf(f.cmd.ErrOrStderr(), "RESP (Redis protocol) on %s\n", addr) }}))
	}
	opts.Eviction, opts.MetricsListen, opts.Admission = ev, f.MetricsListen, f.Admission
	f.opts = opts
	return nil
}

// Durable is the engine-config tweak of a node: periodic checkpoints every interval,
// forced (idle or not) once the oldest unsaved change is one interval old, so an
// acknowledged write is in a checkpoint at most 2 intervals + one checkpoint after it.
func (f *Node) Durable(cfg *engine.Config) {
	cfg.Periodic = true
	cfg.CheckpointInterval = f.CheckpointInterval
	cfg.ForceAfter = f.CheckpointInterval
	cfg.IdleQuiet = min(cfg.IdleQuiet, f.CheckpointInterval/2)
}

// OpenCache opens the devices of one cache (one engine each, through d.OpenEngine with pf's
// policy and tweak, then f.Durable) as a sharded cache routed by --shard-by, and refuses
// devices whose keys belong elsewhere (sharded.Cache.CheckRoutes) unless --allow-misrouted.
func (f *Node) OpenCache(d *Device, pf *Placement, paths []string, tweak func(*engine.Config)) (*sharded.Cache, error) {
	route, _ := sharded.ParseRoute(f.ShardBy)
	engs := make([]*engine.Engine, 0, len(paths))
	fail := func(err error) (*sharded.Cache, error) {
		for _, e := range engs {
			e.CloseNoCheckpoint()
		}
		return nil, err
	}
	seen := map[string]bool{}
	for _, p := range paths {
		if seen[p] {
			return fail(fmt.Errorf("%s is given twice", p))
		}
		seen[p] = true
		e, err := d.OpenEngine(pf, p, false, func(cfg *engine.Config) {
			if tweak != nil {
				tweak(cfg)
			}
			f.Durable(cfg)
		})
		if err != nil {
			return fail(err)
		}
		engs = append(engs, e)
	}
	c, err := sharded.New(engs, sharded.Options{Route: route})
	if err != nil {
		return fail(err)
	}
	if !f.AllowMisrouted {
		if err := c.CheckRoutes(); err != nil {
			if errors.Is(err, sharded.ErrMisrouted) {
				err = fmt.Errorf("%w (--allow-misrouted serves it anyway)", err)
			}
			return fail(err)
		}
	}
	if f.opts != nil && f.opts.Eviction == node.EvictRegion {
		region := f.RegionBytes
		if region == 0 {
			region = 16 << 20
		}
		slot := engs[0].Config().SlotBytes
		if f.opts.RegionSlots = int(region / slot); f.opts.RegionSlots < 1 {
			return fail(fmt.Errorf("--region %d: below one slot of %d bytes", region, slot))
		}
	}
	return c, nil
}

// Membership is the flags that say how a node shows itself to the cluster: --advertise.
type Membership struct {
	Advertise string
}

// Add defines --advertise.
func (f *Membership) Add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.Advertise, "advertise", "", "HOST:PORT peers dial for the control plane (data plane: the same host); default the --listen address, or the outbound interface's address when listening on 0.0.0.0 or ::")
}

// Apply checks --advertise and fills what the cluster member announces: the node's
// advertised address, the gossip address others use when gossip listens on every
// address, a default node name kept across restarts (cluster.PersistentName, in the state
// directory, one per device list), and the log of membership events.
func (f *Membership) Apply(cl *cluster.Config, opts *node.Options, devs []string, log *slog.Logger) error {
	if f.Advertise != "" {
		h, p, err := net.SplitHostPort(f.Advertise)
		if err != nil || h == "" || p == "0" {
			return fmt.Errorf("--advertise %q: want HOST:PORT with a host and a port", f.Advertise)
		}
		if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
			return fmt.Errorf("--advertise %q: %s is no address a peer can dial", f.Advertise, h)
		}
	}
	opts.Advertise = f.Advertise
	cl.Events = log
	if ip := net.ParseIP(cl.BindAddr); ip != nil && ip.IsUnspecified() && cl.AdvertiseAddr == "" {
		host, _, _ := net.SplitHostPort(node.Dialable(net.JoinHostPort(cl.BindAddr, "0")))
		if f.Advertise != "" {
			h, _, _ := net.SplitHostPort(f.Advertise)
			if ips, err := net.LookupIP(h); err == nil && len(ips) > 0 {
				host = ips[0].String()
			}
		}
		cl.AdvertiseAddr = host
	}
	if cl.Name == "" {
		name, err := cluster.PersistentName(nameFile(devs), hostname())
		if err != nil {
			log.Warn("node name not kept across restarts", "name", name, "err", err)
		}
		cl.Name = name
	}
	opts.Name = cl.Name
	return nil
}

// nameFile is where the node name of a device list is kept: $XDG_STATE_HOME/rbctl/nodes/
// (else ~/.local/state/..., else /var/lib/rbctl/nodes/), one file per list of absolute paths.
func nameFile(devs []string) string {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		if home, err := os.UserHomeDir(); err == nil {
			dir = filepath.Join(home, ".local", "state")
		} else {
			dir = "/var/lib"
		}
	}
	h := sha256.New()
	for _, d := range devs {
		abs, _ := filepath.Abs(d)
		h.Write([]byte(abs + "\x00"))
	}
	return filepath.Join(dir, "rbctl", "nodes", hex.EncodeToString(h.Sum(nil))[:16])
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}
