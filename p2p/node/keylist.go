package node

import (
	"hash/maphash"

	"github.com/rbctl/rbctl/engine"
)

// keyList is one shard's recency order of keys for lru and fifo eviction (head = most
// recent). It holds no key: a node is the key's identity and its sum (orderSum), 24 bytes
// with its links, and 4 to 8 bytes of index; an eviction spells the key from the engine
// (spell). Holding the keys
// cost a 4M-entry node 880 MB (the recovered keys' strings, 128 B each, live for as long as
// the order; docs/engine.md "Restart time"). Its nodes live in slices and are linked by
// position, so a key costs no heap object of its own and nothing for the collector to scan.
type keyList struct {
	// cells index the nodes by their keys' sums: open addressing with linear probing, a
	// cell holding node+1 (0: empty), at most 3/4 full; 4 B a cell where a Go map of sums
	// took about 34 B a key at 4M keys.
	cells      []int32
	mask       uint64
	n          int
	ids, sums  []uint64
	prev, next []int32
	head, tail int32 // noNode when empty
	free       int32 // a free node, the rest linked through next; noNode: none
}

const noNode int32 = -1

// sumSeed keys orderSum's hash of legacy keys; a sum lives only in this process's memory.
var sumSeed = maphash.MakeSeed()

// orderSum tells keys apart in an eviction order. An object key's identity is already a
// 64-bit hash of the whole key (BLAKE2b), so it is its own sum; legacy keys of one chunk on
// several workers share their identity (the chunk hash), so theirs is a hash of the whole
// key. Two keys of one sum share one place in the order and are evicted together: for
// distinct keys that takes a 64-bit collision (about one in 2^25 at 4M keys on a shard,
// for the whole lifetime of the order), and costs a cache entry, never a write.
func orderSum(k engine.Key) uint64 {
	if !identityIsSum(k.Namespace()) {
		return maphash.String(sumSeed, k.String())
	}
	return k.Identity()
}

// identityIsSum reports whether a key of namespace ns has its identity as its sum
// (orderSum): then an order is seeded from identities alone, no key spelled.
func identityIsSum(ns engine.Namespace) bool { return ns != engine.NamespaceLegacy }

// spell returns the keys of eng that a node of identity id and sum sum stands for: one,
// or none once the key has left the cache (more only after a collision, orderSum).
func spell(eng *engine.Engine, id, sum uint64) []engine.Key {
	ks := eng.KeysOf(id)
	n := 0
	for _, k := range ks {
		if orderSum(k) == sum {
			ks[n] = k
			n++
		}
	}
	return ks[:n]
}

func newKeyList() keyList {
	return keyList{cells: make([]int32, 16), mask: 15, head: noNode, tail: noNode, free: noNode}
}

// reserve makes room for n more keys at once (a restart's seeding), so that neither the
// index nor the node slices grow key by key.
func (l *keyList) reserve(n int) {
	if n <= 0 {
		return
	}
	l.grow(l.n + n)
	l.ids = growTo(l.ids, len(l.ids)+n)
	l.sums = growTo(l.sums, len(l.sums)+n)
	l.prev = growTo(l.prev, len(l.prev)+n)
	l.next = growTo(l.next, len(l.next)+n)
}

func growTo[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s
	}
	t := make([]T, len(s), n)
	copy(t, s)
	return t
}

func (l *keyList) len() int { return l.n }

// home is where sum's probe sequence starts (sums are hashes already; the mix spreads
// identities that differ only in their high bits).
func (l *keyList) home(sum uint64) uint64 {
	sum ^= sum >> 33
	sum *= 0xff51afd7ed558ccd
	sum ^= sum >> 33
	return sum & l.mask
}

// cell returns the cell holding the node of sum, or the empty cell that ends its probe.
func (l *keyList) cell(sum uint64) uint64 {
	i := l.home(sum)
	for c := l.cells[i]; c != 0 && l.sums[c-1] != sum; c = l.cells[i] {
		i = (i + 1) & l.mask
	}
	return i
}

// find returns the node of the key of sum sum.
func (l *keyList) find(sum uint64) (int32, bool) {
	c := l.cells[l.cell(sum)]
	return c - 1, c != 0
}

// grow sizes the cells for n keys at most 3/4 full, placing the nodes held again.
func (l *keyList) grow(n int) {
	size := len(l.cells)
	for n*4 > size*3 {
		size *= 2
	}
	if size == len(l.cells) {
		return
	}
	old := l.cells
	l.cells, l.mask = make([]int32, size), uint64(size-1)
	for _, c := range old {
		if c != 0 {
			l.cells[l.cell(l.sums[c-1])] = c
		}
	}
}

// unindex empties the cell of node i, moving back the cells after it in the probe run
// that its emptiness would cut off from their homes (backward-shift deletion).
func (l *keyList) unindex(i int32) {
	j := l.cell(l.sums[i])
	for k := (j + 1) & l.mask; l.cells[k] != 0; k = (k + 1) & l.mask {
		h := l.home(l.sums[l.cells[k]-1])
		// The cell at k may move to j when its home is not in (j, k] (cyclically).
		if (k > j && (h <= j || h > k)) || (k < j && h <= j && h > k) {
			l.cells[j] = l.cells[k]
			j = k
		}
	}
	l.cells[j] = 0
	l.n--
}

// node takes a free node (or a new one) for a key the list does not hold, and indexes it;
// it is linked by the caller.
func (l *keyList) node(id, sum uint64) int32 {
	i := l.free
	if i != noNode {
		l.free = l.next[i]
		l.ids[i], l.sums[i] = id, sum
	} else {
		i = int32(len(l.ids))
		l.ids = append(l.ids, id)
		l.sums = append(l.sums, sum)
		l.prev = append(l.prev, noNode)
		l.next = append(l.next, noNode)
	}
	l.grow(l.n + 1)
	l.cells[l.cell(sum)] = i + 1
	l.n++
	return i
}

// pushFront adds a key the list does not hold as the most recent.
func (l *keyList) pushFront(id, sum uint64) {
	l.linkFront(l.node(id, sum))
}

// pushBack adds a key the list does not hold as the least recent.
func (l *keyList) pushBack(id, sum uint64) {
	i := l.node(id, sum)
	l.prev[i], l.next[i] = l.tail, noNode
	if l.tail != noNode {
		l.next[l.tail] = i
	} else {
		l.head = i
	}
	l.tail = i
}

func (l *keyList) linkFront(i int32) {
	l.prev[i], l.next[i] = noNode, l.head
	if l.head != noNode {
		l.prev[l.head] = i
	} else {
		l.tail = i
	}
	l.head = i
}

func (l *keyList) unlink(i int32) {
	p, n := l.prev[i], l.next[i]
	if p != noNode {
		l.next[p] = n
	} else {
		l.head = n
	}
	if n != noNode {
		l.prev[n] = p
	} else {
		l.tail = p
	}
}

// moveToFront makes node i the most recent.
func (l *keyList) moveToFront(i int32) {
	if l.head == i {
		return
	}
	l.unlink(i)
	l.linkFront(i)
}

// remove drops node i and frees it.
func (l *keyList) remove(i int32) {
	l.unlink(i)
	l.unindex(i)
	l.prev[i], l.next[i] = noNode, l.free
	l.free = i
}
