package cluster

import (
	"net"
	"sort"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/rbctl/rbctl/p2p"
)

// member is a live peer as the events delegate last saw it.
type member struct {
	peer p2p.Peer
	addr string // gossip address (host:port)
	ip   string
	port uint16
}

func (m member) node() *memberlist.Node {
	return &memberlist.Node{Name: m.peer.Name, Addr: net.ParseIP(m.ip), Port: m.port}
}

// remote is a peer's published filter as this node has it.
type remote struct {
	epoch, version uint64
	filter         *bitFilter
	updated        time.Time          // when its content last changed here
	wanted         time.Time          // when this node last asked for it in full
	announced      uint64             // the version the peer's last digest named
	stash          map[uint64]stashed // deltas ahead of version, by their from
}

// failed is a member the failure detector declared dead: it is joined again until it
// answers or ReconnectFor passes.
type failed struct {
	addr  string
	since time.Time
}

// Peers returns every live peer except the local node, by name.
func (c *Cluster) Peers() []p2p.Peer {
	c.mu.RLock()
	out := make([]p2p.Peer, 0, len(c.members))
	for _, m := range c.members {
		out = append(out, m.peer)
	}
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Candidates returns the live peers whose filter may hold id, the most recently updated
// filter first (a fresher filter is less likely to carry evicted keys).
func (c *Cluster) Candidates(id uint64) []p2p.Peer {
	type hit struct {
		peer    p2p.Peer
		updated time.Time
	}
	var hits []hit
	c.mu.RLock()
	for name, m := range c.members {
		if r := c.remotes[name]; r != nil && r.filter != nil && r.filter.mayContain(id) {
			hits = append(hits, hit{m.peer, r.updated})
		}
	}
	c.mu.RUnlock()
	sort.Slice(hits, func(i, j int) bool {
		if !hits[i].updated.Equal(hits[j].updated) {
			return hits[i].updated.After(hits[j].updated)
		}
		return hits[i].peer.Name < hits[j].peer.Name
	})
	out := make([]p2p.Peer, len(hits))
	for i, h := range hits {
		out[i] = h.peer
	}
	return out
}

// Admitted records a key the local cache now holds; peers learn it at the next publish.
func (c *Cluster) Admitted(id uint64) { c.local.add(id) }

// AdmittedMany records keys as Admitted does each, at once (a start that announces 4M keys:
// 6.7 s one by one, 2.1 s at once, BenchmarkLocalFilterLoad).
func (c *Cluster) AdmittedMany(ids []uint64) { c.local.addMany(ids) }

// Evicted records a key the local cache no longer holds.
func (c *Cluster) Evicted(id uint64) { c.local.remove(id) }

// maxStash bounds the deltas held per peer while an earlier one is missing.
const maxStash = 64

// applyDelta steps a peer's filter. Deltas can arrive out of order (memberlist hands queued
// packets over newest first), so one ahead of the version held waits in a stash until the
// missing ones arrive; a gap that outlasts four publish intervals or fills the stash, a new
// life of the peer, or a peer with no filter here makes this node ask for the whole filter.
func (c *Cluster) applyDelta(d *delta, now time.Time) {
	if d.origin == c.cfg.Name {
		return
	}
	c.mu.Lock()
	r := c.remotes[d.origin]
	switch {
	case r != nil && r.filter != nil && d.epoch == r.epoch && d.from < r.version,
		r != nil && d.epoch < r.epoch:
		c.mu.Unlock() // a retransmission, or from an earlier life of the peer
		return
	case r != nil && r.filter != nil && d.epoch == r.epoch && d.from == r.version && inRange(d.positions, r.filter.bits):
		applied := r.step(d, now)
		c.mu.Unlock()
		c.stats.deltasApplied.Add(uint64(applied))
		return
	case r != nil && r.filter != nil && d.epoch == r.epoch && d.from > r.version && len(r.stash) < maxStash:
		if r.stash == nil {
			r.stash = map[uint64]stashed{}
		}
		r.stash[d.from] = stashed{d, now}
		if now.Sub(r.oldestStash()) < c.wantEvery {
			c.mu.Unlock()
			return
		}
	}
	c.stats.gaps.Add(1)
	if r == nil {
		r = &remote{}
		c.remotes[d.origin] = r
	}
	ask := now.Sub(r.wanted) >= c.wantEvery
	if ask {
		r.wanted = now
	}
	c.mu.Unlock()
	if ask {
		c.enqueue(job{to: d.origin, want: true})
	}
}

// stashed is a delta that arrived before its predecessor.
type stashed struct {
	d  *delta
	at time.Time
}

// step applies d, then every stashed delta that now follows; it returns how many.
func (r *remote) step(d *delta, now time.Time) int {
	n := 0
	for d != nil {
		for _, p := range d.positions {
			r.filter.set(p&^positionValue, p&positionValue != 0)
		}
		r.version++
		r.updated = now
		n++
		next, ok := r.stash[r.version]
		if !ok || !inRange(next.d.positions, r.filter.bits) {
			break
		}
		delete(r.stash, r.version)
		d = next.d
	}
	for from := range r.stash {
		if from < r.version {
			delete(r.stash, from)
		}
	}
	return n
}

func (r *remote) oldestStash() time.Time {
	var oldest time.Time
	for _, s := range r.stash {
		if oldest.IsZero() || s.at.Before(oldest) {
			oldest = s.at
		}
	}
	return oldest
}

func inRange(positions []uint32, bits uint32) bool {
	for _, p := range positions {
		if p&^positionValue >= bits {
			return false
		}
	}
	return true
}

// applyDigest compares a peer's filter version with the one held and asks for the whole
// filter when this node is behind (deltas lost and no later delta to reveal the gap).
// Deltas still in gossip make a node briefly behind, so it asks only when it is still
// behind the version an earlier digest announced, or knows nothing of this life.
func (c *Cluster) applyDigest(d *digest, now time.Time) {
	if d.origin == c.cfg.Name {
		return
	}
	c.mu.Lock()
	r := c.remotes[d.origin]
	if r != nil && r.filter != nil && (d.epoch < r.epoch || d.epoch == r.epoch && d.version <= r.version) {
		c.mu.Unlock()
		return
	}
	if r != nil && r.filter != nil && d.epoch == r.epoch && r.version >= r.announced {
		r.announced = d.version // in flight, perhaps: check again at the next digest
		c.mu.Unlock()
		return
	}
	c.stats.gaps.Add(1)
	if r == nil {
		r = &remote{}
		c.remotes[d.origin] = r
	}
	ask := now.Sub(r.wanted) >= c.wantEvery
	if ask {
		r.wanted = now
	}
	c.mu.Unlock()
	if ask {
		c.enqueue(job{to: d.origin, want: true})
	}
}

// applyFull replaces a peer's filter by a newer whole one.
func (c *Cluster) applyFull(f *full, now time.Time) {
	if f.origin == c.cfg.Name {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.remotes[f.origin]
	if r == nil {
		r = &remote{}
		c.remotes[f.origin] = r
	}
	if r.filter != nil && (f.epoch < r.epoch || f.epoch == r.epoch && f.version < r.version) {
		return
	}
	if r.filter == nil || f.epoch != r.epoch || f.version != r.version {
		r.updated = now
	}
	if f.epoch != r.epoch {
		r.stash = nil
	}
	r.epoch, r.version, r.filter = f.epoch, f.version, f.filter
	c.stats.fullsApplied.Add(1)
	if next, ok := r.stash[r.version]; ok && inRange(next.d.positions, r.filter.bits) {
		delete(r.stash, r.version)
		c.stats.deltasApplied.Add(uint64(r.step(next.d, now)))
	}
}

// memberFromNode reads a memberlist node into a member; ok is false for a node whose meta
// is not an rbctl node's.
func memberFromNode(n *memberlist.Node) (member, bool) {
	control, data, err := decodeMeta(n.Meta)
	if err != nil {
		return member{}, false
	}
	ip := n.Addr.String()
	return member{peer: p2p.Peer{Name: n.Name, Control: control, Data: data},
		addr: net.JoinHostPort(ip, strconv.Itoa(int(n.Port))), ip: ip, port: n.Port}, true
}
