package cluster

import "sync/atomic"

// counters are the Cluster's running totals.
type counters struct {
	deltasSent, deltaBytes      atomic.Uint64
	fullsSent, fullBytes        atomic.Uint64
	deltasApplied, fullsApplied atomic.Uint64
	gaps, wantsSent             atomic.Uint64
	rejected, sendErrors        atomic.Uint64
	jobsDropped, rejoins        atomic.Uint64
}

// Stats is a snapshot of a member's state and traffic since Join.
type Stats struct {
	Members int // live members, this one included

	Keys        int     // identities held locally
	FilterBits  int     // m of the published filter
	Hashes      int     // k
	FillRatio   float64 // set bits / m
	Version     uint64  // published filter version
	RemoteKnown int     // live peers whose filter this node has

	// Wire bytes of every memberlist packet (UDP) and stream (TCP), both ways: probes,
	// membership gossip, push-pull, and this package's messages inside them.
	PacketBytesOut, PacketBytesIn uint64
	StreamBytesOut, StreamBytesIn uint64

	DeltasSent    uint64 // deltas published
	DeltaBytes    uint64 // delta bytes sent, one copy per peer
	FullsSent     uint64 // whole filters sent by reliable message
	FullBytes     uint64 // whole-filter bytes sent, push-pull states included
	DeltasApplied uint64
	FullsApplied  uint64
	Gaps          uint64 // deltas that did not follow the version held
	WantsSent     uint64 // requests for a whole filter
	Rejected      uint64 // messages that did not decode or were above the cap
	SendErrors    uint64
	Rejoins       uint64 // members joined again by the reconnector
}

// Stats reads the member's figures.
func (c *Cluster) Stats() Stats {
	keys, g, ones, version := c.local.stats()
	c.mu.RLock()
	members, known := len(c.members)+1, 0
	for name := range c.members {
		if r := c.remotes[name]; r != nil && r.filter != nil {
			known++
		}
	}
	c.mu.RUnlock()
	return Stats{
		Members: members, Keys: keys, FilterBits: int(g.bits), Hashes: int(g.hashes),
		FillRatio: float64(ones) / float64(g.bits), Version: version, RemoteKnown: known,
		PacketBytesOut: c.traffic.packetsOut.Load(), PacketBytesIn: c.traffic.packetsIn.Load(),
		StreamBytesOut: c.traffic.streamOut.Load(), StreamBytesIn: c.traffic.streamIn.Load(),
		DeltasSent: c.stats.deltasSent.Load(), DeltaBytes: c.stats.deltaBytes.Load(),
		FullsSent: c.stats.fullsSent.Load(), FullBytes: c.stats.fullBytes.Load(),
		DeltasApplied: c.stats.deltasApplied.Load(), FullsApplied: c.stats.fullsApplied.Load(),
		Gaps: c.stats.gaps.Load(), WantsSent: c.stats.wantsSent.Load(),
		Rejected: c.stats.rejected.Load(), SendErrors: c.stats.sendErrors.Load(),
		Rejoins: c.stats.rejoins.Load(),
	}
}
