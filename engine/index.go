package engine

// The index keeps one 40-byte record per slot (preallocated for max_slots), an
// open-addressing table of slot numbers keyed by identity (linear probing, backward-shift
// deletion), and the keys in a chunked arena in a compact encoding. docs/engine.md gives the
// byte budget per entry.

// Slot states.
const (
	stFree     uint8 = iota // on a free list or never used (>= nextSlot)
	stInflight              // reserved by a put whose write has not completed
	stLive                  // indexed
	stPending               // freed, waiting for a batched Deallocate before reuse
)

// Slot record flags.
const (
	flHasCRC   uint8 = 1 << iota
	flCanceled       // in-flight put was deleted; free the slot when the write ends
	flHasMeta        // ObjMeta in Engine.metas
	flTouched        // mutated while a checkpoint snapshot is being taken (in e.touched)
)

type slotRec struct {
	id     uint64 // slot identity
	key    uint32 // arena reference of the compact key
	size   uint32 // payload bytes
	crc    uint32 // CRC-32C of the payload when flHasCRC
	locks  uint32 // lock reference count
	stamp  uint32 // insertion order (v1 checkpoint writes entries in this order)
	handle int16  // placement handle the slot was last written with
	state  uint8
	flags  uint8
	ixc    uint32 // checkpoint bytes charged to the bound slot (room.go)
}

// ---- arena ----

const arenaChunk = 1 << 20

// arena stores compact key records in 1 MiB chunks; a reference is chunk<<20 | offset.
// Freed records are reused by exact length.
type arena struct {
	chunks [][]byte
	free   map[int][]uint32
	used   int64
}

func newArena() *arena { return &arena{free: map[int][]uint32{}} }

func (a *arena) put(rec []byte) uint32 {
	n := len(rec)
	a.used += int64(n)
	if l := a.free[n]; len(l) > 0 {
		ref := l[len(l)-1]
		a.free[n] = l[:len(l)-1]
		copy(a.bytes(ref), rec)
		return ref
	}
	if len(a.chunks) == 0 {
		a.chunks = append(a.chunks, make([]byte, 0, 4096)) // small caches stay small
	}
	ci := len(a.chunks) - 1
	if len(a.chunks[ci])+n > arenaChunk {
		a.chunks = append(a.chunks, make([]byte, 0, arenaChunk))
		ci++
	}
	off := len(a.chunks[ci])
	a.chunks[ci] = append(a.chunks[ci], rec...)
	return uint32(ci)<<20 | uint32(off)
}

func (a *arena) bytes(ref uint32) []byte {
	c := a.chunks[ref>>20]
	off := int(ref & (arenaChunk - 1))
	return c[off:]
}

func (a *arena) record(ref uint32) []byte {
	b := a.bytes(ref)
	return b[:keyRecordLen(b)]
}

func (a *arena) release(ref uint32) {
	n := len(a.record(ref))
	a.used -= int64(n)
	a.free[n] = append(a.free[n], ref)
}

// ---- hash table ----

// table maps identities to slot numbers. A cell holds slot+1 in its low `shift` bits (0 =
// empty) and a fingerprint of the identity in the remaining high bits, so probes past
// other keys rarely touch their slot records.
type table struct {
	cells    []uint32
	n        int
	mask     uint64
	shift    uint32 // bits for slot+1
	slotMask uint32
	touched  uint32 // keeps touch's loads from being optimized away
}

func newTable(maxSlots int64) table {
	shift := uint32(1)
	for int64(1)<<shift <= maxSlots+1 {
		shift++
	}
	t := table{cells: make([]uint32, 1024), mask: 1023, shift: shift, slotMask: uint32(1<<shift - 1)}
	if shift >= 32 {
		t.shift, t.slotMask = 32, ^uint32(0)
	}
	return t
}

// fp is the identity fingerprint stored with a cell (0 bits when slots need all 32).
func (t *table) fp(h uint64) uint32 {
	if t.shift >= 32 {
		return 0
	}
	return uint32(h>>40) >> t.shift << t.shift
}

func mix(id uint64) uint64 {
	id ^= id >> 33
	id *= 0xff51afd7ed558ccd
	id ^= id >> 33
	return id
}

// ---- lookups in the table (callers hold e.mu) ----

func (e *Engine) find(k Key) int32 {
	t := &e.tab
	h := mix(k.id)
	return e.findAt(k, t.fp(h), h&t.mask)
}

// findAt is find's probe loop started at cell i (the key's home cell or a cell between it
// and the key's cell), with fp = e.tab.fp(mix(k.id)).
func (e *Engine) findAt(k Key, fp uint32, i uint64) int32 {
	t := &e.tab
	fpMask := ^t.slotMask
	for {
		c := t.cells[i]
		if c == 0 {
			return -1
		}
		if c&fpMask == fp {
			s := int32(c&t.slotMask) - 1
			r := &e.slots[s]
			if r.id == k.id && keyEqual(e.keys.bytes(r.key), k.enc, e.prefixes.strs, e.salts.strs) {
				return s
			}
		}
		i = (i + 1) & t.mask
	}
}

// touch loads the home cell of each entry that carries its identity, in a loop whose loads
// do not wait for each other, so that the CPU has many cache misses in flight at once; the
// probes of find and insert that follow then find those cells cached. At 4M entries find's
// probe was a quarter of recovery's CPU, one miss at a time.
func (t *table) touch(ents []ckptEntry) {
	var x uint32
	for i := range ents {
		if ents[i].hasID {
			x += t.cells[mix(ents[i].id)&t.mask]
		}
	}
	t.touched += x
}

// reserve sizes an empty table for n keys at once, so that recovery's inserts do not
// rehash it at every doubling (a million keys: ten rehashes).
func (t *table) reserve(n int) {
	if t.n != 0 {
		return
	}
	size := len(t.cells)
	for (n+1)*4 > size*3 {
		size *= 2
	}
	if size != len(t.cells) {
		t.cells = make([]uint32, size)
		t.mask = uint64(size - 1)
	}
}

func (e *Engine) cellSlot(c uint32) int32 { return int32(c&e.tab.slotMask) - 1 }

func (e *Engine) tabInsert(s int32) {
	t := &e.tab
	if (t.n+1)*4 > len(t.cells)*3 {
		old := t.cells
		t.cells = make([]uint32, len(old)*2)
		t.mask = uint64(len(t.cells) - 1)
		for _, c := range old {
			if c != 0 {
				j := mix(e.slots[e.cellSlot(c)].id) & t.mask
				for t.cells[j] != 0 {
					j = (j + 1) & t.mask
				}
				t.cells[j] = c
			}
		}
	}
	h := mix(e.slots[s].id)
	j := h & t.mask
	for t.cells[j] != 0 {
		j = (j + 1) & t.mask
	}
	t.cells[j] = t.fp(h) | uint32(s+1)
	t.n++
}

func (e *Engine) tabDelete(s int32) {
	t := &e.tab
	i := mix(e.slots[s].id) & t.mask
	for e.cellSlot(t.cells[i]) != s {
		if t.cells[i] == 0 {
			return
		}
		i = (i + 1) & t.mask
	}
	t.cells[i] = 0
	t.n--
	j := i
	for {
		j = (j + 1) & t.mask
		c := t.cells[j]
		if c == 0 {
			return
		}
		home := mix(e.slots[e.cellSlot(c)].id) & t.mask
		if (j-home)&t.mask >= (j-i)&t.mask {
			t.cells[i] = c
			t.cells[j] = 0
			i = j
		}
	}
}

// bind puts key k into slot s (state set by caller) and the table.
// bind indexes k at slot s, charging cost checkpoint bytes (entryCost) to the room.
func (e *Engine) bind(s int32, k Key, cost int64) {
	var buf [96]byte
	e.bindRec(s, k, cost, encodeKey(buf[:0], k.enc, e.prefixes, e.salts))
}

// bindRec is bind with k's compact record already encoded (interning done).
func (e *Engine) bindRec(s int32, k Key, cost int64, rec []byte) {
	r := &e.slots[s]
	r.id = k.id
	r.key = e.keys.put(rec)
	r.ixc = uint32(min(cost, 1<<32-1))
	e.ixUsed += e.charge(int64(r.ixc))
	e.tabInsert(s)
}

// unbind removes slot s's key from the table and arena.
func (e *Engine) unbind(s int32) {
	e.tabDelete(s)
	if pre, salt, ok := recordIDs(e.keys.record(e.slots[s].key)); ok {
		e.prefixes.release(uint32(pre))
		if salt > 0 {
			e.salts.release(uint32(salt - 1))
		}
	}
	e.ixUsed -= e.charge(int64(e.slots[s].ixc))
	e.slots[s].ixc = 0
	e.keys.release(e.slots[s].key)
	if e.slots[s].flags&flHasMeta != 0 {
		delete(e.metas, s)
	}
	e.slots[s].flags &= flTouched
	e.slots[s].locks = 0
}
