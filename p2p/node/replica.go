package node

import (
	"sync"

	"github.com/rbctl/rbctl/engine"

	"github.com/rbctl/rbctl/placement"
)

// replicas records which identities this node stored after a peer fetch, and which such
// writes are in progress so that replicaPolicy can give them their own handle.
type replicas struct {
	mu      sync.Mutex
	storing map[uint64]int
	stored  map[uint64]struct{}
}

func newReplicas() *replicas {
	return &replicas{storing: map[uint64]int{}, stored: map[uint64]struct{}{}}
}

func (r *replicas) begin(ids []uint64) {
	r.mu.Lock()
	for _, id := range ids {
		r.storing[id]++
	}
	r.mu.Unlock()
}

// end closes a write; stored says which ids it actually wrote.
func (r *replicas) end(ids []uint64, stored []bool) {
	r.mu.Lock()
	for i, id := range ids {
		if r.storing[id]--; r.storing[id] <= 0 {
			delete(r.storing, id)
		}
		if stored[i] {
			r.stored[id] = struct{}{}
		}
	}
	r.mu.Unlock()
}

func (r *replicas) inFlight(id uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.storing[id] > 0
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

// ReplicaPolicy wraps the engine's policy (inner, nil for none) so that chunks a node stores
// after a peer fetch are written with handle instead; every other write, and every replica
// when handle is placement.None, is inner's decision. Install it with Node's Config hook
// (see Placement) before the engine opens.
type replicaPolicy struct {
	inner  placement.Policy
	handle placement.Handle
	marks  *replicas
}

func (p *replicaPolicy) Place(w placement.Write) placement.Handle {
	if !w.Metadata && p.marks.inFlight(w.Identity) {
		return p.handle
	}
	if p.inner == nil {
		return placement.None
	}
	return p.inner.Place(w)
}

func (p *replicaPolicy) Name() string {
	if p.inner == nil {
		return "none"
	}
	return p.inner.Name()
}

// Observe forwards access events to the inner policy.
func (p *replicaPolicy) Observe(id uint64, ev placement.Event) {
	if p.inner != nil {
		placement.Observe(p.inner, id, ev)
	}
}

// PlacementHook returns the engine-config hook that routes replica writes to
// Options.ReplicaHandle (with SeparateReplicas): call it before the engine opens (the CLI passes it as the open's
// config tweak) and pass the same opts to New afterwards. Without it New refuses
// SeparateReplicas.
func PlacementHook(opts *Options) func(*engine.Config) {
	marks := newReplicas()
	opts.replicas = marks
	return func(cfg *engine.Config) {
		if !opts.SeparateReplicas {
			return
		}
		cfg.Placer = &replicaPolicy{inner: cfg.Placer, handle: opts.ReplicaHandle, marks: marks}
	}
}
