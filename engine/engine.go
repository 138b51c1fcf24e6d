package engine

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/placement"
)

// Engine is an open raw-block cache. All methods are safe for concurrent use.
type Engine struct {
	cfg     Config
	dev     blockdev.Device
	layout  Layout
	notify  chan struct{}
	now     func() time.Time
	obs     placement.Observer // Config.Placer when it learns from accesses
	direct  bool
	handles int   // dev.Info().Handles: placement handles the device takes (0: it ignores them)
	lbs     int64 // transfer alignment (block_align)
	// vectored: the device takes write ops with a Tail (blockdev.WritesTail) and slot
	// headers end on a block_align boundary, so aligned payloads are written in place.
	vectored bool

	mu       sync.Mutex
	slots    []slotRec
	tab      table
	keys     *arena
	prefixes *interner
	salts    *interner
	metas    map[int32]*ObjMeta
	rescuing map[int32]struct{} // during recovery: slots indexed from the rejected container (rescue.go)
	stamp    uint32
	live     int64
	inflight int64
	alloc    SlotAllocator // and next_slot
	pending  []int32       // freed slots awaiting Deallocate (dealloc.go)
	dealloc  int64         // slots taken from pending by a Deallocate in progress
	// pendingAged is how many of the oldest pending slots were already pending at the
	// deallocator's last age tick.
	pendingAged int
	// deallocDone is signalled (on mu) when a Deallocate batch has freed its slots.
	deallocDone sync.Cond
	bySalt      map[string]int64
	byHandle    map[placement.Handle]int64
	dirty       uint64 // mutations since open
	persisted   uint64 // dirty value captured by the last written checkpoint
	firstDirt   time.Time
	snapOn      bool
	touched     []int32
	// Checkpoint room (room.go): budget, reserve per free slot, bytes charged, digits of the
	// largest slot offset (v1 entries spell offsets out).
	ixBudget, ixPerSlot, ixUsed int64
	ixOffDigits                 int

	ckptMu sync.Mutex // one checkpoint at a time
	seq    uint64
	seqPub atomic.Uint64 // seq, readable without ckptMu
	gen    atomic.Uint64 // the last put generation in a slot header's key record (scan.go)
	// ckptNotify is NotifyCheckpoint's function.
	ckptNotify atomic.Pointer[func(error)]

	ioInflight atomic.Int64
	lastIO     atomic.Int64 // unix nanos of the last completed data I/O

	st       counters
	recovery RecoveryReport
	pool     bufPool
	bufStats bufStats

	closed atomic.Bool
	stop   chan struct{}
	kick   chan struct{}
	// deallocKick wakes the deallocator goroutine.
	deallocKick chan struct{}
	bg          sync.WaitGroup
	closeMu     sync.Mutex
	closeErr    error
	isClosed    bool

	async asyncState

	warmSink uint32
}

type counters struct {
	puts, putBytes, putSkipped, putFailed atomic.Int64
	putsVectored                          atomic.Int64
	loads, loadBytes, loadMisses, crcErrs atomic.Int64
	deletes, deletesRefused               atomic.Int64
	lookups, lookupHits                   atomic.Int64
	ckpts, ckptForced, ckptErrs           atomic.Int64
	ckptBytes, ckptEntries                atomic.Int64
	maxHold, maxHoldCPU, lastCkptDur      atomic.Int64
	deallocSlots, deallocErrs             atomic.Int64
	deallocCalls, deallocRanges           atomic.Int64
	putRoom, putCkptFailing               atomic.Int64
	lastCkptErr                           atomic.Value // string
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
		Offset:      e.slotOff(s),
		Size:        int(r.size),
		Slot:        uint32(s),
		Handle:      placement.Handle(r.handle),
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

func (e *Engine) slotOff(s int32) int64 { return e.layout.SlotOffset(int64(s)) }

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
