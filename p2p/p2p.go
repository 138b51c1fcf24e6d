// Package p2p holds what rbctl's cache peers share: the description of a peer and the
// directory a node asks which peers may hold a key. The node (p2p/node) serves a raw-block
// cache to local clients and to peers; the cluster (p2p/cluster) keeps membership and key
// location. Both meet here so that neither imports the other.
package p2p

// Peer is one cache node as the others reach it.
type Peer struct {
	Name    string // unique node name within the cluster
	Control string // host:port of its gRPC control plane (lookup, lock, unlock, stats)
	Data    string // host:port of its bulk data plane (chunk transfers)
}

// Directory tells a node which peers may hold a key. Implementations are safe for concurrent
// use. A Directory may be wrong in both directions (a stale or probabilistic view): a
// candidate that misses costs one wasted lookup, never wrong bytes.
type Directory interface {
	// Candidates returns the live peers that may hold the key with this identity
	// (engine.Key.Identity), most likely first; never the local node.
	Candidates(id uint64) []Peer
	// Peers returns every live peer except the local node.
	Peers() []Peer
	// Admitted and Evicted report changes of the local cache's key set, so the directory can
	// tell the others.
	Admitted(id uint64)
	Evicted(id uint64)
}

// ManyAdmitter is a Directory that also takes many admissions at once, as a node's start
// tells every key it holds; the result is that of Admitted called for each id in turn.
type ManyAdmitter interface {
	AdmittedMany(ids []uint64)
}
