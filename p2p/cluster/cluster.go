// Package cluster keeps the membership of rbctl cache nodes and tells each node which
// peers may hold a key. Membership and failure detection are hashicorp/memberlist's
// (SWIM gossip); key location is Summary Cache: every node publishes a Bloom filter of
// the key identities it holds, as small deltas gossiped after each change and as a whole
// filter in memberlist's periodic push-pull. A Cluster implements p2p.Directory.
// docs/p2p-cluster.md has the design, the wire format and the measured cost.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/rbctl/rbctl/p2p"
)

// Cluster is a joined member. It is safe for concurrent use.
type Cluster struct {
	cfg       Config
	mc        *memberlist.Config
	ml        *memberlist.Memberlist
	transport *countingTransport
	traffic   traffic
	reg       *registry
	meta      []byte
	epoch     uint64 // this life of the node: full filters of a later epoch win
	local     *localFilter
	wantEvery time.Duration

	mu      sync.RWMutex
	members map[string]member
	remotes map[string]*remote
	failed  map[string]failed

	// smu guards when members were last suspected or declared failed, as memberlist's
	// log says (explain.go); never held while calling memberlist.
	smu                   sync.Mutex
	suspected, failedMark map[string]time.Time

	jobs    chan job
	stop    chan struct{}
	wg      sync.WaitGroup
	stopped atomic.Bool
	stats   counters
}

var _ p2p.Directory = (*Cluster)(nil)

// job is work for the publisher: send the whole local filter to a peer, or (want) ask a
// peer for its whole filter.
type job struct {
	to   string
	want bool
}

// Join starts a member and joins the cluster through cfg.Seeds or, without seeds, the
// registry. With seeds, at least one must answer; the others (and any that fail later)
// are retried every ReconnectInterval.
func Join(ctx context.Context, cfg Config) (*Cluster, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	meta, err := encodeMeta(cfg.Control, cfg.Data)
	if err != nil {
		return nil, err
	}
	local, err := newLocalFilter(cfg.ExpectedKeys, cfg.FalsePositive, cfg.MaxRemoteFilter)
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, meta: meta, epoch: uint64(time.Now().UnixNano()),
		local: local, wantEvery: 4 * cfg.PublishInterval,
		members: map[string]member{}, remotes: map[string]*remote{}, failed: map[string]failed{},
		suspected: map[string]time.Time{}, failedMark: map[string]time.Time{},
		jobs: make(chan job, 256), stop: make(chan struct{})}
	if cfg.loggerDefaulted {
		c.cfg.Logger = c.memberlistLogger()
	}
	c.mc = c.cfg.memberlistConfig()
	if !cfg.NoRegistry && len(cfg.Seeds) == 0 {
		dir := cfg.RegistryDir
		if dir == "" {
			dir = DefaultRegistryDir(cfg.Cluster)
		}
		if c.reg, err = openRegistry(dir, registryStaleAfter*cfg.ReconnectInterval); err != nil {
			return nil, err
		}
	}
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
		BindAddrs: []string{cfg.BindAddr}, BindPort: cfg.BindPort, Logger: c.cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("gossip listener on %s:%d: %w", cfg.BindAddr, cfg.BindPort, err)
	}
	if c.mc.AdvertiseAddr != "" && c.mc.AdvertisePort == 0 {
		c.mc.AdvertisePort = nt.GetAutoBindPort() // an advertised host at the port bound
	}
	c.transport = newCountingTransport(nt, cfg.Dial, &c.traffic)
	c.mc.Transport = c.transport
	c.mc.Delegate = (*delegate)(c)
	c.mc.Events = (*delegate)(c)
	c.mc.Conflict = (*delegate)(c)
	if c.ml, err = memberlist.Create(c.mc); err != nil {
		c.transport.Shutdown()
		return nil, fmt.Errorf("gossip member %s: %w", cfg.Name, err)
	}
	if err := c.register(); err != nil {
		c.ml.Shutdown()
		return nil, err
	}
	if err := c.joinFirst(ctx); err != nil {
		c.ml.Shutdown()
		if c.reg != nil {
			c.reg.remove(cfg.Name)
		}
		return nil, err
	}
	c.wg.Add(2)
	go c.publisher()
	go c.reconnector()
	return c, nil
}

// GossipAddr is the host:port other members join this one at.
func (c *Cluster) GossipAddr() string { return c.ml.LocalNode().Address() }

// Local is this node as its peers see it.
func (c *Cluster) Local() p2p.Peer {
	return p2p.Peer{Name: c.cfg.Name, Control: c.cfg.Control, Data: c.cfg.Data}
}

// Members returns the local node and every live peer, by name.
func (c *Cluster) Members() []p2p.Peer {
	out := append(c.Peers(), c.Local())
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// FailureBound is how long a member that dies stays in the live set at most, for the
// cluster's present size and timing (see failureBound).
func (c *Cluster) FailureBound() time.Duration {
	c.mu.RLock()
	n := len(c.members) + 1
	c.mu.RUnlock()
	return failureBound(c.mc, n)
}

// register writes this node's registry entry.
func (c *Cluster) register() error {
	if c.reg == nil {
		return nil
	}
	return c.reg.put(registryEntry{name: c.cfg.Name, addr: c.GossipAddr(), pid: os.Getpid()})
}

// joinTargets lists the addresses worth joining: the seeds or the registry's entries, and
// failed members still retried, minus this node and the live peers.
func (c *Cluster) joinTargets(now time.Time) []string {
	var addrs []string
	if c.reg != nil {
		for _, e := range c.reg.live(c.cfg.Name, now) {
			addrs = append(addrs, e.addr)
		}
	} else {
		addrs = append(addrs, c.cfg.Seeds...)
	}
	self := c.GossipAddr()
	c.mu.Lock()
	skip := map[string]bool{self: true}
	for _, m := range c.members {
		skip[m.addr] = true
	}
	for name, f := range c.failed {
		if now.Sub(f.since) > c.cfg.ReconnectFor {
			delete(c.failed, name)
			continue
		}
		addrs = append(addrs, f.addr)
	}
	c.mu.Unlock()
	var out []string
	for _, a := range addrs {
		if !skip[a] {
			skip[a] = true
			out = append(out, a)
		}
	}
	return out
}

// joinFirst joins the first time; explicit seeds must answer, registry entries need not
// (the node may be the first, or the entries may be of dead nodes not yet stale).
func (c *Cluster) joinFirst(ctx context.Context) error {
	targets := c.joinTargets(time.Now())
	if len(targets) == 0 {
		return nil
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.ml.Join(targets)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil && len(c.cfg.Seeds) > 0 {
			if c.cfg.Events == nil {
				return fmt.Errorf("no seed of %v answered: %w", c.cfg.Seeds, err)
			}
			// A node that explains itself starts alone and keeps joining (reconnector).
			c.event(slog.LevelWarn, "no seed answered; serving alone and joining again", "seeds", c.cfg.Seeds,
				"every", c.cfg.ReconnectInterval, "err", err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// publisher gossips local changes every PublishInterval and runs the queued jobs.
func (c *Cluster) publisher() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.PublishInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.publish()
		case j := <-c.jobs:
			c.run(j)
		}
	}
}

// publish sends the local changes to every live peer: deltas as one datagram each (lost
// ones show as a gap or in the next push-pull digest), a whole filter over a stream.
// Memberlist's broadcast queue would piggyback deltas on gossip instead, but it hands each
// to a few random members and none relays it, so at five nodes a peer missed about one
// delta in three and fetched the whole filter (docs/p2p-cluster.md).
func (c *Cluster) publish() {
	p := c.local.publish(c.cfg.Name, c.epoch)
	if len(p.deltas) == 0 && p.full == nil {
		return
	}
	members := c.liveMembers()
	for _, d := range p.deltas {
		b := d.encode()
		c.stats.deltasSent.Add(1)
		for _, m := range members {
			c.stats.deltaBytes.Add(uint64(len(b)))
			if err := c.ml.SendBestEffort(m.node(), b); err != nil {
				c.stats.sendErrors.Add(1)
			}
		}
	}
	if p.full != nil {
		// In parallel: a peer behind a partition holds its send for the TCP timeout.
		b := p.full.encode()
		var wg sync.WaitGroup
		for _, m := range members {
			wg.Go(func() { c.send(m, b) })
		}
		wg.Wait()
	}
}

func (c *Cluster) run(j job) {
	c.mu.RLock()
	m, ok := c.members[j.to]
	c.mu.RUnlock()
	if !ok {
		return
	}
	if j.want {
		c.stats.wantsSent.Add(1)
		c.send(m, encodeWant(c.cfg.Name))
		return
	}
	c.send(m, c.local.snapshot(c.cfg.Name, c.epoch).encode())
}

// send delivers a message over memberlist's reliable stream; a failure is counted, and the
// next push-pull or gap repairs what was lost.
func (c *Cluster) send(m member, b []byte) {
	if b[0] == kindFull {
		c.stats.fullsSent.Add(1)
		c.stats.fullBytes.Add(uint64(len(b)))
	}
	if err := c.ml.SendReliable(m.node(), b); err != nil {
		c.stats.sendErrors.Add(1)
		c.cfg.Logger.Printf("[WARN] rbctl cluster: send to %s: %v", m.peer.Name, err)
	}
}

func (c *Cluster) liveMembers() []member {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]member, 0, len(c.members))
	for _, m := range c.members {
		out = append(out, m)
	}
	return out
}

// enqueue hands a job to the publisher without blocking memberlist; when the queue is full
// the job is dropped (a later gap or push-pull repairs it).
func (c *Cluster) enqueue(j job) {
	select {
	case c.jobs <- j:
	default:
		c.stats.jobsDropped.Add(1)
	}
}

// reconnector refreshes the registry entry and joins failed members, seeds and registry
// entries not yet in the live set: memberlist alone forgets a member it declared dead, so
// a partition that outlasts its gossip to the dead would never heal.
func (c *Cluster) reconnector() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.ReconnectInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			if err := c.register(); err != nil {
				c.cfg.Logger.Printf("[WARN] rbctl cluster: %v", err)
			}
			c.forgetStrays(time.Now())
			if targets := c.joinTargets(time.Now()); len(targets) > 0 {
				if n, _ := c.ml.Join(targets); n > 0 {
					c.stats.rejoins.Add(uint64(n))
				}
			}
		}
	}
}

// forgetStrays drops filters of nodes that are not members (a filter that arrived after its
// node was declared dead) once they are older than ReconnectFor.
func (c *Cluster) forgetStrays(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, r := range c.remotes {
		if _, live := c.members[name]; !live && now.Sub(r.updated) > c.cfg.ReconnectFor && now.Sub(r.wanted) > c.cfg.ReconnectFor {
			delete(c.remotes, name)
		}
	}
}

// ErrStopped is returned by Leave and Shutdown after the first of them.
var ErrStopped = errors.New("cluster member already stopped")

func (c *Cluster) halt() error {
	if !c.stopped.CompareAndSwap(false, true) {
		return ErrStopped
	}
	close(c.stop)
	c.wg.Wait()
	return nil
}

// Leave tells the cluster this node goes, waits up to timeout for the news to spread,
// stops the member and removes its registry entry.
func (c *Cluster) Leave(timeout time.Duration) error {
	if err := c.halt(); err != nil {
		return err
	}
	if c.reg != nil {
		c.reg.remove(c.cfg.Name)
	}
	err := c.ml.Leave(timeout)
	if serr := c.ml.Shutdown(); err == nil {
		err = serr
	}
	return err
}

// Shutdown stops the member without telling anyone, as a crash would: the others' failure
// detectors find out, and the registry entry goes stale.
func (c *Cluster) Shutdown() error {
	if err := c.halt(); err != nil {
		return err
	}
	return c.ml.Shutdown()
}
