package engine

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rbctl/rbctl/blockdev"
)

// Engine is an open raw-block cache. All methods are safe for concurrent use.
type Engine struct {
	cfg    Config
	dev    blockdev.Device
	layout Layout
	notify chan struct{}
	now    func() time.Time
	obs    AccessObserver
	direct bool
	lbs    int64 // transfer alignment (block_align)

	mu        sync.Mutex
	slots     []slotRec
	tab       table
	keys      *arena
	prefixes  *interner
	salts     *interner
	metas     map[int32]*ObjMeta
	nextSlot  int64
	stamp     uint32
	live      int64
	inflight  int64
	alloc     allocator
	pending   []int32 // freed slots awaiting Deallocate
	dealloc   int64   // slots taken from pending by a Deallocate in progress
	bySalt    map[string]int64
	byHandle  map[blockdev.Placement]int64
	dirty     uint64 // mutations since open
	persisted uint64 // dirty value captured by the last written checkpoint
	firstDirt time.Time
	snapOn    bool
	touched   []int32

	ckptMu sync.Mutex // one checkpoint at a time
	seq    uint64
	seqPub atomic.Uint64 // seq, readable without ckptMu

	ioInflight atomic.Int64
	lastIO     atomic.Int64 // unix nanos of the last completed data I/O

	st       counters
	recovery RecoveryReport
	pool     bufPool
	bufStats bufStats

	closed   atomic.Bool
	stop     chan struct{}
	kick     chan struct{}
	bg       sync.WaitGroup
	closeMu  sync.Mutex
	closeErr error
	isClosed bool

	async asyncState

	warmSink uint32
}

type counters struct {
	puts, putBytes, putSkipped, putFailed atomic.Int64
	loads, loadBytes, loadMisses, crcErrs atomic.Int64
	deletes, deletesRefused               atomic.Int64
	lookups, lookupHits                   atomic.Int64
	ckpts, ckptForced, ckptErrs           atomic.Int64
	ckptBytes, ckptEntries                atomic.Int64
	maxHold, maxHoldCPU, lastCkptDur      atomic.Int64
	deallocSlots, deallocErrs             atomic.Int64
	lastCkptErr                           atomic.Value // string
}

// ---- buffers: see bufpool.go ----

// ---- construction ----

func newEngine(dev blockdev.Device, cfg Config) (*Engine, error) {
	if dev == nil {
		return nil, fmt.Errorf("%w: nil device", ErrConfig)
	}
	lay, err := computeLayout(cfg, dev.Info().Size)
	if err != nil {
		return nil, err
	}
	info := dev.Info()
	if info.Direct && info.LogicalBlock > 0 && cfg.BlockAlign%info.LogicalBlock != 0 {
		return nil, fmt.Errorf("%w: BlockAlign (block_align) %d is not a multiple of the device's logical block size %d; use block_align %d", ErrConfig, cfg.BlockAlign, info.LogicalBlock, info.LogicalBlock)
	}
	e := &Engine{
		cfg:      cfg,
		dev:      dev,
		layout:   lay,
		notify:   make(chan struct{}, 1),
		now:      cfg.Now,
		direct:   info.Direct,
		lbs:      int64(cfg.BlockAlign),
		slots:    make([]slotRec, lay.MaxSlots),
		tab:      newTable(lay.MaxSlots),
		keys:     newArena(),
		prefixes: newInterner(),
		salts:    newInterner(),
		metas:    map[int32]*ObjMeta{},
		bySalt:   map[string]int64{},
		byHandle: map[blockdev.Placement]int64{},
		stop:     make(chan struct{}),
		kick:     make(chan struct{}, 1),
	}
	if e.now == nil {
		e.now = time.Now
	}
	e.obs = cfg.Observer
	if e.obs == nil {
		if o, ok := cfg.Placer.(AccessObserver); ok {
			e.obs = o
		}
	}
	var groupSlots int64
	if cfg.SlotGroupBytes > 0 {
		groupSlots = max(1, cfg.SlotGroupBytes/cfg.SlotBytes)
	}
	e.alloc = newAllocator(lay.MaxSlots, cfg.SlotAffinity, groupSlots)
	for i := range e.slots {
		e.slots[i].next = -1
		e.slots[i].handle = -1
	}
	e.pool = newBufPool(int(cfg.SlotBytes), cfg.StoreWorkers+cfg.LoadWorkers+2)
	e.st.lastCkptErr.Store("")
	e.bufStats.lastErr.Store("")
	e.recovery.Container = -1
	e.async.efd = -1
	return e, nil
}

func (e *Engine) start() {
	e.startAsync()
	if e.cfg.Periodic && !e.cfg.ReadOnly {
		e.bg.Add(1)
		go e.checkpointLoop()
	}
}

func format(dev blockdev.Device, cfg Config) (*Engine, error) {
	if cfg.ReadOnly {
		return nil, fmt.Errorf("%w: cannot format with ReadOnly set", ErrReadOnly)
	}
	e, err := newEngine(dev, cfg)
	if err != nil {
		return nil, err
	}
	e.setupBuffers()
	ok := false
	defer func() {
		if !ok {
			e.releaseBuffers()
		}
	}()
	// Zero both container headers first so an older cache's higher seq cannot win.
	blk, err := blockdev.Alloc(int(e.lbs))
	if err != nil {
		return nil, err
	}
	defer blockdev.Free(blk)
	for _, off := range e.layout.ContainerOffset {
		if err := blockdev.WriteAt(dev, blk, off, cfg.MetadataHandle); err != nil {
			return nil, fmt.Errorf("format: clearing metadata container at %d: %w", off, err)
		}
	}
	if err := dev.Flush(); err != nil {
		return nil, fmt.Errorf("format: flush: %w", err)
	}
	e.dirty = 1 // the empty state has never been written
	if err := e.checkpoint(true, false); err != nil {
		return nil, fmt.Errorf("format: writing the initial checkpoint: %w", err)
	}
	e.recovery.Container = 0
	e.recovery.Seq = e.seq
	e.recovery.Format = cfg.CheckpointFormat
	e.start()
	ok = true
	return e, nil
}

// ---- index helpers (callers hold e.mu) ----

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
func (e *Engine) bind(s int32, k Key) {
	var buf [96]byte
	rec := encodeKey(buf[:0], k.enc, e.prefixes, e.salts)
	r := &e.slots[s]
	r.id = k.id
	r.key = e.keys.put(rec)
	e.tabInsert(s)
}

// unbind removes slot s's key from the table and arena.
func (e *Engine) unbind(s int32) {
	e.tabDelete(s)
	e.keys.release(e.slots[s].key)
	if e.slots[s].flags&flHasMeta != 0 {
		delete(e.metas, s)
	}
	e.slots[s].flags &= flTouched
	e.slots[s].locks = 0
}

func (e *Engine) markDirty(s int32) {
	if e.dirty == e.persisted {
		e.firstDirt = e.now()
	}
	e.dirty++
	if e.snapOn && e.slots[s].flags&flTouched == 0 {
		e.slots[s].flags |= flTouched
		e.touched = append(e.touched, s)
	}
	if e.cfg.ForceAfterOps > 0 && e.dirty-e.persisted >= uint64(e.cfg.ForceAfterOps) {
		select {
		case e.kick <- struct{}{}:
		default:
		}
	}
}

func (e *Engine) keyOf(s int32) Key {
	r := &e.slots[s]
	enc, _ := decodeKey(e.keys.bytes(r.key), e.prefixes.strs, e.salts.strs)
	return Key{enc: enc, id: r.id, ns: e.cfg.Namespace}
}

func (e *Engine) metaOf(s int32) EntryMeta {
	r := &e.slots[s]
	m := EntryMeta{
		Offset:      e.layout.DataBase + int64(s)*e.cfg.SlotBytes,
		Size:        int(r.size),
		Slot:        uint32(s),
		Handle:      blockdev.Placement(r.handle),
		Checksum:    r.crc,
		HasChecksum: r.flags&flHasCRC != 0,
		Locks:       r.locks,
	}
	if r.flags&flHasMeta != 0 {
		if om := e.metas[s]; om != nil {
			m.Shape, m.Dtype, m.Fmt, m.CachedPositions = om.Shape, om.Dtype, om.Fmt, om.CachedPositions
		}
	}
	return m
}

func (e *Engine) slotOff(s int32) int64 { return e.layout.DataBase + int64(s)*e.cfg.SlotBytes }

func (e *Engine) observe(keys []Key, hits []bool, ev AccessEvent) {
	if e.obs == nil {
		return
	}
	for i, k := range keys {
		if hits == nil || hits[i] {
			e.obs.Observe(k, ev)
		}
	}
}

func (e *Engine) ioStart() { e.ioInflight.Add(1) }
func (e *Engine) ioDone()  { e.ioInflight.Add(-1); e.lastIO.Store(e.now().UnixNano()) }
func (e *Engine) maxBatch() int {
	n := int((64 << 20) / e.cfg.SlotBytes)
	return max(1, min(e.cfg.QueueDepth, n))
}

func (e *Engine) usable() error {
	if e.closed.Load() {
		return ErrClosed
	}
	return nil
}

// ---- put ----

type putJob struct {
	idx  int
	slot int32
	buf  []byte
	crc  uint32
}

func (e *Engine) putMany(keys []Key, payloads [][]byte, metas []*ObjMeta) (PutResult, error) {
	if len(keys) != len(payloads) || (metas != nil && len(metas) != len(keys)) {
		return PutResult{}, fmt.Errorf("%w: PutMany got %d keys, %d payloads, %d metas", ErrConfig, len(keys), len(payloads), len(metas))
	}
	res := PutResult{Results: make([]bool, len(keys))}
	if err := e.usable(); err != nil {
		return res, err
	}
	if e.cfg.ReadOnly {
		return res, ErrReadOnly
	}
	handles := make([]blockdev.Placement, len(keys))
	for i, k := range keys {
		handles[i] = blockdev.NoPlacement
		if e.cfg.Placer != nil {
			handles[i] = e.cfg.Placer.Place(WriteInfo{Key: k, Size: len(payloads[i])})
		}
	}
	maxPayload := e.cfg.SlotBytes - int64(e.cfg.HeaderBytes)
	var dup map[string]int
	if len(keys) > 1 {
		dup = make(map[string]int, len(keys))
	}
	dupOf := make([]int, len(keys))
	var firstErr error
	todo := make([]int, 0, len(keys))
	for i := range keys {
		dupOf[i] = -1
		if dup != nil {
			if j, ok := dup[keys[i].enc]; ok {
				dupOf[i] = j
				continue
			}
			dup[keys[i].enc] = i
		}
		todo = append(todo, i)
	}
	for attempt := 0; attempt < 2 && len(todo) > 0; attempt++ {
		var jobs []putJob
		var noSlot []int
		e.mu.Lock()
		for _, i := range todo {
			k := keys[i]
			if int64(len(payloads[i])) > maxPayload || len(payloads[i]) == 0 || len(k.enc) > 65535 {
				e.st.putFailed.Add(1)
				continue
			}
			if s := e.find(k); s >= 0 {
				if e.slots[s].state == stLive {
					res.Results[i] = true
					e.st.putSkipped.Add(1)
				} else {
					e.st.putFailed.Add(1)
				}
				continue
			}
			s := e.allocSlot(handles[i])
			if s < 0 {
				noSlot = append(noSlot, i)
				continue
			}
			r := &e.slots[s]
			r.state = stInflight
			r.size = uint32(len(payloads[i]))
			r.handle = int16(handles[i])
			r.flags &= flTouched
			r.locks = 0
			e.bind(s, k)
			e.inflight++
			jobs = append(jobs, putJob{idx: i, slot: s})
		}
		retry := len(noSlot) > 0 && len(e.pending) > 0 && attempt == 0
		e.mu.Unlock()
		if err := e.writeJobs(keys, payloads, metas, jobs, handles, &res); err != nil && firstErr == nil {
			firstErr = err
		}
		todo = todo[:0]
		if retry {
			e.flushDeallocs(true)
			todo = append(todo, noSlot...)
		} else {
			e.st.putFailed.Add(int64(len(noSlot)))
		}
	}
	for i, j := range dupOf {
		if j >= 0 {
			res.Results[i] = res.Results[j]
		}
	}
	if e.obs != nil {
		for _, i := range res.Stored {
			e.obs.Observe(keys[i], AccessStore)
		}
	}
	return res, firstErr
}

func (e *Engine) writeJobs(keys []Key, payloads [][]byte, metas []*ObjMeta, jobs []putJob, handles []blockdev.Placement, res *PutResult) error {
	var firstErr error
	hb := e.cfg.HeaderBytes
	for len(jobs) > 0 {
		n := min(len(jobs), e.maxBatch())
		batch := jobs[:n]
		jobs = jobs[n:]
		ops := make([]blockdev.Op, 0, n)
		var prepErr error
		for j := range batch {
			b, err := e.pool.get()
			if err != nil {
				prepErr = err
				break
			}
			p := payloads[batch[j].idx]
			total := roundUp(int64(hb+len(p)), e.lbs)
			b = b[:total]
			copy(b[hb:], p)
			clear(b[hb+len(p):])
			h := slotHeader{Identity: keys[batch[j].idx].id, Len: uint64(len(p))}
			if e.cfg.PayloadChecksum {
				h.HasCRC = true
				h.CRC = payloadCRC(p)
				batch[j].crc = h.CRC
			}
			encodeSlotHeader(b[:hb], h)
			batch[j].buf = b
			ops = append(ops, blockdev.Op{Write: true, Off: e.slotOff(batch[j].slot), Buf: b, Handle: handles[batch[j].idx]})
		}
		var err error
		if prepErr != nil {
			err = prepErr
		} else {
			e.ioStart()
			err = e.dev.Submit(ops)
			e.ioDone()
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
		e.mu.Lock()
		for j := range batch {
			s := batch[j].slot
			r := &e.slots[s]
			ok := prepErr == nil && ops[j].Err == nil
			e.inflight--
			if !ok || r.flags&flCanceled != 0 {
				e.unbind(s)
				e.freeSlot(s)
				if !ok {
					e.st.putFailed.Add(1)
				}
				continue
			}
			r.state = stLive
			e.stamp++
			r.stamp = e.stamp
			if e.cfg.PayloadChecksum {
				r.flags |= flHasCRC
				r.crc = batch[j].crc
			}
			i := batch[j].idx
			if metas != nil && metas[i] != nil {
				r.flags |= flHasMeta
				e.metas[s] = metas[i]
			}
			e.live++
			e.bySalt[keys[i].CacheSalt()] += e.cfg.SlotBytes
			e.byHandle[blockdev.Placement(r.handle)]++
			e.markDirty(s)
			res.Results[i] = true
			res.Stored = append(res.Stored, i)
			e.st.puts.Add(1)
			e.st.putBytes.Add(int64(len(payloads[i])))
		}
		e.mu.Unlock()
		for j := range batch {
			e.pool.put(batch[j].buf)
		}
	}
	return firstErr
}

// ---- load ----

type loadJob struct {
	idx    int
	slot   int32
	size   int
	crc    uint32
	hasCRC bool
	id     uint64
	buf    []byte // bounce buffer (nil: reading straight into the caller's buffer)
	hdr    bool   // buf holds header + payload
}

func aligned(b []byte, a int64) bool {
	return len(b) > 0 && uintptr(unsafe.Pointer(&b[0]))%uintptr(a) == 0
}

func (e *Engine) loadManyInto(keys []Key, bufs [][]byte) ([]bool, error) {
	out := make([]bool, len(keys))
	if len(bufs) != len(keys) {
		return out, fmt.Errorf("%w: LoadManyInto got %d keys and %d buffers", ErrConfig, len(keys), len(bufs))
	}
	if err := e.usable(); err != nil {
		return out, err
	}
	jobs := make([]loadJob, 0, len(keys))
	e.mu.Lock()
	for i, k := range keys {
		s := e.find(k)
		if s < 0 || e.slots[s].state != stLive {
			continue
		}
		r := &e.slots[s]
		if int(r.size) > len(bufs[i]) {
			continue
		}
		jobs = append(jobs, loadJob{idx: i, slot: s, size: int(r.size), crc: r.crc, hasCRC: r.flags&flHasCRC != 0, id: r.id})
	}
	e.mu.Unlock()
	e.st.loadMisses.Add(int64(len(keys) - len(jobs)))
	var firstErr error
	hb := int64(e.cfg.HeaderBytes)
	for len(jobs) > 0 {
		n := min(len(jobs), e.maxBatch())
		batch := jobs[:n]
		jobs = jobs[n:]
		ops := make([]blockdev.Op, n)
		var prepErr error
		for j := range batch {
			lj := &batch[j]
			off := e.slotOff(lj.slot)
			if !lj.hasCRC {
				// Unknown checksum (v1 checkpoint without verify): read the header too and
				// check identity, length and the header's checksum when it has one.
				b, err := e.pool.get()
				if err != nil {
					prepErr = err
					break
				}
				lj.buf, lj.hdr = b[:roundUp(hb+int64(lj.size), e.lbs)], true
				ops[j] = blockdev.Op{Off: off, Buf: lj.buf, Handle: blockdev.NoPlacement}
				continue
			}
			dst := bufs[lj.idx]
			want := roundUp(int64(lj.size), e.lbs)
			if !e.direct && len(dst) >= lj.size {
				ops[j] = blockdev.Op{Off: off + hb, Buf: dst[:lj.size], Handle: blockdev.NoPlacement}
				continue
			}
			if e.direct && int64(len(dst)) >= want && aligned(dst, e.lbs) {
				ops[j] = blockdev.Op{Off: off + hb, Buf: dst[:want], Handle: blockdev.NoPlacement}
				continue
			}
			b, err := e.pool.get()
			if err != nil {
				prepErr = err
				break
			}
			lj.buf = b[:want]
			ops[j] = blockdev.Op{Off: off + hb, Buf: lj.buf, Handle: blockdev.NoPlacement}
		}
		var err error
		if prepErr != nil {
			err = prepErr
		} else {
			e.ioStart()
			err = e.dev.Submit(ops)
			e.ioDone()
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
		for j := range batch {
			lj := &batch[j]
			if prepErr == nil && ops[j].Err == nil {
				dst := bufs[lj.idx]
				ok := true
				if lj.hdr {
					h, herr := decodeSlotHeader(lj.buf[:hb])
					switch {
					case herr != nil, h.Identity != lj.id && e.cfg.Namespace == NamespaceObject, h.Len != uint64(lj.size):
						ok = false
					default:
						copy(dst, lj.buf[hb:hb+int64(lj.size)])
						if h.HasCRC && payloadCRC(dst[:lj.size]) != h.CRC {
							ok = false
						}
					}
				} else {
					if lj.buf != nil {
						copy(dst, lj.buf[:lj.size])
					}
					if payloadCRC(dst[:lj.size]) != lj.crc {
						ok = false
					}
				}
				if ok {
					out[lj.idx] = true
					e.st.loads.Add(1)
					e.st.loadBytes.Add(int64(lj.size))
				} else {
					e.st.crcErrs.Add(1)
				}
			}
			if lj.buf != nil {
				e.pool.put(lj.buf[:cap(lj.buf)])
			}
		}
	}
	e.observe(keys, out, AccessLoad)
	return out, firstErr
}

// ---- lookups ----

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
	e.observe(keys, out, AccessLookupHit)
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
		e.observe(keys[:len(out)], nil, AccessLookupHit)
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

// ---- delete ----

func (e *Engine) deleteMany(keys []Key, force bool) []bool {
	out := make([]bool, len(keys))
	if e.cfg.ReadOnly || e.closed.Load() {
		return out
	}
	flush := false
	e.mu.Lock()
	for i, k := range keys {
		s := e.find(k)
		if s < 0 {
			continue
		}
		r := &e.slots[s]
		switch r.state {
		case stInflight:
			r.flags |= flCanceled
			out[i] = true
		case stLive:
			if r.locks > 0 && !force {
				e.st.deletesRefused.Add(1)
				continue
			}
			e.bySalt[k.CacheSalt()] -= e.cfg.SlotBytes
			if e.bySalt[k.CacheSalt()] <= 0 {
				delete(e.bySalt, k.CacheSalt())
			}
			e.byHandle[blockdev.Placement(r.handle)]--
			if e.byHandle[blockdev.Placement(r.handle)] <= 0 {
				delete(e.byHandle, blockdev.Placement(r.handle))
			}
			e.unbind(s)
			e.live--
			e.markDirty(s)
			if e.cfg.DeallocateOnDelete {
				r.state = stPending
				e.pending = append(e.pending, s)
				if len(e.pending) >= e.cfg.DeallocateBatch {
					flush = true
				}
			} else {
				e.freeSlot(s)
			}
			out[i] = true
			e.st.deletes.Add(1)
		}
	}
	e.mu.Unlock()
	if flush {
		e.flushDeallocs(false)
	}
	e.observe(keys, out, AccessDelete)
	return out
}

// flushDeallocs deallocates pending freed slots (merging adjacent ones) and then returns
// them to the free lists. A failed Deallocate still frees the slots (the data is dead
// either way) and is counted.
func (e *Engine) flushDeallocs(all bool) {
	e.mu.Lock()
	if len(e.pending) == 0 || (!all && len(e.pending) < e.cfg.DeallocateBatch) {
		e.mu.Unlock()
		return
	}
	batch := e.pending
	e.pending = nil
	e.dealloc += int64(len(batch))
	e.mu.Unlock()
	sorted := append([]int32(nil), batch...)
	sortInt32(sorted)
	var ranges []blockdev.Range
	for _, s := range sorted {
		off := e.slotOff(s)
		if n := len(ranges); n > 0 && ranges[n-1].Off+ranges[n-1].Len == off {
			ranges[n-1].Len += e.cfg.SlotBytes
			continue
		}
		ranges = append(ranges, blockdev.Range{Off: off, Len: e.cfg.SlotBytes})
	}
	err := e.dev.Deallocate(ranges)
	if err != nil {
		e.st.deallocErrs.Add(1)
	} else {
		e.st.deallocSlots.Add(int64(len(batch)))
	}
	e.mu.Lock()
	for _, s := range batch {
		e.freeSlot(s)
	}
	e.dealloc -= int64(len(batch))
	e.mu.Unlock()
}

// ---- reporting ----

func (e *Engine) usage() Usage {
	e.mu.Lock()
	defer e.mu.Unlock()
	u := Usage{
		SlotsTotal:    e.layout.MaxSlots,
		SlotsUsed:     e.live,
		SlotsInflight: e.inflight,
		SlotsFree:     e.alloc.nfree + int64(len(e.pending)) + e.dealloc,
		SlotsPending:  int64(len(e.pending)) + e.dealloc,
		NextSlot:      e.nextSlot,
		BytesBySalt:   make(map[string]int64, len(e.bySalt)),
		SlotsByHandle: make(map[blockdev.Placement]int64, len(e.byHandle)),
	}
	if u.SlotsTotal > 0 {
		u.Fraction = float64(e.live+e.inflight) / float64(u.SlotsTotal)
	}
	for k, v := range e.bySalt {
		u.BytesBySalt[k] = v
	}
	for k, v := range e.byHandle {
		u.SlotsByHandle[k] = v
	}
	return u
}

func (e *Engine) stats() Stats {
	s := Stats{
		Puts: e.st.puts.Load(), PutBytes: e.st.putBytes.Load(), PutSkipped: e.st.putSkipped.Load(), PutFailed: e.st.putFailed.Load(),
		Loads: e.st.loads.Load(), LoadBytes: e.st.loadBytes.Load(), LoadMisses: e.st.loadMisses.Load(),
		ChecksumErrors: e.st.crcErrs.Load(),
		Deletes:        e.st.deletes.Load(), DeletesRefused: e.st.deletesRefused.Load(),
		Lookups: e.st.lookups.Load(), LookupHits: e.st.lookupHits.Load(),
		Checkpoints: e.st.ckpts.Load(), CheckpointsForced: e.st.ckptForced.Load(), CheckpointErrors: e.st.ckptErrs.Load(),
		CheckpointBytes: e.st.ckptBytes.Load(), CheckpointEntries: e.st.ckptEntries.Load(),
		MaxLockHold:        time.Duration(e.st.maxHold.Load()),
		MaxLockHoldCPU:     time.Duration(e.st.maxHoldCPU.Load()),
		LastCheckpointTime: time.Duration(e.st.lastCkptDur.Load()),
		DeallocatedSlots:   e.st.deallocSlots.Load(), DeallocateErrors: e.st.deallocErrs.Load(),
		LastCheckpointError: e.st.lastCkptErr.Load().(string),

		BufferPoolBytes:      e.bufStats.poolBytes.Load(),
		BuffersRegistered:    e.bufStats.registered.Load(),
		BufferRegisterErrors: e.bufStats.regErrs.Load(),
		BufferRegisterError:  e.bufStats.lastErr.Load().(string),
		BufferPoolMisses:     e.pool.misses.Load(),
	}
	e.mu.Lock()
	s.DirtyOps = int64(e.dirty - e.persisted)
	s.AffinityHits, s.AffinityFallbacks, s.GroupFallbacks = e.alloc.hits, e.alloc.fallbacks, e.alloc.groupFallbacks
	s.Recovery = e.recovery
	e.mu.Unlock()
	s.CheckpointSeq = e.seqPub.Load()
	return s
}

func (e *Engine) entries(fn func(Key, EntryMeta) bool) {
	type kv struct {
		k Key
		m EntryMeta
	}
	var all []kv
	e.mu.Lock()
	for s := int32(0); int64(s) < e.nextSlot; s++ {
		if e.slots[s].state == stLive {
			all = append(all, kv{e.keyOf(s), e.metaOf(s)})
		}
	}
	e.mu.Unlock()
	for _, x := range all {
		if !fn(x.k, x.m) {
			return
		}
	}
}

// ---- close ----

func (e *Engine) close(final bool) error {
	e.closeMu.Lock()
	defer e.closeMu.Unlock()
	if e.isClosed {
		return e.closeErr
	}
	e.isClosed = true
	e.stopAsync()
	e.closed.Store(true)
	close(e.stop)
	e.bg.Wait()
	var errs []error
	if !e.cfg.ReadOnly {
		e.flushDeallocs(true)
		if final && e.cfg.FinalCheckpoint {
			if err := e.checkpoint(true, true); err != nil {
				errs = append(errs, fmt.Errorf("final checkpoint: %w", err))
			}
		}
	}
	e.closeEventFD()
	if err := e.dev.Close(); err != nil {
		errs = append(errs, err)
	}
	e.releaseBuffers()
	e.closeErr = errors.Join(errs...)
	return e.closeErr
}

func sortInt32(a []int32) { slices.Sort(a) }
