package cluster

import (
	"fmt"
	"sync"
)

// maxDeltasPerPublish bounds the deltas one publish queues; more changed bits than fit in
// them are sent as one whole filter instead (a bulk load, a rebuild).
const maxDeltasPerPublish = 8

// localFilter is this node's key set: the identities it holds, their counting filter, and
// the plain filter as last published (at version). Admitted and Evicted touch only the
// counters and a pending set; publish turns the pending bits into deltas, or sends the
// whole filter when more bits are pending than its deltas carry (the pending set stops
// growing there: a start that admits 4M keys marked 30M bits into it, 6.7 s and 1 GB of
// allocations, BenchmarkLocalFilterLoad).
type localFilter struct {
	mu        sync.Mutex
	held      map[uint64]struct{}
	counts    *countingFilter
	published *bitFilter
	pending   map[uint32]struct{} // bits changed since the last publish, until whole
	version   uint64
	whole     bool // the next publish is a whole filter: the geometry changed, or too many bits did
	expected  int  // keys the geometry is sized for
	rate      float64
	maxBytes  int // the filter never grows past what peers accept
}

func newLocalFilter(expected int, rate float64, maxBytes int) (*localFilter, error) {
	g, err := sizeFilter(expected, rate)
	if err != nil {
		return nil, err
	}
	if g.bytes() > maxBytes {
		return nil, errFilterCap(g, maxBytes)
	}
	return &localFilter{held: map[uint64]struct{}{}, counts: newCountingFilter(g), published: newBitFilter(g),
		pending: map[uint32]struct{}{}, expected: expected, rate: rate, maxBytes: maxBytes}, nil
}

func errFilterCap(g geometry, max int) error {
	return fmt.Errorf("%w: the local filter needs %d bytes, cap %d", ErrFilterTooLarge, g.bytes(), max)
}

// mark notes a bit the counters changed; past what one publish's deltas carry, the next
// publish is a whole filter and no bit is noted until then.
func (l *localFilter) mark(pos uint32) {
	if l.whole {
		return
	}
	l.pending[pos] = struct{}{}
	if len(l.pending) > maxDeltasPerPublish*maxDeltaPositions {
		l.whole = true
		clear(l.pending)
	}
}

// add records id; a second add of a held id is a no-op.
func (l *localFilter) add(id uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.held[id]; ok {
		return
	}
	l.held[id] = struct{}{}
	l.counts.add(id, l.mark)
	if len(l.held) > 2*l.expected {
		l.grow()
	}
}

// addMany records ids as add does one by one, with one lock, the held set sized once and
// the counters rebuilt at most once: the geometry ends where adding them one at a time
// would have grown it (a node's start tells every key it holds).
func (l *localFilter) addMany(ids []uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.held) == 0 && len(ids) > 0 {
		l.held = make(map[uint64]struct{}, len(ids))
	}
	first := len(l.held)
	fresh := ids[:0:0]
	for _, id := range ids {
		if _, ok := l.held[id]; !ok {
			l.held[id] = struct{}{}
			fresh = append(fresh, id)
		}
	}
	// add grows when the held keys pass twice the geometry's, to twice the keys held then;
	// follow the same steps to the count held now, stopping where add's grow would (the cap).
	expected := l.expected
	for first+len(fresh) > 2*expected {
		next := 2 * (2*expected + 1) // add's grow, at 2*expected+1 keys held
		if g, err := sizeFilter(next, l.rate); err != nil || g.bytes() > l.maxBytes {
			break
		}
		expected = next
	}
	if expected == l.expected {
		l.counts.addAll(fresh, l.mark)
		return
	}
	g, _ := sizeFilter(expected, l.rate) // sized above
	l.expected, l.counts = expected, newCountingFilter(g)
	l.countHeld()
	clear(l.pending)
	l.whole = true
}

// countHeld counts every held identity into the counters (a rebuild: no bit is noted).
func (l *localFilter) countHeld() {
	buf := make([]uint64, 0, 4096)
	for id := range l.held {
		if buf = append(buf, id); len(buf) == cap(buf) {
			l.counts.addAll(buf, nil)
			buf = buf[:0]
		}
	}
	l.counts.addAll(buf, nil)
}

// remove forgets id; removing an id not held is a no-op.
func (l *localFilter) remove(id uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.held[id]; !ok {
		return
	}
	delete(l.held, id)
	l.counts.remove(id, l.mark)
}

// grow rebuilds the counters for twice the keys held, so the false-positive rate stays at
// its target; it stays put at the cap.
func (l *localFilter) grow() {
	g, err := sizeFilter(2*len(l.held), l.rate)
	if err != nil || g.bytes() > l.maxBytes {
		return
	}
	l.expected = 2 * len(l.held)
	l.counts = newCountingFilter(g)
	l.countHeld()
	clear(l.pending)
	l.whole = true
}

// publication is what one publish sends: deltas to gossip, or a whole filter to push.
type publication struct {
	deltas []delta
	full   *full
}

// publish advances the published filter to the counters and says how to tell the peers.
func (l *localFilter) publish(origin string, epoch uint64) publication {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.whole {
		l.whole = false
		l.published = l.counts.snapshot()
		clear(l.pending)
		l.version++
		return publication{full: &full{origin: origin, epoch: epoch, version: l.version, filter: l.copyPublished()}}
	}
	var changed []uint32
	for pos := range l.pending {
		if v := l.counts.get(pos); v != l.published.get(pos) {
			l.published.set(pos, v)
			p := pos
			if v {
				p |= positionValue
			}
			changed = append(changed, p)
		}
	}
	clear(l.pending)
	if len(changed) == 0 {
		return publication{}
	}
	if len(changed) > maxDeltasPerPublish*maxDeltaPositions {
		l.version++
		return publication{full: &full{origin: origin, epoch: epoch, version: l.version, filter: l.copyPublished()}}
	}
	var out publication
	for len(changed) > 0 {
		n := min(len(changed), maxDeltaPositions)
		out.deltas = append(out.deltas, delta{origin: origin, epoch: epoch, from: l.version, positions: changed[:n]})
		changed = changed[n:]
		l.version++
	}
	return out
}

// snapshot is the published filter at its version, for a peer that syncs in full.
func (l *localFilter) snapshot(origin string, epoch uint64) full {
	l.mu.Lock()
	defer l.mu.Unlock()
	return full{origin: origin, epoch: epoch, version: l.version, filter: l.copyPublished()}
}

func (l *localFilter) copyPublished() *bitFilter {
	f := newBitFilter(l.published.geometry)
	copy(f.words, l.published.words)
	return f
}

// publishedVersion is the version peers should hold.
func (l *localFilter) publishedVersion() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.version
}

// stats reads the figures Stats reports.
func (l *localFilter) stats() (keys int, g geometry, ones int, version uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held), l.published.geometry, l.published.ones(), l.version
}
