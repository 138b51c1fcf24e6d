package node

import "github.com/rbctl/rbctl/engine"

// keyList is one shard's recency order of keys for lru and fifo eviction (head = most
// recent), with an index by key. Its nodes live in slices and are linked by position, so a
// key costs no heap object of its own: in a container/list with a map of its elements by
// key string, 4,194,304 keys held 149 B each and two objects for the collector to scan,
// against 84 B and none here, and a 4M-entry restart seeded them for 2 s longer
// (BenchmarkEvictorSeed, docs/engine.md "Restart time").
type keyList struct {
	// at finds a key's node by its 64-bit identity (engine.Key.Identity: no pointers for the
	// collector to scan, no string to hash); a key whose identity at gives to another key
	// (legacy keys share their chunk hash across workers) is found in more instead.
	at         map[uint64]int32
	more       map[string]int32
	keys       []engine.Key
	prev, next []int32
	head, tail int32 // noNode when empty
	free       int32 // a free node, the rest linked through next; noNode: none
}

const noNode int32 = -1

func newKeyList() keyList {
	return keyList{at: map[uint64]int32{}, head: noNode, tail: noNode, free: noNode}
}

// reserve makes room for n more keys at once (a restart's seeding), so that neither the
// index nor the node slices grow key by key.
func (l *keyList) reserve(n int) {
	if n <= 0 {
		return
	}
	if len(l.at) == 0 {
		l.at = make(map[uint64]int32, n)
	}
	l.keys = growTo(l.keys, len(l.keys)+n)
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

func (l *keyList) len() int { return len(l.at) + len(l.more) }

// find returns k's node.
func (l *keyList) find(k engine.Key) (int32, bool) {
	i, ok := l.at[k.Identity()]
	if ok && l.keys[i].String() == k.String() {
		return i, true
	}
	if len(l.more) == 0 {
		return noNode, false
	}
	i, ok = l.more[k.String()]
	return i, ok
}

// node takes a free node (or a new one) for k, which the list must not hold, and indexes
// it; it is linked by the caller.
func (l *keyList) node(k engine.Key) int32 {
	i := l.free
	if i != noNode {
		l.free = l.next[i]
		l.keys[i] = k
	} else {
		i = int32(len(l.keys))
		l.keys = append(l.keys, k)
		l.prev = append(l.prev, noNode)
		l.next = append(l.next, noNode)
	}
	if _, taken := l.at[k.Identity()]; taken {
		if l.more == nil {
			l.more = map[string]int32{}
		}
		l.more[k.String()] = i
	} else {
		l.at[k.Identity()] = i
	}
	return i
}

// pushFront adds k, which the list must not hold, as the most recent.
func (l *keyList) pushFront(k engine.Key) {
	l.linkFront(l.node(k))
}

// pushBack adds k, which the list must not hold, as the least recent.
func (l *keyList) pushBack(k engine.Key) {
	i := l.node(k)
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

// holds reports whether at gives identity id to node i.
func (l *keyList) holds(id uint64, i int32) bool {
	j, ok := l.at[id]
	return ok && j == i
}

// remove drops node i and frees it.
func (l *keyList) remove(i int32) {
	l.unlink(i)
	if k := l.keys[i]; l.holds(k.Identity(), i) {
		delete(l.at, k.Identity())
	} else {
		delete(l.more, k.String())
	}
	l.keys[i] = engine.Key{} // its string is the collector's again
	l.prev[i], l.next[i] = noNode, l.free
	l.free = i
}
