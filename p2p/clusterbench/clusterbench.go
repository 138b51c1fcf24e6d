// Package clusterbench measures what sharing caches between peers is worth: N cache nodes,
// each an engine on its own emulated FDP SSD, serve tenants whose prompt prefixes recur on
// every node. Each request asks its node for its chunks (the leading prefix of hits is used,
// as LMCache does); what misses is "computed" (a payload derived from the key) and stored.
// Without peers every node computes and writes every shared prefix itself; with peers a node
// fetches a prefix another node already holds. The run reports, per node and in total, local
// hits, peer hits, misses, bytes moved, peer-fetch and local-load latency, and device writes:
// host bytes and media bytes from the emulated SSD's FDP statistics, whose ratio is the
// emulator's model of WAF (labelled so everywhere).
package clusterbench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/internal/sys"
	"github.com/rbctl/rbctl/p2p"
	"github.com/rbctl/rbctl/p2p/cluster"
	"github.com/rbctl/rbctl/p2p/node"
	"github.com/rbctl/rbctl/p2p/secure"
	"github.com/rbctl/rbctl/placement"
	"github.com/rbctl/rbctl/reports"
	"github.com/rbctl/rbctl/workloads"
)

// Mode is how a node treats a miss another node could serve.
type Mode string

const (
	// Off: no peers; every node computes and writes what it misses.
	Off Mode = "off"
	// Shared: a miss is fetched from a peer and the fetched chunk is stored locally,
	// placed by the tenant's policy like the node's own writes.
	Shared Mode = "shared"
	// SharedReplicaHandle: as Shared, but fetched chunks are written with a placement
	// handle of their own (the device's last one; the policy gets the others).
	SharedReplicaHandle Mode = "shared-replica-handle"
	// FetchOnly: a miss is fetched from a peer and not stored locally: a prefix is written
	// once in the cluster and crosses the network on every use elsewhere.
	FetchOnly Mode = "fetch-only"
)

// Modes lists every mode in report order.
var Modes = []Mode{Off, Shared, SharedReplicaHandle, FetchOnly}

// ParseMode accepts a mode name.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("mode %q is not one of off, shared, shared-replica-handle, fetch-only", s)
}

// Options describe one cluster bench. Zero fields take the defaults in Defaults.
type Options struct {
	Dir          string  // directory for the nodes' device images (required)
	Nodes        int     // cache nodes
	DeviceBytes  int64   // emulated SSD per node
	RUBytes      int64   // reclaim unit size of the emulated SSD
	Handles      int     // placement handles (RUHs) of the emulated SSD
	OP           float64 // over-provisioning of the emulated SSD
	ChunkBytes   int     // payload bytes of one KV chunk
	Tenants      int     // cache_salt values, each with its own shared prefix
	PrefixChunks int     // chunks of each tenant's shared prefix (system prompt, RAG document)
	UniqueChunks int     // chunks unique to each request (the user's turn)
	Requests     int     // requests in all, spread round-robin over the nodes
	Seed         uint64  // tenant choice
	Policy       string  // placement policy spec (placement.Parse)
	Modes        []Mode  // modes to run, each on fresh devices
	// Gossip locates keys through p2p/cluster (memberlist gossip and per-node Bloom digests)
	// instead of a static directory that names every peer for every key; the result then
	// carries the gossip traffic and the lookups a digest sent in vain.
	Gossip bool
	// Interval is the pause between requests (0: back to back). A gossip directory learns a
	// key one publish interval after it is stored; requests closer than that find no holder.
	Interval time.Duration
	// Progress, if set, is called after each mode with its result.
	Progress func(Result)
	// Step, if set, is called after each request of run i (from 0) of n with the mode and
	// the fraction of its requests done.
	Step func(mode Mode, i, n int, frac float64)

	// Workload "" is the tenants above; mooncake:FILE replays a Mooncake request trace
	// (workloads.ReadMooncake) instead, its first Requests requests (0: all of it), in
	// chunks of ChunkTokens tokens (default 256) of ChunkBytes each, salted by SaltBy
	// (workloads.ParseSaltBy, default root).
	Workload    string
	ChunkTokens int
	SaltBy      string
	// Route sends each request to a node: RoundRobin (default), Session (by the request's
	// tenant: its cache_salt, so a tenant stays on one node) or Random (from Seed).
	Route Route
	// Admission is every node's admission policy (node.Config.Admission; "" = all).
	Admission string
	// Deallocate is which devices deallocate the slots evictions free, as serve's
	// node.Config.Deallocate: the nodes' devices are emulated SSDs, so devices and all
	// deallocate and none ("") does not.
	Deallocate node.Deallocation
	// Drive, when set, projects each mode's drive life against it (the capacity: every
	// node's device together).
	Drive *reports.Drive
	// TLS runs the nodes over mutual TLS with certificates of a throwaway CA (tls.go):
	// TLSOff (""), TLSOn, or TLSBoth (each mode in plain TCP, then over TLS).
	TLS TLSMode

	// Fit, with an l2trace: workload, takes the recording node's cache where the caller set
	// none of its own, as simulate and bench do: Size gives every node's engine the
	// recording node's slots (of ChunkBytes chunks; several recording nodes: their mean)
	// as its capacity, on a device of DeviceBytes or as large as that needs, Eviction
	// its eviction (lru or fifo; another stays lru), Admission its admission policy.
	Fit workloads.Fit

	trace     *workloads.Mooncake
	recording *workloads.Source // an l2trace recording (workloads.Source.Recorded)
	nodeSlots int64             // slots of every node's cache (Fit.Size); 0: what DeviceBytes holds
	eviction  node.Eviction     // every node's (default LRU)
	notes     []string          // what was taken from a recording (Result.Notes)
}

// Route is how requests are spread over the nodes.
type Route string

const (
	RoundRobin Route = "round-robin"
	Session    Route = "session"
	Random     Route = "random"
)

// ParseRoute accepts round-robin, session or random.
func ParseRoute(s string) (Route, error) {
	switch r := Route(s); r {
	case RoundRobin, Session, Random:
		return r, nil
	}
	return "", fmt.Errorf("route %q is not round-robin, session or random", s)
}

// Defaults are the options of `rbctl cluster-bench` without flags: 3 nodes on 256 MiB
// emulated SSDs, 40 tenants whose 24-chunk prefixes (240 MiB in all) do not fit one node's
// cache beside the unique chunks, so nodes evict prefixes the cluster still holds.
func Defaults() Options {
	return Options{Nodes: 3, DeviceBytes: 256 << 20, RUBytes: 4 << 20, Handles: 8, OP: 0.15,
		ChunkBytes: 256 << 10, Tenants: 40, PrefixChunks: 24, UniqueChunks: 4, Requests: 1200,
		Seed: 1, Policy: "cache-salt", Modes: Modes}
}

func (o *Options) fill() error {
	d := Defaults()
	if o.Dir == "" {
		return errors.New("cluster bench: no directory for the device images")
	}
	setI := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	setI(&o.Nodes, d.Nodes)
	setI(&o.Handles, d.Handles)
	setI(&o.ChunkBytes, d.ChunkBytes)
	setI(&o.Tenants, d.Tenants)
	setI(&o.PrefixChunks, d.PrefixChunks)
	setI(&o.UniqueChunks, d.UniqueChunks)
	setI(&o.ChunkTokens, 256)
	if o.Route == "" {
		o.Route = RoundRobin
	}
	if _, err := ParseRoute(string(o.Route)); err != nil {
		return fmt.Errorf("cluster bench: %w", err)
	}
	if err := node.CheckAdmission(o.Admission); err != nil {
		return fmt.Errorf("cluster bench: %w", err)
	}
	if _, err := node.ParseDeallocation(string(o.Deallocate)); err != nil {
		return fmt.Errorf("cluster bench: %w", err)
	}
	if o.TLS == "" {
		o.TLS = TLSOff
	}
	if _, err := ParseTLSMode(string(o.TLS)); err != nil {
		return fmt.Errorf("cluster bench: %w", err)
	}
	if o.Workload != "" {
		if err := o.readTrace(); err != nil {
			return err
		}
	}
	setI(&o.Requests, d.Requests)
	if o.DeviceBytes == 0 {
		o.DeviceBytes = d.DeviceBytes
	}
	if o.RUBytes == 0 {
		o.RUBytes = d.RUBytes
	}
	if o.nodeSlots > 0 { // the engine uses the recording node's slots of a device that holds them
		o.DeviceBytes = max(o.DeviceBytes, roundUp(nodeLayout(o.nodeSlots, o.ChunkBytes).CapacityBytes, o.RUBytes))
	}
	if o.OP == 0 {
		o.OP = d.OP
	}
	if o.Policy == "" {
		o.Policy = d.Policy
	}
	if len(o.Modes) == 0 {
		o.Modes = d.Modes
	}
	switch {
	case o.Nodes < 2 || o.Nodes > 16:
		return fmt.Errorf("cluster bench: %d nodes; want 2 to 16", o.Nodes)
	case o.Handles < 2:
		return fmt.Errorf("cluster bench: %d placement handles; want at least 2", o.Handles)
	case o.ChunkBytes < 4096 || o.ChunkBytes%4096 != 0:
		return fmt.Errorf("cluster bench: chunk of %d bytes; want a multiple of 4096", o.ChunkBytes)
	case o.Tenants < 1 || o.PrefixChunks < 1 || o.UniqueChunks < 0 || o.Requests < 1:
		return errors.New("cluster bench: tenants, prefix chunks and requests must be positive")
	case o.trace == nil && o.recording == nil && o.PrefixChunks+o.UniqueChunks > 256:
		return fmt.Errorf("cluster bench: %d chunks per request; at most 256", o.PrefixChunks+o.UniqueChunks)
	}
	// Each node's emulated SSD, as deviceFor makes it: a geometry whose GC can run out of
	// room fails mid-run ("infeasible"), so it is refused here, with the nearest fixes.
	sp, err := emu.ParseSpec(fmt.Sprintf("emu:mem?size=%d&ru=%d&ruhs=%d&op=%g&iso=initial", o.DeviceBytes, o.RUBytes, o.Handles, o.OP))
	if err != nil {
		return fmt.Errorf("cluster bench: %w", err)
	}
	if err := sp.CheckFeasible("each node's emulated device"); err != nil {
		return fmt.Errorf("cluster bench: %w", err)
	}
	return nil
}

// Run runs every mode of o on fresh devices and returns one Result per mode.
func Run(ctx context.Context, o Options) ([]Result, error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	var out []Result
	n := len(o.Modes) * len(o.TLS.runs())
	for _, m := range o.Modes {
		for _, tl := range o.TLS.runs() {
			step, i := func(float64) {}, len(out)
			if o.Step != nil {
				step = func(frac float64) { o.Step(m, i, n, frac) }
			}
			r, err := runMode(ctx, o, m, tl, step)
			if err != nil {
				return out, fmt.Errorf("mode %s: %w", m, err)
			}
			r.projectDrive(o)
			out = append(out, r)
			if o.Progress != nil {
				o.Progress(r)
			}
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
		}
	}
	return out, nil
}

// member is one node of a run: its device, engine and node (which evicts, LRU).
type member struct {
	gossip *cluster.Cluster
	dev    *devices.Opened
	eng    *engine.Engine
	node   *node.Node
	m      NodeResult
}

func runMode(ctx context.Context, o Options, mode Mode, tl bool, step func(frac float64)) (Result, error) {
	dir, err := os.MkdirTemp(o.Dir, "cluster-"+string(mode)+"-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	ms, err := startMembers(o, mode, dir, tl)
	defer func() {
		for _, mb := range ms {
			if mb.node != nil {
				mb.node.Close()
			}
			if mb.gossip != nil {
				mb.gossip.Shutdown()
			}
			if mb.eng != nil {
				mb.eng.CloseNoCheckpoint()
			}
			if mb.dev != nil {
				mb.dev.Close()
			}
		}
	}()
	if err != nil {
		return Result{}, err
	}
	start := make([]deviceCounters, len(ms))
	for i, mb := range ms {
		if start[i], err = readDevice(mb.dev); err != nil {
			return Result{}, err
		}
	}
	w := newWorkload(o)
	cpu0 := cpuSeconds()
	load0, _ := sys.LoadAvg()
	t0 := time.Now()
	done := 0
	for r := 0; r < o.Requests && ctx.Err() == nil; r++ {
		keys, at, ok := w.request(r)
		if !ok {
			break
		}
		i := at % len(ms)
		if err := serve(ctx, ms[i], keys, mode == Off, o.ChunkBytes); err != nil {
			return Result{}, fmt.Errorf("node %d request %d: %w", i, r, err)
		}
		done++
		step(float64(done) / float64(o.Requests))
		if o.Interval > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(o.Interval):
			}
		}
	}
	res := Result{Mode: mode, Gossip: o.Gossip && mode != Off, Requests: done, Interrupted: ctx.Err() != nil, Seconds: time.Since(t0).Seconds(),
		Route: o.Route, Admission: cmp.Or(o.Admission, "all"), Deallocate: cmp.Or(o.Deallocate, "none"), TLS: tl}
	res.CPUSeconds = cpuSeconds() - cpu0
	load1, _ := sys.LoadAvg()
	res.LoadStart, res.LoadEnd = load0, load1
	if o.trace != nil {
		st := o.trace.Stats
		res.Workload, res.Trace = o.Workload, &st
	}
	if o.recording != nil {
		res.Workload, res.Recorded, res.Notes = o.Workload, o.recording.Recorded, o.notes
	}
	for i, mb := range ms {
		end, err := readDevice(mb.dev)
		if err != nil {
			return Result{}, err
		}
		mb.m.fromNode(mb.node.Stats())
		if mb.gossip != nil {
			g := mb.gossip.Stats()
			mb.m.GossipBytesOut = int64(g.PacketBytesOut + g.StreamBytesOut)
		}
		mb.m.HostBytes, mb.m.MediaBytes = end.host-start[i].host, end.media-start[i].media
		mb.m.Name = fmt.Sprintf("node%d", i)
		res.Nodes = append(res.Nodes, mb.m)
	}
	res.total()
	return res, nil
}

// startMembers formats an engine on a fresh emulated SSD per node and starts the nodes, each
// with a static directory of the others (peers only where mode shares).
func startMembers(o Options, mode Mode, dir string, tl bool) ([]*member, error) {
	ms := make([]*member, o.Nodes)
	ctl, data := make([]net.Listener, o.Nodes), make([]net.Listener, o.Nodes)
	peers := make([]p2p.Peer, o.Nodes)
	handed := false // every node started owns its listeners; before that they are ours
	defer func() {
		for i := range ms {
			if !handed && (ms[i] == nil || ms[i].node == nil) {
				for _, ln := range []net.Listener{ctl[i], data[i]} {
					if ln != nil {
						ln.Close()
					}
				}
			}
		}
	}()
	for i := range ms {
		ms[i] = &member{}
		var err error
		if ctl[i], err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return ms, err
		}
		if data[i], err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			ctl[i].Close()
			return ms, err
		}
		peers[i] = p2p.Peer{Name: fmt.Sprintf("node%d", i), Control: ctl[i].Addr().String(), Data: data[i].Addr().String()}
	}
	var ca *secure.CA
	if tl {
		var err error
		if ca, err = clusterCA(); err != nil {
			return ms, err
		}
	}
	for i, mb := range ms {
		spec := fmt.Sprintf("emu:%s?size=%d&ru=%d&ruhs=%d&op=%g&iso=initial",
			filepath.Join(dir, fmt.Sprintf("node%d.img", i)), o.DeviceBytes, o.RUBytes, o.Handles, o.OP)
		if _, err := emu.Create(spec); err != nil {
			return ms, err
		}
		dev, err := devices.OpenDevice(spec, devices.Options{})
		if err != nil {
			return ms, err
		}
		mb.dev = dev
		if dev.FDP == nil {
			return ms, fmt.Errorf("%s: no FDP view (%v)", spec, dev.NoFDP)
		}
		opts := node.Config{Name: peers[i].Name, LookupTimeout: 2 * time.Second, FetchTimeout: 5 * time.Second, Eviction: cmp.Or(o.eviction, node.EvictLRU), Admission: o.Admission}
		if mode != Off {
			others := append(append([]p2p.Peer{}, peers[:i]...), peers[i+1:]...)
			opts.Directory = node.NewStaticDirectory(others...)
			if o.Gossip {
				if mb.gossip, err = joinGossip(ms, i, peers[i], dir); err != nil {
					return ms, err
				}
				opts.Directory = mb.gossip
			}
		}
		opts.FetchOnly = mode == FetchOnly
		if tl {
			if opts.TLS, err = nodeTLS(ca, dir, peers[i].Name); err != nil {
				return ms, err
			}
		}
		dataHandles := o.Handles
		if mode == SharedReplicaHandle {
			opts.SeparateReplicas, opts.ReplicaHandle = true, placement.Handle(o.Handles-1)
			dataHandles--
		}
		pol, err := placement.Parse(o.Policy, dataHandles)
		if err != nil {
			return ms, err
		}
		cfg := engine.DefaultConfig()
		cfg.SlotBytes = int64(engine.DefaultHeaderBytes + o.ChunkBytes)
		cfg.MetaTotalBytes = engine.MetaBytesFor(o.DeviceBytes, cfg.SlotBytes, cfg.BlockAlign, cfg.CheckpointFormat)
		if o.nodeSlots > 0 {
			l := nodeLayout(o.nodeSlots, o.ChunkBytes)
			cfg.CapacityBytes, cfg.MetaTotalBytes = l.CapacityBytes, l.MetaTotalBytes
		}
		cfg.Periodic = false
		cfg.Placer = pol
		cfg.DeallocateOnDelete = o.Deallocate.On(dev.Block.Info())
		if mb.eng, err = engine.Format(dev.Block, cfg); err != nil {
			return ms, err
		}
		if mb.node, err = node.New(mb.eng, opts); err != nil {
			return ms, err
		}
		mb.node.Serve(ctl[i], data[i])
	}
	handed = true
	if o.Gossip && mode != Off {
		return ms, converge(ms)
	}
	return ms, nil
}

// joinGossip makes node i a member of a cluster of its own name (seeded by node 0), with the
// fast test timing so that the run does not wait out LAN probe intervals.
func joinGossip(ms []*member, i int, self p2p.Peer, dir string) (*cluster.Cluster, error) {
	cfg := cluster.Config{Name: self.Name, Cluster: "bench-" + filepath.Base(dir), BindAddr: "127.0.0.1",
		Control: self.Control, Data: self.Data, NoRegistry: true, Timing: cluster.TimingFast}
	if i > 0 {
		cfg.Seeds = []string{ms[0].gossip.GossipAddr()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cluster.Join(ctx, cfg)
}

// converge waits until every member sees every other and holds its digest.
func converge(ms []*member) error {
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ok := true
		for _, mb := range ms {
			if s := mb.gossip.Stats(); s.Members != len(ms) || s.RemoteKnown != len(ms)-1 {
				ok = false
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(end) {
			return errors.New("the gossip cluster did not converge within 20 s")
		}
	}
}

type deviceCounters struct{ host, media uint64 }

func readDevice(d *devices.Opened) (deviceCounters, error) {
	s, err := d.FDP.Stats()
	if err != nil {
		return deviceCounters{}, err
	}
	return deviceCounters{host: uint64(s.HBMW.Float64()), media: uint64(s.MBMW.Float64())}, nil
}
