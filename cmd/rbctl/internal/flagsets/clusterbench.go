package flagsets

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rbctl/rbctl/p2p/clusterbench"
	"github.com/rbctl/rbctl/p2p/node"
	"github.com/rbctl/rbctl/placement"
	"github.com/rbctl/rbctl/units"
	"github.com/rbctl/rbctl/workloads"
)

// ClusterBench is rbctl cluster-bench's flags (clusterbench.Options).
type ClusterBench struct {
	O                                 clusterbench.Options
	JSON                              bool
	modes                             []string
	chunk, devSize, ru, directory, rt string
	tls, deallocate                   string
	fs                                *pflag.FlagSet
}

// Register defines the cluster-bench flags on fs.
func (c *ClusterBench) Register(f *pflag.FlagSet) {
	c.O = clusterbench.Defaults()
	c.fs = f
	o := &c.O
	f.IntVar(&o.Nodes, "nodes", o.Nodes, "cache nodes, each an engine on its own emulated FDP SSD, on loopback")
	f.IntVar(&o.Requests, "requests", 0, "requests in all, spread over the nodes by --route (0: 1200, or the whole --workload trace)")
	f.IntVar(&o.Tenants, "tenants", o.Tenants, "tenants (cache_salt values), each with its own shared prefix")
	f.IntVar(&o.PrefixChunks, "prefix-chunks", o.PrefixChunks, "chunks of each tenant's shared prefix (system prompt, RAG document)")
	f.IntVar(&o.UniqueChunks, "unique-chunks", o.UniqueChunks, "chunks unique to each request")
	f.StringVar(&c.chunk, "chunk-size", "256K", "payload bytes of one KV chunk (a multiple of 4K; a trace's chunks too, scaled down from a model's)")
	f.StringVar(&c.devSize, "device-size", "256M", "emulated SSD size per node")
	f.StringVar(&c.ru, "ru", "4M", "reclaim unit size of the emulated SSDs")
	f.IntVar(&o.Handles, "handles", o.Handles, "placement handles (RUHs) per emulated SSD")
	f.Float64Var(&o.OP, "op", o.OP, "over-provisioning of the emulated SSDs")
	f.StringVar(&o.Policy, "placement", o.Policy, "placement policy of every node (as bench --placement)")
	f.StringSliceVar(&c.modes, "modes", []string{"off", "shared", "shared-replica-handle", "fetch-only"}, "modes to run, each on fresh devices: off, shared, shared-replica-handle, fetch-only")
	f.StringVar(&c.directory, "directory", "static", "how a node finds the peer holding a key: static (every peer is asked) or gossip (memberlist and Bloom digests, p2p/cluster)")
	f.DurationVar(&o.Interval, "interval", 0, "pause between requests (0: back to back)")
	f.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the tenant choice and of random routing")
	f.StringVar(&o.Dir, "dir", "", "directory for the device images, removed after each mode (default: the system temp dir)")
	f.BoolVar(&c.JSON, "json", false, "print JSON")
	f.StringVar(&o.Workload, "workload", "", "replay a request trace instead of the tenants: mooncake:FILE, or l2trace:FILE[,FILE...] (a node's recording: each get a one-chunk request; docs/record.md)")
	f.IntVar(&o.ChunkTokens, "chunk-tokens", 256, "trace: tokens per chunk (divides the trace's 512-token blocks)")
	f.StringVar(&o.SaltBy, "salt-by", "root", "trace: each request's cache_salt: none, root, hash:N, prefix:N or group[:F] (as bench; docs/bench.md)")
	f.StringVar(&o.Admission, "admission", "all", "every node's admission policy, as serve --admission: all, second-hit[:W] or tinylfu[:W]")
	f.StringVar(&c.deallocate, "deallocate", "devices", "every node's deallocation of the slots evictions free, as serve --deallocate: devices or all (the nodes' emulated SSDs deallocate) or none")
	f.StringVar(&c.tls, "tls", "off", "run the nodes over mutual TLS on both planes with certificates of a throwaway CA: off, on, or both (each mode in plain TCP, then over TLS, and their throughput and CPU per GB compared)")
	DriveFlag(f, &o.Drive)
	f.StringVar(&c.rt, "route", "round-robin", "which node serves a request: round-robin, session (a tenant's requests, by cache_salt (--salt-by with a trace), on one node) or random")
}

// Options checks the flags and returns the bench's options.
func (c *ClusterBench) Options() (clusterbench.Options, error) {
	o := c.O
	switch c.directory {
	case "static", "gossip":
		o.Gossip = c.directory == "gossip"
	default:
		return o, fmt.Errorf("--directory %q is not static or gossip", c.directory)
	}
	o.Modes = nil
	for _, m := range c.modes {
		mode, err := clusterbench.ParseMode(m)
		if err != nil {
			return o, fmt.Errorf("--modes: %w", err)
		}
		o.Modes = append(o.Modes, mode)
	}
	for _, s := range []struct {
		flag, v string
		dst     *int64
	}{{"device-size", c.devSize, &o.DeviceBytes}, {"ru", c.ru, &o.RUBytes}} {
		n, err := units.ParseSize(s.v)
		if err != nil {
			return o, fmt.Errorf("--%s: %w", s.flag, err)
		}
		*s.dst = n
	}
	n, err := units.ParseSize(c.chunk)
	if err != nil || n > 1<<30 {
		return o, fmt.Errorf("--chunk-size %q is not a size up to 1G", c.chunk)
	}
	o.ChunkBytes = int(n)
	// The policy as the nodes parse it: with one handle fewer for data in the
	// shared-replica-handle mode (its last handle holds the replicas).
	data := o.Handles
	if slices.Contains(o.Modes, clusterbench.SharedReplicaHandle) {
		data--
	}
	if _, err := placement.Parse(o.Policy, max(data, 1)); err != nil {
		return o, fmt.Errorf("--placement: %w", err)
	}
	if _, err := workloads.ParseSaltBy(cmp.Or(o.SaltBy, "root")); err != nil { // a trace's; refused without one too
		return o, fmt.Errorf("--salt-by: %w", err)
	}
	if w := o.Workload; w != "" && !strings.HasPrefix(w, "mooncake:") && !strings.HasPrefix(w, "l2trace:") {
		return o, fmt.Errorf("--workload %q is not mooncake:FILE or l2trace:FILE[,FILE...]", w)
	}
	if o.Route, err = clusterbench.ParseRoute(c.rt); err != nil {
		return o, fmt.Errorf("--route: %w", err)
	}
	if err := node.CheckAdmission(o.Admission); err != nil {
		return o, fmt.Errorf("--admission: %w", err)
	}
	if o.Deallocate, err = node.ParseDeallocation(c.deallocate); err != nil {
		return o, fmt.Errorf("--deallocate: %w", err)
	}
	if o.TLS, err = clusterbench.ParseTLSMode(c.tls); err != nil {
		return o, fmt.Errorf("--tls: %w", err)
	}
	if o.Dir == "" {
		o.Dir = os.TempDir()
	}
	// A recording's replay takes the recording node's size and admission unless given (its
	// eviction always: cluster-bench has no flag for it).
	if c.fs != nil {
		o.Fit = workloads.Fit{Size: !c.fs.Changed("device-size"), Eviction: true, Admission: !c.fs.Changed("admission")}
	}
	return o, nil
}
