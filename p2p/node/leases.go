package node

import (
	"crypto/rand"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/engine/sharded"
)

// A lease pins the leading hits of one LookupAndLock (engine locks: MetadataPrefix with
// lock) until the requester unlocks it, cancels the call, or the lease expires.
type lease struct {
	id    uint64
	owner string // who asked (clientOf): counted against its cap, the only one who may unlock
	keys  []engine.Key
	hits  []engine.EntryMeta
	timer *time.Timer
}

type leaseTable struct {
	eng            *sharded.Cache
	maxAll, maxPer int // caps: leases held in all and per owner (Limits)

	mu      sync.Mutex
	m       map[uint64]*lease
	byOwner map[string]int
	closed  bool
	waits   map[uint64]chan struct{} // data-plane requests waiting for a proposed lease
	gone    goneIDs                  // ids that will not be granted: waiters answer at once

	granted, released, expired, refused atomic.Int64
	releasedData                        atomic.Int64 // of released: by the data plane (FlagRelease, lookup requests)
	grantedData                         atomic.Int64 // of granted: to lookup requests on the data plane
}

func newLeaseTable(eng *sharded.Cache, l *Limits) *leaseTable {
	return &leaseTable{eng: eng, m: map[uint64]*lease{}, byOwner: map[string]int{}, maxAll: l.MaxLeases, maxPer: l.MaxLeasesPerClient,
		waits: map[uint64]chan struct{}{}}
}

// lock pins the leading prefix of keys that the cache holds and returns its lease for
// owner, or nil when the first key misses (nothing is pinned) or owner, or all owners
// together, hold as many leases as the caps allow (counted as refused: a miss for the
// requester).
func (t *leaseTable) lock(keys []engine.Key, ttl time.Duration, owner string) *lease {
	return t.lockAs(keys, ttl, owner, 0)
}

// lockAs is lock with the lease id the requester proposed (0: none; leasewait.go): taken
// when no live or recent lease has it, else the lease gets a random id of its own. A
// proposal that does not become this lease's id is marked gone, so that a data-plane
// request already waiting for it is answered at once.
func (t *leaseTable) lockAs(keys []engine.Key, ttl time.Duration, owner string, proposed uint64) *lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.lockLocked(keys, ttl, owner, proposed)
	if proposed != 0 && (l == nil || l.id != proposed) {
		t.goneLocked(proposed)
	}
	return l
}

func (t *leaseTable) lockLocked(keys []engine.Key, ttl time.Duration, owner string, proposed uint64) *lease {
	if t.closed {
		return nil
	}
	if len(t.m) >= t.maxAll || t.byOwner[owner] >= t.maxPer {
		t.refused.Add(1)
		return nil
	}
	hits := t.eng.MetadataPrefix(keys, true)
	if len(hits) == 0 {
		return nil
	}
	id := proposed
	if _, live := t.m[id]; id == 0 || live || t.gone.has(id) {
		id = t.newID()
	}
	l := &lease{id: id, owner: owner, keys: keys[:len(hits):len(hits)], hits: hits}
	t.m[l.id] = l
	if ch, ok := t.waits[l.id]; ok {
		close(ch)
		delete(t.waits, l.id)
	}
	t.byOwner[owner]++
	t.granted.Add(1)
	l.timer = time.AfterFunc(ttl, func() {
		if t.drop(l.id) {
			t.expired.Add(1)
		}
	})
	return l
}

// newID is random so that a lease cannot be guessed by another requester; 0 means none.
func (t *leaseTable) newID() uint64 {
	var b [8]byte
	for {
		rand.Read(b[:])
		id := binary.LittleEndian.Uint64(b[:])
		if _, dup := t.m[id]; id != 0 && !dup {
			return id
		}
	}
}

// unlock releases owner's lease; false when it is unknown (never granted, expired, released
// or another's). An empty owner releases any lease (the node itself).
func (t *leaseTable) unlock(id uint64, owner string) bool {
	if owner != "" {
		if l, ok := t.get(id); !ok || l.owner != owner {
			return false
		}
	}
	if t.drop(id) {
		t.released.Add(1)
		return true
	}
	return false
}

func (t *leaseTable) drop(id uint64) bool {
	t.mu.Lock()
	l, ok := t.m[id]
	delete(t.m, id)
	if ok {
		if t.byOwner[l.owner]--; t.byOwner[l.owner] <= 0 {
			delete(t.byOwner, l.owner)
		}
		t.goneLocked(id)
	}
	t.mu.Unlock()
	if !ok {
		return false
	}
	l.timer.Stop()
	t.eng.UnlockMany(l.keys)
	return true
}

// get returns a live lease.
func (t *leaseTable) get(id uint64) (*lease, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.m[id]
	return l, ok
}

func (t *leaseTable) active() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// close releases every lease and refuses new ones.
func (t *leaseTable) close() {
	t.mu.Lock()
	t.closed = true
	for id, ch := range t.waits {
		close(ch)
		delete(t.waits, id)
	}
	ids := make([]uint64, 0, len(t.m))
	for id := range t.m {
		ids = append(ids, id)
	}
	t.mu.Unlock()
	for _, id := range ids {
		t.unlock(id, "")
	}
}
