package node

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rbctl/rbctl/admission"
	"github.com/rbctl/rbctl/engine"
)

// admitter is a node's admission policy (Config.Admission): which chunks that this node
// does not hold a write stores, a client's put or a replica after a peer fetch. Lookups by
// the node's clients (Get, Exists) are what it learns frequencies from. A nil admitter
// stores every write.
type admitter struct {
	mu       sync.Mutex
	p        admission.Policy
	declined atomic.Int64
}

// newAdmitter builds the policy of spec for a cache of target slots; nil for all. A policy
// that decides by a chunk's position in its request (prefix-depth) is refused: a node sees
// chunks, not requests.
func newAdmitter(spec string, target int64) (*admitter, error) {
	if spec == "" {
		return nil, nil
	}
	p, err := admission.New(spec, target)
	if err != nil || p == nil {
		return nil, err
	}
	if p.NeedsPosition() {
		return nil, fmt.Errorf("%w %q decides by a chunk's position in its request, which a cache node does not see (all, second-hit or tinylfu can)",
			admission.ErrSpec, spec)
	}
	return &admitter{p: p}, nil
}

// CheckAdmission refuses a spec a node cannot run: malformed, or prefix-depth.
func CheckAdmission(spec string) error {
	_, err := newAdmitter(spec, 1)
	return err
}

// admKey is k as the policy sees it: its identity hash (which covers the cache_salt).
func admKey(k engine.Key) admission.Key { return admission.Key{Hash: k.Identity()} }

// seen shows the policy keys a client looked up.
func (n *Node) seen(keys []engine.Key) {
	a := n.admit
	if a == nil {
		return
	}
	a.mu.Lock()
	for _, k := range keys {
		a.p.Seen(admKey(k))
	}
	a.mu.Unlock()
}

// admitted returns the indices of keys a write stores: those already held (the write finds
// them present) and the misses the policy admits, in order; declined are the others. A
// miss on a shard with no free slot is weighed against the chunk eviction would take for
// it (tinylfu), the next least recent one for each miss admitted before it.
func (n *Node) admitWrites(keys []engine.Key) (keep, declined []int) {
	a := n.admit
	if a == nil {
		keep = make([]int, len(keys))
		for i := range keep {
			keep[i] = i
		}
		return keep, nil
	}
	present := n.cache.ExistsMany(keys, false)
	free := make([]int64, n.cache.Len())
	for s := range free {
		u := n.cache.Shard(s).Usage()
		free[s] = u.SlotsTotal - u.SlotsUsed - u.SlotsInflight
	}
	victims := make([]func() *admission.Key, n.cache.Len())
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, k := range keys {
		if present[i] {
			keep = append(keep, i)
			continue
		}
		s := n.cache.ShardOf(k)
		var victim *admission.Key
		if free[s]--; free[s] < 0 {
			if victims[s] == nil {
				victims[s] = n.victims(s)
			}
			victim = victims[s]()
		}
		if a.p.Admit(admKey(k), -1, victim) {
			keep = append(keep, i)
		} else {
			declined = append(declined, i)
		}
	}
	a.declined.Add(int64(len(declined)))
	return keep, declined
}

// victims returns the keys eviction would take from shard s, least recent first (unpinned
// ones; a whole region's members in turn with region eviction); nil once there are none,
// or at once when the node does not evict.
func (n *Node) victims(s int) func() *admission.Key {
	var order []engine.Key
	var nodes [][2]uint64 // lru, fifo: identity and sum, spelled when asked for
	if ev := n.evict; ev != nil {
		ev.mu.Lock()
		r := &ev.shards[s]
		if ev.mode == EvictRegion {
			for e := r.l.Back(); e != nil && len(order) < 4096; e = e.Prev() {
				g := e.Value.(*region)
				for _, k := range g.members {
					if r.m[k.String()] == g.self {
						order = append(order, k)
					}
				}
			}
		} else {
			for i := r.keys.tail; i != noNode && len(nodes) < 4096; i = r.keys.prev[i] {
				nodes = append(nodes, [2]uint64{r.keys.ids[i], r.keys.sums[i]})
			}
		}
		ev.mu.Unlock()
	}
	eng := n.cache.Shard(s)
	return func() *admission.Key {
		for len(order) > 0 || len(nodes) > 0 {
			if len(order) == 0 {
				order = spell(eng, nodes[0][0], nodes[0][1])
				nodes = nodes[1:]
				continue
			}
			k := order[0]
			order = order[1:]
			if m, ok := eng.Lookup(k); ok && m.Locks == 0 {
				v := admKey(k)
				return &v
			}
		}
		return nil
	}
}

// declinedCount is the number of writes the policy declined.
func (a *admitter) declinedCount() int64 {
	if a == nil {
		return 0
	}
	return a.declined.Load()
}
