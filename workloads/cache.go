package workloads

import "fmt"

// Eviction selects which resident chunk the cache drops when it is full.
type Eviction string

const (
	LRU  Eviction = "lru"  // least recently stored or hit
	FIFO Eviction = "fifo" // oldest stored; hits do not refresh
)

// ParseEviction accepts lru and fifo.
func ParseEviction(s string) (Eviction, error) {
	switch Eviction(s) {
	case LRU, FIFO:
		return Eviction(s), nil
	}
	return "", fmt.Errorf("unknown eviction %q (lru or fifo)", s)
}

const nilIdx = -1

type entry struct {
	key        Key
	prev, next int32
	storedAt   int64 // write clock (bytes stored) when stored
	pins       int32 // requests between lookup and unlock
	pending    bool  // store issued, not completed
}

// residency is the cache's view of what it holds: an index over a slab of entries threaded
// on one recency list (head = most recent) plus per-tenant store-order queues for TTLs. It
// is not safe for concurrent use; the Driver serialises access.
type residency struct {
	idx        map[Key]int32
	ents       []entry
	free       []int32
	head, tail int32
	resident   int64 // entries not pending
	pending    int64
	ttlq       [][]ttlItem // per tenant, in store order
	ttlHead    []int
}

type ttlItem struct {
	key      Key
	storedAt int64
}

func newResidency(tenants int) *residency {
	return &residency{idx: map[Key]int32{}, head: nilIdx, tail: nilIdx,
		ttlq: make([][]ttlItem, tenants), ttlHead: make([]int, tenants)}
}

func (r *residency) unlink(i int32) {
	e := &r.ents[i]
	if e.prev != nilIdx {
		r.ents[e.prev].next = e.next
	} else {
		r.head = e.next
	}
	if e.next != nilIdx {
		r.ents[e.next].prev = e.prev
	} else {
		r.tail = e.prev
	}
	e.prev, e.next = nilIdx, nilIdx
}

func (r *residency) pushFront(i int32) {
	e := &r.ents[i]
	e.prev, e.next = nilIdx, r.head
	if r.head != nilIdx {
		r.ents[r.head].prev = i
	}
	r.head = i
	if r.tail == nilIdx {
		r.tail = i
	}
}

// touch moves a hit entry to the front (LRU only).
func (r *residency) touch(i int32) {
	if r.head == i {
		return
	}
	r.unlink(i)
	r.pushFront(i)
}

// reserve adds k as pending; false when it is already present.
func (r *residency) reserve(k Key) bool {
	if _, ok := r.idx[k]; ok {
		return false
	}
	var i int32
	if n := len(r.free); n > 0 {
		i = r.free[n-1]
		r.free = r.free[:n-1]
	} else {
		r.ents = append(r.ents, entry{})
		i = int32(len(r.ents) - 1)
	}
	r.ents[i] = entry{key: k, prev: nilIdx, next: nilIdx, pending: true}
	r.idx[k] = i
	r.pending++
	return true
}

// commit turns a pending entry resident (ok) or drops it.
func (r *residency) commit(k Key, ok bool, clock int64, trackTTL bool) {
	i, found := r.idx[k]
	if !found || !r.ents[i].pending {
		return
	}
	r.pending--
	if !ok {
		delete(r.idx, k)
		r.free = append(r.free, i)
		return
	}
	e := &r.ents[i]
	e.pending, e.storedAt = false, clock
	r.resident++
	r.pushFront(i)
	if trackTTL {
		r.ttlq[k.Tenant] = append(r.ttlq[k.Tenant], ttlItem{k, clock})
	}
}

// remove drops a resident entry.
func (r *residency) remove(k Key) bool {
	i, ok := r.idx[k]
	if !ok || r.ents[i].pending {
		return false
	}
	r.unlink(i)
	delete(r.idx, k)
	r.free = append(r.free, i)
	r.resident--
	return true
}

// victim picks the least recent resident, unpinned entry and removes it.
func (r *residency) victim() (Key, bool) {
	for i := r.tail; i != nilIdx; i = r.ents[i].prev {
		if r.ents[i].pins == 0 {
			k := r.ents[i].key
			r.remove(k)
			return k, true
		}
	}
	return Key{}, false
}

// expired pops the tenant's entries stored at or before deadline (skipping pinned ones,
// which a request is using and so are kept until LRU evicts them).
func (r *residency) expired(t int, deadline int64, out []Key) []Key {
	q := r.ttlq[t]
	h := r.ttlHead[t]
	for h < len(q) && q[h].storedAt <= deadline {
		it := q[h]
		h++
		if i, ok := r.idx[it.key]; ok && !r.ents[i].pending && r.ents[i].storedAt == it.storedAt && r.ents[i].pins == 0 {
			r.remove(it.key)
			out = append(out, it.key)
		}
	}
	// Compact the queue once its consumed head dominates.
	if h > 4096 && h*2 > len(q) {
		q = append(q[:0], q[h:]...)
		h = 0
	}
	r.ttlq[t], r.ttlHead[t] = q, h
	return out
}
