package node

import (
	"sync"

	"github.com/rbctl/rbctl/engine"
)

// replicas records which identities this node stored after a peer fetch (List's replica
// field, evicted_replicas). Whether a write is a replica is said in the call that makes it
// (putMany's replica argument), never looked up by the placement policy.
type replicas struct {
	mu     sync.Mutex
	stored map[uint64]struct{}
}

func newReplicas() *replicas { return &replicas{stored: map[uint64]struct{}{}} }

// mark records the ids a replica write stored.
func (r *replicas) mark(ids []uint64) {
	r.mu.Lock()
	for _, id := range ids {
		r.stored[id] = struct{}{}
	}
	r.mu.Unlock()
}

func (r *replicas) is(id uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.stored[id]
	return ok
}

func (r *replicas) forget(id uint64) {
	r.mu.Lock()
	delete(r.stored, id)
	r.mu.Unlock()
}

// replicaWrite is how a replica is written: with Config.ReplicaHandle when
// SeparateReplicas, else as the placement policy decides (like the tenant's own writes).
func (n *Node) replicaWrite() engine.PutOptions {
	if n.opts.SeparateReplicas {
		return engine.PutOptions{Placed: true, Handle: n.opts.ReplicaHandle}
	}
	return engine.PutOptions{}
}
