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
	keys  []engine.Key
	hits  []engine.EntryMeta
	timer *time.Timer
}

type leaseTable struct {
	eng *sharded.Cache

	mu     sync.Mutex
	m      map[uint64]*lease
	closed bool

	granted, released, expired atomic.Int64
}

func newLeaseTable(eng *sharded.Cache) *leaseTable {
	return &leaseTable{eng: eng, m: map[uint64]*lease{}}
}

// lock pins the leading prefix of keys that the cache holds and returns its lease, or nil
// when the first key misses (nothing is pinned).
func (t *leaseTable) lock(keys []engine.Key, ttl time.Duration) *lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	hits := t.eng.MetadataPrefix(keys, true)
	if len(hits) == 0 {
		return nil
	}
	l := &lease{id: t.newID(), keys: keys[:len(hits):len(hits)], hits: hits}
	t.m[l.id] = l
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

// unlock releases a lease; false when it is unknown (never granted, expired or released).
func (t *leaseTable) unlock(id uint64) bool {
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
	ids := make([]uint64, 0, len(t.m))
	for id := range t.m {
		ids = append(ids, id)
	}
	t.mu.Unlock()
	for _, id := range ids {
		t.unlock(id)
	}
}
