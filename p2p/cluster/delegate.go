package cluster

import (
	"log/slog"
	"time"

	"github.com/hashicorp/memberlist"
)

// delegate is the Cluster as memberlist's Delegate and EventDelegate. Memberlist may call
// these with its own locks held, so none of them calls back into memberlist: work that
// needs to send is queued for the publisher.
type delegate Cluster

var (
	_ memberlist.Delegate      = (*delegate)(nil)
	_ memberlist.EventDelegate = (*delegate)(nil)
)

func (d *delegate) c() *Cluster { return (*Cluster)(d) }

func (d *delegate) NodeMeta(limit int) []byte {
	if len(d.meta) > limit {
		return nil // cannot happen: encodeMeta stays below memberlist's 512 bytes
	}
	return d.meta
}

// NotifyMsg receives deltas, whole filters and requests; memberlist reuses buf, and the
// decoder copies what it keeps.
func (d *delegate) NotifyMsg(buf []byte) {
	m, err := decodeMessage(buf, d.cfg.MaxRemoteFilter)
	if err != nil {
		d.stats.rejected.Add(1)
		d.cfg.Logger.Printf("[WARN] rbctl cluster: %v", err)
		return
	}
	now := time.Now()
	switch {
	case m.delta != nil:
		d.c().applyDelta(m.delta, now)
	case m.full != nil:
		d.c().applyFull(m.full, now)
	case m.want != "":
		d.c().enqueue(job{to: m.want})
	}
}

// GetBroadcasts has nothing to piggyback: deltas go straight to each peer (publish).
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState is the version of this node's filter, for memberlist's periodic push-pull:
// a peer that holds an older one asks for the whole filter. On a join the whole filter
// goes at once.
func (d *delegate) LocalState(join bool) []byte {
	var b []byte
	if join {
		b = d.local.snapshot(d.cfg.Name, d.epoch).encode()
		d.stats.fullBytes.Add(uint64(len(b)))
	} else {
		b = digest{origin: d.cfg.Name, epoch: d.epoch, version: d.local.publishedVersion()}.encode()
	}
	return b
}

func (d *delegate) MergeRemoteState(buf []byte, join bool) {
	m, err := decodeMessage(buf, d.cfg.MaxRemoteFilter)
	switch {
	case err == nil && m.full != nil:
		d.c().applyFull(m.full, time.Now())
	case err == nil && m.digest != nil:
		d.c().applyDigest(m.digest, time.Now())
	default:
		d.stats.rejected.Add(1)
		d.cfg.Logger.Printf("[WARN] rbctl cluster: push-pull state: %v", err)
	}
}

// NotifyJoin adds a live peer and sends it this node's filter, so it need not wait for
// the next push-pull.
func (d *delegate) NotifyJoin(n *memberlist.Node) {
	if n.Name == d.cfg.Name {
		return
	}
	m, ok := memberFromNode(n)
	if !ok {
		d.cfg.Logger.Printf("[WARN] rbctl cluster: node %q carries no rbctl meta; ignored", n.Name)
		return
	}
	d.mu.Lock()
	d.members[n.Name] = m
	_, back := d.failed[n.Name]
	delete(d.failed, n.Name)
	d.mu.Unlock()
	d.smu.Lock()
	delete(d.suspected, n.Name)
	delete(d.failedMark, n.Name)
	d.smu.Unlock()
	d.c().event(slog.LevelInfo, "member joined", "name", n.Name, "gossip", n.Address(), "control", m.peer.Control, "returned", back)
	d.c().enqueue(job{to: n.Name})
}

// NotifyLeave drops a peer that left or died, with its filter; a dead one is retried.
func (d *delegate) NotifyLeave(n *memberlist.Node) {
	if n.Name == d.cfg.Name {
		return
	}
	// Dead, not left: memberlist logged its verdict just before (memberlistLog), or this
	// node suspected it in the last minute and another member's verdict reached it first
	// (memberlist passes a dead message from gossip on without a log line). A member that
	// leaves says so itself, unsuspected; one suspected just before it left is taken for
	// dead and only retried in vain.
	c := d.c()
	dead := n.State == memberlist.StateDead || c.noted(d.failedMark, n.Name, time.Minute) || c.noted(c.suspected, n.Name, time.Minute)
	d.mu.Lock()
	m, had := d.members[n.Name]
	delete(d.members, n.Name)
	delete(d.remotes, n.Name)
	if had && dead {
		d.failed[n.Name] = failed{addr: m.addr, since: time.Now()}
	}
	d.mu.Unlock()
	if dead {
		d.c().event(slog.LevelWarn, "member dropped: declared dead by the failure detector; joining it again", "name", n.Name, "gossip", n.Address())
	} else {
		d.c().event(slog.LevelInfo, "member left", "name", n.Name, "gossip", n.Address())
	}
}

func (d *delegate) NotifyUpdate(n *memberlist.Node) {
	if n.Name == d.cfg.Name {
		return
	}
	if m, ok := memberFromNode(n); ok {
		d.mu.Lock()
		d.members[n.Name] = m
		d.mu.Unlock()
	}
}
