package workloads

import (
	"fmt"

	"github.com/rbctl/rbctl/placement"
)

// Eviction selects which resident chunk the cache drops when it is full.
type Eviction string

const (
	LRU  Eviction = "lru"  // least recently stored or hit
	FIFO Eviction = "fifo" // oldest stored; hits do not refresh
	// Region evicts whole regions: a region is one tenant's consecutive stores, as many as
	// fill one reclaim unit (DriverConfig.RegionSlots). The least recently stored-to or hit
	// region goes first, all of it (CacheLib's region eviction, per cache_salt). With
	// cache-salt placement a region is what one reclaim unit holds, so a device never has to
	// relocate an evicted region's neighbours.
	Region Eviction = "region"
	// RegionFIFO is Region where hits do not refresh a region.
	RegionFIFO Eviction = "region-fifo"
)

// ParseEviction accepts lru, fifo, region and region-fifo.
func ParseEviction(s string) (Eviction, error) {
	switch Eviction(s) {
	case LRU, FIFO, Region, RegionFIFO:
		return Eviction(s), nil
	}
	return "", fmt.Errorf("unknown eviction %q (lru, fifo, region or region-fifo)", s)
}

// Regional reports whether e evicts whole regions.
func (e Eviction) Regional() bool { return e == Region || e == RegionFIFO }

// refreshes reports whether a hit makes its entry (or region) recent again.
func (e Eviction) refreshes() bool { return e == LRU || e == Region }

const nilIdx = -1

// links threads an element of a slab on a recency list by index.
type links struct{ prev, next int32 }

func (l *links) ln() *links { return l }

// list is a recency list over a slab (head = most recent), linked through the elements'
// links; linker lets one implementation serve entries and regions.
type list struct{ head, tail int32 }

type linker[T any] interface {
	*T
	ln() *links
}

// slabAlloc returns a free index of *s, growing it when free is empty.
func slabAlloc[T any](s *[]T, free *[]int32) int32 {
	if n := len(*free); n > 0 {
		i := (*free)[n-1]
		*free = (*free)[:n-1]
		return i
	}
	var zero T
	*s = append(*s, zero)
	return int32(len(*s) - 1)
}

func newList() list { return list{nilIdx, nilIdx} }

func listUnlink[T any, P linker[T]](l *list, s []T, i int32) {
	e := P(&s[i]).ln()
	if e.prev != nilIdx {
		P(&s[e.prev]).ln().next = e.next
	} else {
		l.head = e.next
	}
	if e.next != nilIdx {
		P(&s[e.next]).ln().prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.prev, e.next = nilIdx, nilIdx
}

func listPushFront[T any, P linker[T]](l *list, s []T, i int32) {
	e := P(&s[i]).ln()
	e.prev, e.next = nilIdx, l.head
	if l.head != nilIdx {
		P(&s[l.head]).ln().prev = i
	}
	l.head = i
	if l.tail == nilIdx {
		l.tail = i
	}
}

// listTouch moves i to the front.
func listTouch[T any, P linker[T]](l *list, s []T, i int32) {
	if l.head != i {
		listUnlink[T, P](l, s, i)
		listPushFront[T, P](l, s, i)
	}
}

type entry struct {
	links
	key      Key
	storedAt int64  // write clock (bytes stored) when stored
	pins     int32  // requests between lookup and unlock
	pending  bool   // store issued, not completed
	region   int32  // region it was stored into (nilIdx: none)
	gen      uint32 // generation it joined its region with, to tell a region's stale members
}

// residency is the cache's view of what it holds: an index over a slab of entries threaded
// on the recency list of their eviction class (head = most recent) plus per-tenant
// store-order queues for TTLs. Without budgets there is one class, the whole cache, limited
// to the driver's target; with budgets each budgeted tenant is a class of its own and the
// tenants without one share the last class (budgets.go). A class evicts only its own
// entries. It is not safe for concurrent use; the Driver serialises access.
type residency struct {
	idx      map[Key]int32
	ents     []entry
	free     []int32
	lrus     []list // per class
	resident int64  // entries not pending
	pending  int64
	ttlq     [][]ttlItem // per tenant, in store order
	ttlHead  []int

	classOf    []int32 // per tenant
	held       []int64 // per class: resident + pending entries
	limit      []int64 // per class: the most entries it keeps
	tenantHeld []int64 // per tenant: resident + pending entries

	// Region mode (regionSlots > 0): regions on their class's recency list.
	regionSlots float64
	regs        []region
	regFree     []int32
	rlrus       []list  // per class
	open        []int32 // per tenant: the region taking its stores, nilIdx when none
	stores      []int64 // per tenant: stores issued so far (region numbering)
	gen         uint32
}

// region is one tenant's run of consecutive stores, regionSlots of them at most.
type region struct {
	links
	members []member // in store order; may hold stale members (removed since)
	live    int32
	num     int64 // region number in its tenant's store stream
	tenant  int32
}

type member struct {
	i   int32
	gen uint32
}

type ttlItem struct {
	key      Key
	storedAt int64
}

// newResidency starts an empty cache of tenants whose entries are limited to target, or
// with budgets (alloc non-nil) to each tenant's budget and the shared rest.
func newResidency(tenants int, regionSlots float64, target int64, alloc *placement.Allocation) *residency {
	r := &residency{idx: map[Key]int32{},
		ttlq: make([][]ttlItem, tenants), ttlHead: make([]int, tenants),
		regionSlots: regionSlots, classOf: make([]int32, tenants), tenantHeld: make([]int64, tenants)}
	if alloc == nil {
		r.limit = []int64{target}
	} else {
		// Class t is budgeted tenant t; class tenants is everyone without a budget.
		r.limit = make([]int64, tenants+1)
		r.limit[tenants] = alloc.Shared
		for t := range r.classOf {
			r.classOf[t] = int32(tenants)
			if n, own := alloc.Limit(t); own {
				r.classOf[t], r.limit[t] = int32(t), n
			}
		}
	}
	r.held = make([]int64, len(r.limit))
	r.lrus, r.rlrus = make([]list, len(r.limit)), make([]list, len(r.limit))
	for c := range r.lrus {
		r.lrus[c], r.rlrus[c] = newList(), newList()
	}
	if regionSlots > 0 {
		r.open, r.stores = make([]int32, tenants), make([]int64, tenants)
		for t := range r.open {
			r.open[t] = nilIdx
		}
	}
	return r
}

// class is the eviction class of tenant t (a tenant beyond the salts: the last class).
func (r *residency) class(t int32) int32 {
	if t >= 0 && int(t) < len(r.classOf) {
		return r.classOf[t]
	}
	return int32(len(r.limit) - 1)
}

// count adds d to the entries held by k's tenant and class.
func (r *residency) count(k Key, d int64) {
	r.held[r.class(k.Tenant)] += d
	if k.Tenant >= 0 && int(k.Tenant) < len(r.tenantHeld) {
		r.tenantHeld[k.Tenant] += d
	}
}

func (r *residency) lruOf(i int32) *list { return &r.lrus[r.class(r.ents[i].key.Tenant)] }
func (r *residency) unlink(i int32)      { listUnlink(r.lruOf(i), r.ents, i) }
func (r *residency) pushFront(i int32)   { listPushFront(r.lruOf(i), r.ents, i) }

// touch moves a hit entry to the front (LRU only).
func (r *residency) touch(i int32) { listTouch(r.lruOf(i), r.ents, i) }

// reserve adds k as pending; false when it is already present.
func (r *residency) reserve(k Key) bool {
	if _, ok := r.idx[k]; ok {
		return false
	}
	i := slabAlloc(&r.ents, &r.free)
	r.ents[i] = entry{links: links{nilIdx, nilIdx}, key: k, pending: true, region: nilIdx}
	r.idx[k] = i
	r.pending++
	r.count(k, 1)
	if r.regionSlots > 0 {
		// A chunk joins its region when its store is issued: that is the order its
		// tenant's writes reach the device, which completions need not keep.
		r.join(i, int(k.Tenant))
	}
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
		r.count(k, -1)
		r.leaveRegion(i)
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
	r.leaveRegion(i)
	delete(r.idx, k)
	r.free = append(r.free, i)
	r.resident--
	r.count(k, -1)
	return true
}

// victim picks the least recent resident, unpinned entry of class c and removes it.
func (r *residency) victim(c int32) (Key, bool) {
	for i := r.lrus[c].tail; i != nilIdx; i = r.ents[i].prev {
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

// join adds entry i, whose store is being issued, to its tenant's region. The tenant's n-th store belongs to
// region ⌊n/regionSlots⌋, so with a fractional regionSlots the regions follow the reclaim
// unit boundaries of the tenant's write stream instead of drifting against them. A new
// region opens at a boundary or when the open one was evicted.
func (r *residency) join(i int32, t int) {
	for len(r.open) <= t {
		r.open, r.stores = append(r.open, nilIdx), append(r.stores, 0)
	}
	num := int64(float64(r.stores[t]) / r.regionSlots)
	r.stores[t]++
	g := r.open[t]
	if g == nilIdx || r.regs[g].num != num {
		g = r.newRegion(int32(t), num)
		r.open[t] = g
	}
	rg := &r.regs[g]
	r.gen++
	rg.members = append(rg.members, member{i, r.gen})
	rg.live++
	r.ents[i].region, r.ents[i].gen = g, r.gen
	r.touchRegion(g)
}

func (r *residency) newRegion(t int32, num int64) int32 {
	g := slabAlloc(&r.regs, &r.regFree)
	r.regs[g] = region{links: links{nilIdx, nilIdx}, tenant: t, num: num, members: r.regs[g].members[:0]}
	listPushFront(r.rlruOf(g), r.regs, g)
	return g
}

// leaveRegion takes entry i out of its region, if it has one.
func (r *residency) leaveRegion(i int32) {
	if g := r.ents[i].region; g != nilIdx {
		r.ents[i].region = nilIdx
		r.leave(g)
	}
}

// leave drops one live member from region g; an empty region that takes no more stores is
// retired.
func (r *residency) leave(g int32) {
	rg := &r.regs[g]
	rg.live--
	if rg.live > 0 || r.open[rg.tenant] == g {
		return
	}
	r.retire(g)
}

// retire takes region g off the recency list and frees it.
func (r *residency) retire(g int32) {
	listUnlink(r.rlruOf(g), r.regs, g)
	r.regs[g].members = r.regs[g].members[:0]
	r.regFree = append(r.regFree, g)
}

// touchRegion makes region g the most recent.
func (r *residency) touchRegion(g int32) { listTouch(r.rlruOf(g), r.regs, g) }

// rlruOf is the recency list region g is on: its tenant's class's.
func (r *residency) rlruOf(g int32) *list { return &r.rlrus[r.class(r.regs[g].tenant)] }

// touchHit refreshes a hit entry: the entry itself, and in region mode its region.
func (r *residency) touchHit(i int32) {
	r.touch(i)
	if g := r.ents[i].region; g != nilIdx {
		r.touchRegion(g)
	}
}

// isMember reports whether member m of region g still is that region's resident entry.
func (r *residency) isMember(g int32, m member) bool {
	e := &r.ents[m.i]
	return e.region == g && e.gen == m.gen
}

// victimRegion removes every member of class c's least recent region none of whose members
// is pinned, appends their keys to out and returns it with how many it removed (0: nothing
// could be evicted). A region still taking stores is closed first, so stores after this
// start a new one.
func (r *residency) victimRegion(c int32, out []Key) ([]Key, int) {
	for g := r.rlrus[c].tail; g != nilIdx; {
		rg := &r.regs[g]
		prev := rg.prev
		if r.regionPinned(g) {
			g = prev
			continue
		}
		if r.open[rg.tenant] == g {
			r.open[rg.tenant] = nilIdx
		}
		if rg.live == 0 {
			// An open region whose chunks all expired or were deleted: retire it, go on.
			r.retire(g)
			g = prev
			continue
		}
		before := len(out)
		for _, m := range rg.members {
			if r.isMember(g, m) {
				out = append(out, r.ents[m.i].key)
			}
		}
		for _, k := range out[before:] {
			r.remove(k) // the last one retires g
		}
		return out, len(out) - before
	}
	return out, 0
}

// regionPinned reports whether a running request has locked a chunk of region g, or a
// chunk of it is still being stored.
func (r *residency) regionPinned(g int32) bool {
	for _, m := range r.regs[g].members {
		if e := &r.ents[m.i]; r.isMember(g, m) && (e.pins > 0 || e.pending) {
			return true
		}
	}
	return false
}
