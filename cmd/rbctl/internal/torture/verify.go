package torture

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/rbctl/rbctl/engine"
)

// keyState is one key's state: absent (Ver 0) or present with version Ver.
type keyState struct{ Ver uint64 }

// Expectation is, per key, the states recovery may legitimately produce after a crash:
// the state the last completed checkpoint must hold ("settled": every operation
// acknowledged before that checkpoint was requested), followed by the states each later or
// unacknowledged operation may have moved it to. A key whose only allowed state is present
// was acknowledged before the last completed checkpoint and must survive; a key whose only
// allowed state is absent must not come back.
type Expectation struct {
	Allowed map[uint64][]keyState // idx → allowed states (first = settled)
	Ever    map[uint64]map[uint64]bool
	// HasCheckpoint says whether the cycle logged a completed checkpoint (or a clean close).
	HasCheckpoint bool
	// Ready is the writer's R record (entries it recovered), -1 when missing.
	Ready int
	// WriterWrong and WriterUnloadable count X and U records.
	WriterWrong, WriterUnloadable int
	Puts, Deletes, Checkpoints    int
	FailedPuts                    int
	Closed                        bool
	// TornOff and TornLen locate the torn metadata write (TornLen 0: none).
	TornOff, TornLen int64
	// LastCkSeq is the newest seq of a checkpoint the writer logged as completed (0: none);
	// recovery must not continue from an older one without saying so.
	LastCkSeq uint64
}

// Expect computes the allowed states for a cycle that started from baseline (idx → version,
// the state recovered before the writer ran) and logged recs.
func Expect(baseline map[uint64]uint64, recs []Record) Expectation {
	ex := Expectation{Allowed: map[uint64][]keyState{}, Ever: map[uint64]map[uint64]bool{}, Ready: -1}
	// The cut point: position of the S record of the last completed checkpoint, or of F.
	cut := 0
	starts := map[uint64]int{}
	for i, r := range recs {
		switch r.Kind {
		case RecCkStart:
			starts[r.N] = i
		case RecCkDone:
			cut, ex.HasCheckpoint = starts[r.N], true
			ex.Checkpoints++
			if ex.LastCkSeq == 0 || seqNewer(r.Seq, ex.LastCkSeq) {
				ex.LastCkSeq = r.Seq
			}
		case RecClosed:
			cut, ex.HasCheckpoint, ex.Closed = i, true, true
		case RecReady:
			ex.Ready = int(r.N)
		case RecTorn:
			ex.TornOff, ex.TornLen = int64(r.N), int64(r.Seq)
		case RecWrong:
			ex.WriterWrong++
		case RecUnload:
			ex.WriterUnloadable++
		case RecAck:
			switch {
			case r.OK && r.Op == 'P':
				ex.Puts++
			case r.OK:
				ex.Deletes++
			case r.Op == 'P':
				ex.FailedPuts++
			}
		}
	}
	type op struct {
		put    bool
		ver    uint64
		intent int
		ack    int // -1: none (in flight at the kill)
		ok     bool
	}
	ops := map[uint64][]*op{}
	open := map[uint64]*op{} // intent awaiting its ack, per key (a key has one worker)
	note := func(idx, ver uint64) {
		if ex.Ever[idx] == nil {
			ex.Ever[idx] = map[uint64]bool{}
		}
		ex.Ever[idx][ver] = true
	}
	for idx, v := range baseline {
		note(idx, v)
	}
	for i, r := range recs {
		switch r.Kind {
		case RecIntent:
			o := &op{put: r.Op == 'P', ver: r.Ver, intent: i, ack: -1}
			ops[r.Idx] = append(ops[r.Idx], o)
			open[r.Idx] = o
			if o.put {
				note(r.Idx, r.Ver)
			}
		case RecAck:
			if o := open[r.Idx]; o != nil {
				o.ack, o.ok = i, r.OK
				delete(open, r.Idx)
			}
		}
	}
	keys := map[uint64]bool{}
	for idx := range baseline {
		keys[idx] = true
	}
	for idx := range ops {
		keys[idx] = true
	}
	for idx := range keys {
		st := keyState{baseline[idx]}
		var later []*op
		for _, o := range ops[idx] {
			switch {
			case o.ack >= 0 && !o.ok: // refused or failed: never takes effect
			case o.ack >= 0 && o.ack < cut: // settled before the checkpoint was requested
				st = apply(st, o.put, o.ver)
			default:
				later = append(later, o)
			}
		}
		allowed := []keyState{st}
		for _, o := range later {
			st = apply(st, o.put, o.ver)
			allowed = append(allowed, st)
		}
		ex.Allowed[idx] = allowed
	}
	return ex
}

func apply(s keyState, put bool, ver uint64) keyState {
	if put {
		return keyState{ver}
	}
	return keyState{}
}

// Result counts what a verification found. Every field but the first group must be zero.
type Result struct {
	Entries      int // entries the recovered index serves
	KeysVerified int // entries loaded and byte-exact for an allowed version
	MustSurvive  int // keys acknowledged before the last checkpoint that had to be present
	FreeSlots    int64
	Filled       int64 // slots the leak check could fill

	CorruptReads  int // a load returned bytes that are no version of the key ever written
	StaleVersion  int // a load returned a real version of the key, but not an allowed one
	Unloadable    int // an indexed key whose load failed (checksum or I/O)
	Lost          int // acknowledged before the last checkpoint, gone after recovery
	Resurrected   int // present, though deleted (or never stored) before the last checkpoint
	Foreign       int // an index entry that is no torture key
	DupSlots      int // a slot owned by two entries
	BadOffsets    int // an entry whose offset is not its slot's
	Accounting    int // used + free + never-used != total, or in-flight slots after recovery
	LeakedSlots   int64
	Overbooked    int64 // the fill stored more keys than free slots: a slot handed out twice
	ReadyMismatch int   // writer's recovered count differs from the verifier's

	Problems []string // the first few violations, described
}

// Violations is the number of invariant violations.
func (r Result) Violations() int {
	return r.CorruptReads + r.StaleVersion + r.Unloadable + r.Lost + r.Resurrected + r.Foreign +
		r.DupSlots + r.BadOffsets + r.Accounting + int(r.LeakedSlots) + int(r.Overbooked) + r.ReadyMismatch
}

func (r *Result) problem(format string, args ...any) {
	if len(r.Problems) < 8 {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// Verify checks a recovered engine against ex and returns the counts and the recovered
// state (idx → version) as the next cycle's baseline. With fill it then puts fresh keys
// until the cache refuses one and checks that exactly the free slots were filled; this
// writes to the engine's device, so only use it on a throw-away copy.
func Verify(e *engine.Engine, g Geometry, ex Expectation, fill bool) (Result, map[uint64]uint64) {
	var res Result
	lay := e.Layout()
	max := g.MaxPayload()
	type ent struct {
		k engine.Key
		m engine.EntryMeta
	}
	var ents []ent
	e.Entries(func(k engine.Key, m engine.EntryMeta) bool {
		ents = append(ents, ent{k, m})
		return true
	})
	res.Entries = len(ents)
	checkSlots(&res, lay, func(fn func(engine.Key, engine.EntryMeta)) {
		for _, x := range ents {
			fn(x.k, x.m)
		}
	})
	state := map[uint64]uint64{}
	buf := make([]byte, lay.SlotBytes)
	for _, x := range ents {
		idx, ok := IndexOf(x.k)
		if !ok {
			res.Foreign++
			res.problem("foreign key %q in the index", x.k.String())
			continue
		}
		clear(buf)
		got, err := e.LoadManyInto([]engine.Key{x.k}, [][]byte{buf[:max]})
		if !got[0] {
			res.Unloadable++
			res.problem("key %d (slot %d, %d bytes) is indexed but does not load: %v", idx, x.m.Slot, x.m.Size, err)
			continue
		}
		data := buf[:x.m.Size]
		matched := uint64(0)
		for _, s := range ex.Allowed[idx] {
			if s.Ver != 0 && samePayload(data, idx, s.Ver, max) {
				matched = s.Ver
				break
			}
		}
		if matched == 0 && len(ex.Allowed[idx]) == 0 && len(ex.Ever[idx]) == 0 {
			// A key untouched by this cycle and absent from the baseline.
			res.Resurrected++
			res.problem("key %d present but neither in the baseline nor written this cycle", idx)
			continue
		}
		if matched == 0 {
			stale := false
			for v := range ex.Ever[idx] {
				if samePayload(data, idx, v, max) {
					stale = true
					break
				}
			}
			switch {
			case stale && !allows(ex.Allowed[idx], true):
				res.Resurrected++
				res.problem("key %d resurrected (deleted before the last checkpoint)", idx)
			case stale:
				res.StaleVersion++
				res.problem("key %d serves a version that is not allowed", idx)
			default:
				res.CorruptReads++
				res.problem("key %d: %d bytes loaded are no version ever written", idx, len(data))
			}
			continue
		}
		res.KeysVerified++
		state[idx] = matched
	}
	for idx, allowed := range ex.Allowed {
		if !allows(allowed, false) {
			res.MustSurvive++
			if _, ok := state[idx]; !ok {
				res.Lost++
				res.problem("key %d acknowledged before the last checkpoint (version %d) is missing", idx, allowed[0].Ver)
			}
		}
	}
	u := e.Usage()
	res.FreeSlots = u.SlotsTotal - u.SlotsUsed
	if u.SlotsUsed != int64(len(ents)) || u.SlotsInflight != 0 || u.SlotsUsed+u.SlotsFree+(u.SlotsTotal-u.NextSlot) != u.SlotsTotal || u.SlotsTotal != lay.MaxSlots {
		res.Accounting++
		res.problem("usage does not add up: %+v with %d entries, %d max slots", u, len(ents), lay.MaxSlots)
	}
	if fill {
		fillCheck(&res, e, lay, u)
	}
	return res, state
}

func allows(states []keyState, present bool) bool {
	for _, s := range states {
		if (s.Ver != 0) == present {
			return true
		}
	}
	return false
}

func samePayload(data []byte, idx, ver uint64, max int) bool {
	if len(data) != PayloadSize(idx, ver, max) || len(data) < 16 ||
		binary.LittleEndian.Uint64(data) != idx || binary.LittleEndian.Uint64(data[8:]) != ver {
		return false
	}
	return bytes.Equal(data, Payload(idx, ver, max))
}

// checkSlots checks slot ownership and offsets of every entry.
func checkSlots(res *Result, lay engine.Layout, each func(func(engine.Key, engine.EntryMeta))) {
	owner := map[uint32]string{}
	each(func(k engine.Key, m engine.EntryMeta) {
		if prev, dup := owner[m.Slot]; dup {
			res.DupSlots++
			res.problem("slot %d owned by %q and %q", m.Slot, prev, k.String())
		}
		owner[m.Slot] = k.String()
		if int64(m.Slot) >= lay.MaxSlots || m.Offset != lay.DataBase+int64(m.Slot)*lay.SlotBytes {
			res.BadOffsets++
			res.problem("key %q: slot %d offset %d does not match the layout", k.String(), m.Slot, m.Offset)
		}
	})
}

// fillCheck stores fresh keys until the cache refuses one: exactly the free slots must take
// them (fewer: slots leaked; more: a slot was handed out twice), and no slot may then be
// owned twice.
func fillCheck(res *Result, e *engine.Engine, lay engine.Layout, u engine.Usage) {
	free := u.SlotsTotal - u.SlotsUsed
	p := make([]byte, 16)
	var n int64
	for i := int64(0); i <= lay.MaxSlots+1; i++ {
		idx := uint64(fillBase + i)
		FillPayload(p, idx, 1)
		r, _ := e.PutMany([]engine.Key{KeyFor(idx)}, [][]byte{p})
		if len(r.Results) != 1 || !r.Results[0] {
			break
		}
		n++
	}
	res.Filled = n
	if n < free {
		res.LeakedSlots += free - n
		res.problem("leak: %d free slots but only %d keys could be stored", free, n)
	} else if n > free {
		res.Overbooked += n - free
		res.problem("overbooked: %d free slots but %d keys were stored", free, n)
	}
	checkSlots(res, lay, func(fn func(engine.Key, engine.EntryMeta)) {
		e.Entries(func(k engine.Key, m engine.EntryMeta) bool { fn(k, m); return true })
	})
}
