package node

import (
	"slices"
	"time"

	"github.com/rbctl/rbctl/p2p"
)

// ewmaWeight is the weight of a new fetch in a peer's latency estimate.
const ewmaWeight = 0.3

// observe folds one successful fetch (lookup, transfer and verification of chunks chunks)
// into the peer's recent latency per chunk.
func (r *remote) observe(d time.Duration, chunks int) {
	per := d / time.Duration(max(chunks, 1))
	r.mu.Lock()
	if r.latency == 0 {
		r.latency = per
	} else {
		r.latency = time.Duration(ewmaWeight*float64(per) + (1-ewmaWeight)*float64(r.latency))
	}
	r.mu.Unlock()
}

// choose orders the directory's candidates for a fetch: peers outside their backoff first,
// and among them a peer never measured first (so that each holder is tried once), then by
// lowest recent latency per chunk; ties keep the directory's order. A peer in backoff stays
// at the end, where it costs nothing (fetchFrom skips it).
func (n *Node) choose(cands []p2p.Peer) []p2p.Peer {
	if len(cands) < 2 {
		return cands
	}
	type scored struct {
		peer  p2p.Peer
		ready bool
		lat   time.Duration
	}
	now := time.Now()
	s := make([]scored, len(cands))
	for i, p := range cands {
		s[i] = scored{peer: p}
		if r, err := n.peers.get(p); err == nil {
			r.mu.Lock()
			s[i].ready, s[i].lat = !now.Before(r.retryAt), r.latency
			r.mu.Unlock()
		}
	}
	slices.SortStableFunc(s, func(a, b scored) int {
		switch {
		case a.ready != b.ready:
			if a.ready {
				return -1
			}
			return 1
		case a.lat < b.lat:
			return -1
		case a.lat > b.lat:
			return 1
		}
		return 0
	})
	out := make([]p2p.Peer, len(s))
	for i, x := range s {
		out[i] = x.peer
	}
	return out
}
