package node

import (
	"slices"
	"strings"

	"github.com/rbctl/rbctl/p2p"
)

// StaticDirectory is a fixed peer list in which every peer is a candidate for every key: the
// directory of `rbctl serve --peers` and of tests. A peer that lacks a key costs one
// lookup. Safe for concurrent use (it never changes).
type StaticDirectory struct{ peers []p2p.Peer }

// NewStaticDirectory lists peers in the order they are tried.
func NewStaticDirectory(peers ...p2p.Peer) *StaticDirectory {
	return &StaticDirectory{peers: slices.Clone(peers)}
}

// Candidates returns every peer.
func (d *StaticDirectory) Candidates(uint64) []p2p.Peer { return slices.Clone(d.peers) }

// Peers returns every peer.
func (d *StaticDirectory) Peers() []p2p.Peer { return slices.Clone(d.peers) }

// Admitted is a no-op: a static directory has nothing to tell.
func (d *StaticDirectory) Admitted(uint64) {}

// Evicted is a no-op.
func (d *StaticDirectory) Evicted(uint64) {}

var _ p2p.Directory = (*StaticDirectory)(nil)

// StaticPeers is the directory of a list of peers, each "CONTROL" or "CONTROL/DATA"
// (host:port each): a peer is named by its control address; without DATA its data plane is
// the one each lease announces, with DATA (a proxy, a NAT) that address instead. nil for an
// empty list (no peers).
func StaticPeers(addrs []string) p2p.Directory {
	if len(addrs) == 0 {
		return nil
	}
	ps := make([]p2p.Peer, len(addrs))
	for i, a := range addrs {
		ctl, data, _ := strings.Cut(strings.TrimSpace(a), "/")
		ps[i] = p2p.Peer{Name: ctl, Control: ctl, Data: data}
	}
	return NewStaticDirectory(ps...)
}
