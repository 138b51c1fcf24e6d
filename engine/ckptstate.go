package engine

import (
	"fmt"
	"runtime"
	"sync"
)

// ckptState is a decoded checkpoint of either format.
type ckptState struct {
	format      CheckpointFormat
	version     int64
	devicePath  string
	hasDevPath  bool
	capacity    int64
	blockAlign  int64
	headerBytes int64
	slotBytes   int64
	metaTotal   int64
	metaMagic   string
	metaVersion int64
	dataBase    int64
	nextSlot    int64
	legacyNS    bool
	hasNS       bool
	seq         uint64 // compact v2: the seq the writer gave this checkpoint (CRC-covered)
	hasSeq      bool
	entries     []ckptEntry
	// A compact checkpoint decoded lazily (decodeCompactLazy): with unbuilt, entries is
	// empty until materialize builds it; with lazy, each entry's key is still the compact
	// record at payload[recOff:] over the dictionaries pre and salts, until fillKeys. n is
	// the number of entries either way (count).
	unbuilt, lazy bool
	n             int
	payload       []byte
	entOff        int // where the entries start in payload
	pre, salts    []string
}

type ckptEntry struct {
	key    string
	id     uint64
	hasID  bool
	offset int64
	size   int64
	crc    uint32
	hasCRC bool
	handle int16
	meta   *ObjMeta
	recOff int // where the compact key record is in the payload, until fillKeys sets key
}

// count is the number of entries, built or not.
func (st *ckptState) count() int {
	if st.unbuilt {
		return st.n
	}
	return len(st.entries)
}

// materialize builds the entries of a lazily decoded compact checkpoint (their keys still
// compact records: fillKeys).
func (st *ckptState) materialize() {
	if !st.unbuilt {
		return
	}
	full, err := decodeCompactWalk(st.payload, true)
	if err != nil { // decodeCompactLazy decoded these bytes
		panic("engine: a compact checkpoint that decoded fails to decode again: " + err.Error())
	}
	st.entries, st.unbuilt = full.entries, false
}

// fillKeys builds the entries (materialize) and spells out their keys.
func (st *ckptState) fillKeys() {
	st.materialize()
	if !st.lazy {
		return
	}
	st.lazy = false
	st.spellKeys(st.entries)
	st.payload = nil
}

// spellKeys sets the key of every entry of ents from its compact record, the entries split
// among up to GOMAXPROCS goroutines (decodeKey reads only the record and the dictionaries).
func (st *ckptState) spellKeys(ents []ckptEntry) {
	n := len(ents)
	parts := min(runtime.GOMAXPROCS(0), max(1, n/fillKeysMin))
	var wg sync.WaitGroup
	for w := range parts {
		part := ents[w*n/parts : (w+1)*n/parts]
		wg.Go(func() {
			for i := range part {
				ce := &part[i]
				ce.key, _ = decodeKey(st.payload[ce.recOff:], st.pre, st.salts) // checked by decodeCompactLazy
			}
		})
	}
	wg.Wait()
}

// eachChunk calls fn with the entries in order, keys spelled out, up to chunk at a time.
// A lazily decoded compact checkpoint is built chunk by chunk into one reused slice, so a
// recovery of millions of entries never holds them all as ckptEntry values (nor faults in
// the memory for them); fn must not keep the slice.
func (st *ckptState) eachChunk(chunk int, fn func([]ckptEntry)) {
	if !st.unbuilt {
		st.fillKeys()
		fn(st.entries)
		return
	}
	buf := make([]ckptEntry, 0, min(chunk, st.n))
	cur := entryCursor{b: st.payload, off: st.entOff, dataBase: st.dataBase, slotBytes: st.slotBytes, npre: len(st.pre), nsalt: len(st.salts)}
	for i := 0; i < st.n; {
		buf = buf[:0]
		for ; i < st.n && len(buf) < chunk; i++ {
			ce, err := cur.next(uint64(i), uint64(st.n))
			if err != nil { // decodeCompactLazy decoded these bytes
				panic("engine: a compact checkpoint that decoded fails to decode again: " + err.Error())
			}
			buf = append(buf, ce)
		}
		st.spellKeys(buf)
		fn(buf)
	}
}

// fillKeysMin is the fewest entries worth a goroutine of their own.
const fillKeysMin = 16384

// decodeCheckpointLazy is decodeCheckpoint leaving a compact checkpoint's keys to fillKeys.
func decodeCheckpointLazy(b []byte) (*ckptState, error) {
	if len(b) >= 8 && string(b[:8]) == compactMagic {
		return decodeCompactLazy(b)
	}
	return decodeCheckpoint(b)
}

// decodeCheckpoint decodes a container payload of either format, told apart by the compact
// magic or a leading JSON object.
func decodeCheckpoint(b []byte) (*ckptState, error) {
	if len(b) >= 8 && string(b[:8]) == compactMagic {
		return decodeCompact(b)
	}
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	if i < len(b) && b[i] == '{' {
		return decodeV1(b)
	}
	return nil, fmt.Errorf("%w: checkpoint payload is neither compact (%q) nor v1 JSON", ErrCorrupt, compactMagic)
}
