package node

import (
	"container/list"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/rbctl/rbctl/engine"
)

// Eviction is how a node makes room when a write finds its shard full.
type Eviction string

const (
	EvictNone Eviction = ""     // no eviction: a write to a full cache is refused
	EvictLRU  Eviction = "lru"  // least recently stored (or written again), hit or leased first
	EvictFIFO Eviction = "fifo" // oldest stored first; hits do not refresh
	// EvictRegion drops whole regions: a region is one cache_salt's consecutive stores on a
	// shard, Config.RegionSlots of them (a reclaim unit's worth with cache-salt placement);
	// the least recently stored-to or hit region goes first, all of it, as bench's
	// --eviction region does (CacheLib's region eviction).
	EvictRegion Eviction = "region"
)

// ParseEviction accepts lru, fifo, region and none ("" too).
func ParseEviction(s string) (Eviction, error) {
	switch s {
	case "", "none":
		return EvictNone, nil
	case string(EvictLRU), string(EvictFIFO), string(EvictRegion):
		return Eviction(s), nil
	}
	return "", fmt.Errorf("eviction %q is not lru, fifo, region or none", s)
}

// putRounds bounds how often a write refused for room evicts again and retries (a
// concurrent write may take the room one round made).
const putRounds = 4

// evictor keeps one recency list per shard (head = most recent) of the keys the node
// holds. A write that finds its shard short of free slots deletes keys from the tail of
// that shard's list; a key pinned by a lease or a local read (engine lock count > 0) is
// refused by DeleteMany and stays, so a leased chunk is never evicted. A nil evictor
// evicts nothing.
type evictor struct {
	mode        Eviction
	regionSlots int

	mu     sync.Mutex
	shards []recency

	evicted, evictedReplicas, pinnedSkips int64 // guarded by mu
}

type recency struct {
	keys keyList // lru, fifo

	// Region mode: the regions (head = most recent), each key's region element, and each
	// cache_salt's region taking its stores.
	l    *list.List // of *region
	m    map[string]*list.Element
	open map[string]*region
}

// region is one salt's run of consecutive stores (region mode).
type region struct {
	salt    string
	members []engine.Key // in store order; those whose m entry no longer names this region left it
	live    int
	self    *list.Element
}

func newEvictor(shards int, mode Eviction, regionSlots int) *evictor {
	ev := &evictor{mode: mode, regionSlots: max(regionSlots, 1), shards: make([]recency, shards)}
	for i := range ev.shards {
		if mode == EvictRegion {
			ev.shards[i] = recency{l: list.New(), m: map[string]*list.Element{}, open: map[string]*region{}}
		} else {
			ev.shards[i] = recency{keys: newKeyList()}
		}
	}
	return ev
}

// join adds k to its salt's open region on shard r (a new region when there is none or
// it is full), which becomes the most recent.
func (ev *evictor) join(r *recency, k engine.Key) {
	salt := k.CacheSalt()
	g := r.open[salt]
	if g == nil || len(g.members) >= ev.regionSlots {
		g = &region{salt: salt}
		g.self = r.l.PushFront(g)
		r.open[salt] = g
	}
	g.members = append(g.members, k)
	g.live++
	r.m[k.String()] = g.self
	r.l.MoveToFront(g.self)
}

// leave takes k out of its region; an empty region that takes no more stores goes.
func (r *recency) leave(k engine.Key) {
	e, ok := r.m[k.String()]
	if !ok {
		return
	}
	delete(r.m, k.String())
	g := e.Value.(*region)
	if g.live--; g.live == 0 && r.open[g.salt] != g {
		r.l.Remove(g.self)
	}
}

// reserve makes room on shard s for n keys about to be seeded.
func (ev *evictor) reserve(s, n int) {
	if ev == nil || ev.mode == EvictRegion {
		return
	}
	ev.mu.Lock()
	ev.shards[s].keys.reserve(n)
	ev.mu.Unlock()
}

// seed adds a key found in the cache at start, as the least recent so far.
func (ev *evictor) seed(s int, k engine.Key) {
	if ev == nil {
		return
	}
	if ev.mode != EvictRegion {
		ev.seedSum(s, k.Identity(), orderSum(k))
		return
	}
	ev.mu.Lock()
	r := &ev.shards[s]
	if _, ok := r.m[k.String()]; !ok {
		ev.join(r, k)
	}
	ev.mu.Unlock()
}

// seedSum is seed for lru and fifo, given the key's identity and sum (orderSum): a shard
// of object keys is seeded from its identities alone, no key spelled.
func (ev *evictor) seedSum(s int, id, sum uint64) {
	ev.mu.Lock()
	r := &ev.shards[s]
	if _, ok := r.keys.find(sum); !ok {
		r.keys.pushBack(id, sum)
	}
	ev.mu.Unlock()
}

// touch makes k the most recent of shard s (a store; with LRU also a hit or a lease).
func (ev *evictor) touch(s int, k engine.Key) {
	if ev == nil {
		return
	}
	ev.mu.Lock()
	r := &ev.shards[s]
	if ev.mode == EvictRegion {
		if e, ok := r.m[k.String()]; ok {
			r.l.MoveToFront(e) // its region
		} else {
			ev.join(r, k)
		}
	} else {
		sum := orderSum(k)
		switch i, ok := r.keys.find(sum); {
		case ok && ev.mode != EvictFIFO:
			r.keys.moveToFront(i)
		case !ok:
			r.keys.pushFront(k.Identity(), sum)
		}
	}
	ev.mu.Unlock()
}

func (ev *evictor) forget(s int, k engine.Key) {
	if ev == nil {
		return
	}
	ev.mu.Lock()
	if ev.mode == EvictRegion {
		ev.shards[s].leave(k)
	} else {
		ev.shards[s].remove(k)
	}
	ev.mu.Unlock()
}

func (r *recency) remove(k engine.Key) {
	if i, ok := r.keys.find(orderSum(k)); ok {
		r.keys.remove(i)
	}
}

// makeRoom evicts from each shard the writes to it need: keys not yet in the cache, less
// the shard's free slots. It returns the keys it evicted.
func (n *Node) makeRoom(keys []engine.Key) []engine.Key {
	ev := n.evict
	need := make([]int64, n.cache.Len())
	present := n.cache.ExistsMany(keys, false)
	for i, k := range keys {
		if !present[i] {
			need[n.cache.ShardOf(k)]++
		}
	}
	if n.seeding.Load() != nil { // Serve is seeding the order: evict from all of it
		for s, want := range need {
			if u := n.cache.Shard(s).Usage(); want > 0 && want > u.SlotsTotal-u.SlotsUsed-u.SlotsInflight {
				n.WaitSeeded()
				break
			}
		}
	}
	var out []engine.Key
	ev.mu.Lock()
	defer ev.mu.Unlock()
	for s, want := range need {
		if want == 0 {
			continue
		}
		eng := n.cache.Shard(s)
		u := eng.Usage()
		want -= u.SlotsTotal - u.SlotsUsed - u.SlotsInflight
		r := &ev.shards[s]
		if ev.mode == EvictRegion {
			out = n.evictRegions(s, r, want, out)
			continue
		}
		if want > 0 {
			want += deallocAhead(eng.Config(), u.SlotsTotal)
		}
		for i := r.keys.tail; i != noNode && want > 0; {
			prev := r.keys.prev[i]
			ks := spell(eng, r.keys.ids[i], r.keys.sums[i]) // none: gone already (deleted by a caller meanwhile)
			kept := false
			if len(ks) > 0 {
				del := eng.DeleteMany(ks, false)
				for j, k := range ks {
					switch {
					case del[j]:
						out = append(out, k)
						ev.evicted++
						if n.replicas.is(k.Identity()) {
							ev.evictedReplicas++
						}
						want--
					case eng.ExistsMany(ks[j:j+1], false)[0]:
						kept = true // pinned: kept, and so is its place in the order
					}
				}
			}
			if kept {
				ev.pinnedSkips++
			} else {
				r.keys.remove(i)
			}
			i = prev
		}
	}
	return out
}

// deallocAhead is how many slots an eviction frees beyond what the writes need when the
// shard deallocates freed slots (Config.Deallocate): a freed slot is written again only
// once its deallocate has returned, so evicting exactly what a put needs made every put on
// a full shard wait for a deallocate of its own (engine/dealloc.go). A batch ahead — the
// engine's DeallocateBatch, at most a 64th of the shard — is deallocated in one call while
// the puts after it take the slots freed before, so a full shard waits for one deallocate
// per batch of puts. The shard holds that many fewer keys: at most 1.6 % of its slots
// (cluster-bench with an eighth, 64 of ~900 slots, lost 1.8 points of hit ratio). Region
// eviction frees whole regions already.
func deallocAhead(cfg engine.Config, slots int64) int64 {
	if !cfg.DeallocateOnDelete || cfg.ReadOnly {
		return 0
	}
	return min(int64(cfg.DeallocateBatch), slots/64)
}

// evictRegions evicts whole regions of shard s, least recent first, until want slots are
// free; a region with a pinned member is skipped whole (and counted once per pass).
func (n *Node) evictRegions(s int, r *recency, want int64, out []engine.Key) []engine.Key {
	ev, eng := n.evict, n.cache.Shard(s)
	for e := r.l.Back(); e != nil && want > 0; {
		prev := e.Prev()
		g := e.Value.(*region)
		var live []engine.Key
		pinned := false
		for _, k := range g.members {
			if r.m[k.String()] != g.self {
				continue // left the region
			}
			live = append(live, k)
			if m, ok := eng.Lookup(k); ok && m.Locks > 0 {
				pinned = true
			}
		}
		if pinned {
			ev.pinnedSkips++
			e = prev
			continue
		}
		if r.open[g.salt] == g {
			delete(r.open, g.salt) // the salt's next store opens a new region
		}
		var del []bool
		if len(live) > 0 {
			del = eng.DeleteMany(live, false)
		}
		for i, ok := range del {
			k := live[i]
			if ok {
				out = append(out, k)
				ev.evicted++
				if n.replicas.is(k.Identity()) {
					ev.evictedReplicas++
				}
				want--
			}
			r.leave(k) // evicted, pinned since the check (kept, untracked), or gone
		}
		r.l.Remove(g.self) // a no-op when its last member's leave took it off already
		e = prev
	}
	return out
}

// putMany stores keys through the cache, evicting first when the node evicts; keys refused
// for want of room are retried after evicting again, a few rounds at most.
func (n *Node) putMany(keys []engine.Key, payloads [][]byte, o engine.PutOptions) (engine.PutResult, error) {
	if n.evict == nil {
		return n.cache.PutManyWith(keys, payloads, o)
	}
	res := engine.PutResult{Results: make([]bool, len(keys))}
	idx := make([]int, len(keys))
	for i := range idx {
		idx[i] = i
	}
	ks, ps := keys, payloads
	var errs error
	for round := 0; round < putRounds && len(ks) > 0; round++ {
		for _, k := range n.makeRoom(ks) {
			n.evicted(k)
		}
		r, err := n.cache.PutManyWith(ks, ps, o)
		if err != nil && errs == nil {
			errs = err
		}
		// Eviction frees slots, not checkpoint room, and a failing checkpoint is not
		// cured by trying again: what those refused stays refused.
		retry := !errors.Is(err, engine.ErrIndexFull) && !errors.Is(err, engine.ErrCheckpointFailing)
		var again []int
		for j, ok := range r.Results {
			if ok {
				res.Results[idx[j]] = true
			} else {
				again = append(again, j)
			}
		}
		for _, j := range r.Stored {
			res.Stored = append(res.Stored, idx[j])
		}
		nk, np, ni := make([]engine.Key, len(again)), make([][]byte, len(again)), make([]int, len(again))
		for x, j := range again {
			nk[x], np[x], ni[x] = ks[j], ps[j], idx[j]
		}
		ks, ps, idx = nk, np, ni
		if !retry {
			break
		}
	}
	slices.Sort(res.Stored)
	return res, errs
}

// evicted tells the directory and the replica records that k left the cache.
func (n *Node) evicted(k engine.Key) {
	n.replicas.forget(k.Identity())
	if d := n.opts.Directory; d != nil {
		d.Evicted(k.Identity())
	}
}

// evictStats are the eviction counters for Stats.
func (ev *evictor) stats() (evicted, replicas, pinned int64) {
	if ev == nil {
		return 0, 0, 0
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return ev.evicted, ev.evictedReplicas, ev.pinnedSkips
}
