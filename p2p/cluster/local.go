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
// counters and a pending set; publish turns the pending bits into deltas.
type localFilter struct {
	mu        sync.Mutex
	held      map[uint64]struct{}
	counts    *countingFilter
	published *bitFilter
	pending   map[uint32]struct{}
	version   uint64
	resized   bool // the geometry changed: the next publish is a whole filter
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

func (l *localFilter) mark(pos uint32) { l.pending[pos] = struct{}{} }

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
	for id := range l.held {
		l.counts.add(id, func(uint32) {})
	}
	l.pending = map[uint32]struct{}{}
	l.resized = true
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
	if l.resized {
		l.resized = false
		l.published = l.counts.snapshot()
		l.pending = map[uint32]struct{}{}
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
