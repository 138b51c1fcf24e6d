package resp

import (
	"strconv"

	"github.com/rbctl/rbctl/engine"
)

// EngineStore is a Store over one raw-block engine, keyed as issue 29 decides: a key in
// LMCache's native-connector spelling (model@%08x@%x@hash[@salt]) is stored under the
// raw-block key of the same ObjectKey (engine.FromNative), so a chunk SET through RESP is
// the entry LMCache's raw-block adapter and `rbctl get --native-key` name; any other key is
// refused (ErrKey). As in LMCache's raw-block core, a SET of a key already stored keeps the
// stored value (chunks are immutable per key) and answers OK. A node adds the P2P fetch on
// a miss, eviction and metrics around it; this is the engine part.
type EngineStore struct{ E *engine.Engine }

// Key parses a client's key once per request (parseKey).
func (s EngineStore) Key(raw []byte) Key { return parseKey(raw) }

func (s EngineStore) Get(k Key) ([]byte, bool, error) { return s.GetInto(k, nil) }

// GetInto is Get into a buffer from alloc (ValueLoader; nil: make).
func (s EngineStore) GetInto(k Key, alloc func(size int) []byte) ([]byte, bool, error) {
	if k.Err != nil {
		return nil, false, k.Err
	}
	got, err := s.E.LoadMany([]engine.Key{k.Engine}, alloc)
	if err != nil {
		return nil, false, err
	}
	return got[0], got[0] != nil, nil
}

func (s EngineStore) Set(k Key, v []byte) error {
	if k.Err != nil {
		return k.Err
	}
	key := k.Engine
	if len(v) == 0 {
		return drop(DropEmpty, "an empty value cannot be stored (a slot holds 1 byte or more)")
	}
	keys := []engine.Key{key}
	return putOrPresent(func() (bool, error) {
		res, err := s.E.PutMany(keys, [][]byte{v})
		return err == nil && res.Results[0], err
	}, func() bool { return s.E.ExistsMany(keys, false)[0] }, func() bool {
		u := s.E.Usage()
		return u.SlotsUsed >= u.SlotsTotal
	})
}

func (s EngineStore) Exists(k Key) (bool, error) {
	if k.Err != nil {
		return false, k.Err
	}
	return s.E.ExistsMany([]engine.Key{k.Engine}, false)[0], nil
}

func (s EngineStore) Delete(k Key) (bool, error) {
	if k.Err != nil {
		return false, k.Err
	}
	return s.E.DeleteMany([]engine.Key{k.Engine}, false)[0], nil
}

func (s EngineStore) Len() int64 { return s.E.Usage().SlotsUsed }

// Scan walks the index in its order; the cursor is a position in it (each call skips the
// entries before it, O(entries)) and at most count entries are visited per call, fewer
// once the keys listed hold maxBytes. Keys are listed in the native spelling GET takes;
// entries RESP cannot name (keys of other shapes, written through the raw-block codec in
// another spelling) are skipped.
func (s EngineStore) Scan(cursor uint64, count, maxBytes int) ([]string, uint64) {
	return scanKeys(func(fn func(engine.Key) bool) {
		s.E.Entries(func(k engine.Key, _ engine.EntryMeta) bool { return fn(k) })
	}, cursor, count, maxBytes)
}

// scanKeys is SCAN over a walk of the keys: the cursor is a position in the walk (each call
// skips the entries before it, O(entries)); at most count entries are visited per call, and
// none after the keys listed hold maxBytes (the next call goes on from the first entry not
// visited).
func scanKeys(walk func(func(engine.Key) bool), cursor uint64, count, maxBytes int) ([]string, uint64) {
	var out []string
	var i uint64
	listed := 0
	more := false
	walk(func(k engine.Key) bool {
		if i >= cursor+uint64(count) || (listed > 0 && listed >= maxBytes) { // a call lists one key at least
			more = true
			return false
		}
		if i >= cursor {
			if n, ok := respName(k); ok {
				out = append(out, n)
				listed += len(n)
			}
		}
		i++
		return true
	})
	if !more {
		return out, 0
	}
	return out, i
}

func (s EngineStore) MaxValue() int64 {
	l := s.E.Layout()
	return l.SlotBytes - int64(l.HeaderBytes)
}

func (s EngineStore) Info() map[string]string {
	u := s.E.Usage()
	return map[string]string{
		"rbctl_slots_total": strconv.FormatInt(u.SlotsTotal, 10),
		"rbctl_slots_used":  strconv.FormatInt(u.SlotsUsed, 10),
		"rbctl_slot_bytes":  strconv.FormatInt(s.E.Layout().SlotBytes, 10),
	}
}
