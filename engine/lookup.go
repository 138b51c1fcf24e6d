package engine

import (
	"github.com/rbctl/rbctl/placement"
)

// Lookups: ExistsMany (pipelined over groups of keys), MetadataPrefix, UnlockMany, Lookup.

func (e *Engine) existsMany(keys []Key, lock bool) []bool {
	out := make([]bool, len(keys))
	hits := 0
	e.mu.Lock()
	for b := 0; b < len(keys); b += existsGroup {
		n := min(existsGroup, len(keys)-b)
		hits += e.existsGroup(keys[b:b+n], out[b:b+n], lock)
	}
	e.mu.Unlock()
	e.st.lookups.Add(int64(len(keys)))
	e.st.lookupHits.Add(int64(hits))
	e.observe(keys, out, placement.Lookup)
	return out
}

// existsGroup is the number of keys existsMany looks up in one pipelined group.
const existsGroup = 64

// existsGroup sets out[i] for up to existsGroup keys and returns the number of hits. It
// works in passes over the group so that the cache misses of different keys overlap: the
// home cells first, then the probe to the first fingerprint match and its slot record,
// then the candidate's arena record, and only then the (now cached) key comparisons. The
// result is exactly find's. (Caller holds e.mu.)
func (e *Engine) existsGroup(keys []Key, out []bool, lock bool) int {
	if len(keys) > existsGroup || len(out) < len(keys) {
		panic("engine: existsGroup: bad group")
	}
	var hs [existsGroup]uint64
	var pos [existsGroup]uint64
	var cand [existsGroup]int32
	t := &e.tab
	cells := t.cells
	mask := t.mask
	slotMask := t.slotMask
	fpMask := ^slotMask
	slots := e.slots
	chunks := e.keys.chunks
	var sink uint32
	// Pass 1: hash and load each home cell.
	for i := range keys {
		h := mix(keys[i].id)
		hs[i] = h
		sink += cells[h&mask]
	}
	// Pass 2: probe to the first cell that is empty or matches the fingerprint (usually the
	// home cell, now cached) and load the candidate's slot record and the caller's key.
	for i := range keys {
		h := hs[i]
		fp := t.fp(h)
		p := h & mask
		c := cells[p]
		for c != 0 && c&fpMask != fp {
			p = (p + 1) & mask
			c = cells[p]
		}
		pos[i] = p
		if c == 0 {
			cand[i] = -1
			continue
		}
		s := int32(c&slotMask) - 1
		cand[i] = s
		sink += slots[s].key
		if enc := keys[i].enc; len(enc) > 0 { // every cache line of the caller's key
			for j := 0; j < len(enc); j += 64 {
				sink += uint32(enc[j])
			}
			sink += uint32(enc[len(enc)-1])
		}
	}
	// Pass 3: load the candidate's arena record (both ends: it may straddle a cache line).
	for i := range keys {
		s := cand[i]
		if s < 0 {
			continue
		}
		ref := slots[s].key
		c := chunks[ref>>20]
		off := int(ref & (arenaChunk - 1))
		sink += uint32(c[off]) + uint32(c[min(off+47, len(c)-1)])
	}
	e.warmSink = sink
	// Pass 4: compare; a mismatching candidate continues find's probe past it.
	hits := 0
	for i := range keys {
		if cand[i] < 0 {
			continue // the probe reached an empty cell: find would return -1
		}
		if s := e.findAt(keys[i], t.fp(hs[i]), pos[i]); s >= 0 && e.slots[s].state == stLive {
			out[i] = true
			hits++
			if lock {
				e.slots[s].locks++
			}
		}
	}
	return hits
}

func (e *Engine) metadataPrefix(keys []Key, lock bool) []EntryMeta {
	var out []EntryMeta
	e.mu.Lock()
	for _, k := range keys {
		s := e.find(k)
		if s < 0 || e.slots[s].state != stLive {
			break
		}
		if lock {
			e.slots[s].locks++
		}
		out = append(out, e.metaOf(s))
	}
	e.mu.Unlock()
	e.st.lookups.Add(int64(len(keys)))
	e.st.lookupHits.Add(int64(len(out)))
	if e.obs != nil {
		e.observe(keys[:len(out)], nil, placement.Lookup)
	}
	return out
}

func (e *Engine) unlockMany(keys []Key) {
	e.mu.Lock()
	for _, k := range keys {
		if s := e.find(k); s >= 0 && e.slots[s].locks > 0 {
			e.slots[s].locks--
		}
	}
	e.mu.Unlock()
}

func (e *Engine) lookup(k Key) (EntryMeta, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.find(k)
	if s < 0 || e.slots[s].state != stLive {
		return EntryMeta{}, false
	}
	return e.metaOf(s), true
}
