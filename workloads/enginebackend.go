package workloads

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/placement"
)

// PolicyPlacer adapts a placement.Policy to the engine's Placer and AccessObserver hooks.
type PolicyPlacer struct {
	Policy placement.Policy
	Model  string
	KVRank uint32
}

// Place implements engine.Placer.
func (p PolicyPlacer) Place(w engine.WriteInfo) blockdev.Placement {
	h := p.Policy.Place(placement.Write{Namespace: string(w.Key.Namespace()), Model: p.Model, KVRank: p.KVRank,
		CacheSalt: w.Key.CacheSalt(), Key: w.Key.String(), Identity: w.Key.Identity(), ChunkIndex: -1,
		Metadata: w.Metadata, Size: w.Size})
	if h == placement.None {
		return blockdev.NoPlacement
	}
	return blockdev.Placement(h)
}

// Observe implements engine.AccessObserver.
func (p PolicyPlacer) Observe(k engine.Key, ev engine.AccessEvent) {
	var e placement.Event
	switch ev {
	case engine.AccessLookupHit:
		e = placement.Lookup
	case engine.AccessLoad:
		e = placement.Load
	case engine.AccessStore:
		e = placement.Store
	case engine.AccessDelete:
		e = placement.Delete
	default:
		return
	}
	placement.Observe(p.Policy, k.Identity(), e)
}

// MetadataHandle is the handle the policy gives checkpoint writes (blockdev.NoPlacement for none).
func (p PolicyPlacer) MetadataHandle() blockdev.Placement {
	return p.Place(engine.WriteInfo{Metadata: true})
}

// EngineBackend runs a workload through the engine. Payloads carry the chunk hash in their
// first 8 bytes, checked on every load, so a wrong payload is an error, not a fast result.
type EngineBackend struct {
	E      *engine.Engine
	Model  string
	KVRank uint32
	salts  []string
	size   int
	pool   sync.Pool // *[]byte of size bytes
}

// ErrPayload: a loaded payload does not belong to its key.
var ErrPayload = errors.New("loaded payload does not match its key")

// NewEngineBackend wraps an open engine for chunks of size bytes.
func NewEngineBackend(e *engine.Engine, model string, salts []string, size int) *EngineBackend {
	b := &EngineBackend{E: e, Model: model, salts: salts, size: size}
	b.pool.New = func() any { s := make([]byte, size); return &s }
	return b
}

func (b *EngineBackend) keys(ks []Key) []engine.Key {
	out := make([]engine.Key, len(ks))
	var h [8]byte
	for i, k := range ks {
		binary.BigEndian.PutUint64(h[:], k.Hash)
		salt := ""
		if int(k.Tenant) < len(b.salts) {
			salt = b.salts[k.Tenant]
		}
		out[i] = engine.ObjectKey(b.Model, b.KVRank, h[:], salt)
	}
	return out
}

// Slots implements Backend.
func (b *EngineBackend) Slots() int64 { return b.E.Layout().MaxSlots }

// Lookup implements Backend: get_metadata_prefix with lock.
func (b *EngineBackend) Lookup(ks []Key) (int, error) {
	return len(b.E.MetadataPrefix(b.keys(ks), true)), nil
}

// Load implements Backend.
func (b *EngineBackend) Load(ks []Key, size int) (int, error) {
	bufs := make([][]byte, len(ks))
	ptrs := make([]*[]byte, len(ks))
	for i := range ks {
		ptrs[i] = b.pool.Get().(*[]byte)
		bufs[i] = (*ptrs[i])[:size]
	}
	defer func() {
		for _, p := range ptrs {
			b.pool.Put(p)
		}
	}()
	ok, err := b.E.LoadManyInto(b.keys(ks), bufs)
	n := 0
	for i, good := range ok {
		if !good {
			continue
		}
		n++
		if size >= 8 && binary.LittleEndian.Uint64(bufs[i]) != ks[i].Hash {
			return n, fmt.Errorf("%w: chunk %016x", ErrPayload, ks[i].Hash)
		}
	}
	return n, err
}

// Unlock implements Backend.
func (b *EngineBackend) Unlock(ks []Key) { b.E.UnlockMany(b.keys(ks)) }

// Store implements Backend.
func (b *EngineBackend) Store(ks []Key, size int, ok []bool) error {
	payloads := make([][]byte, len(ks))
	ptrs := make([]*[]byte, len(ks))
	for i, k := range ks {
		ptrs[i] = b.pool.Get().(*[]byte)
		payloads[i] = (*ptrs[i])[:size]
		if size >= 8 {
			binary.LittleEndian.PutUint64(payloads[i], k.Hash)
		}
	}
	defer func() {
		for _, p := range ptrs {
			b.pool.Put(p)
		}
	}()
	res, err := b.E.PutMany(b.keys(ks), payloads)
	copy(ok, res.Results)
	return err
}

// Delete implements Backend (not forced: a key another request holds locked stays).
func (b *EngineBackend) Delete(ks []Key) error {
	b.E.DeleteMany(b.keys(ks), false)
	return nil
}

// SeedPolicy restores p's salt → handle assignment from the handles recorded with the
// entries of an opened cache (placement.Seed): each salt is seeded with the handle most of
// its entries are on (ties: the lower handle), the salts with most entries first. Entries
// written without a handle (NoPlacement, or a v1 JSON checkpoint, which records none) are
// ignored. It returns how many salts were seeded; policies that are not Seeders seed none.
func SeedPolicy(p placement.Policy, e *engine.Engine) int {
	if _, ok := p.(placement.Seeder); !ok {
		return 0
	}
	counts := map[string]map[int]int{}
	e.Entries(func(k engine.Key, m engine.EntryMeta) bool {
		if m.Handle == blockdev.NoPlacement {
			return true
		}
		s := k.CacheSalt()
		if counts[s] == nil {
			counts[s] = map[int]int{}
		}
		counts[s][int(m.Handle)]++
		return true
	})
	type pick struct {
		salt      string
		h, n, all int
	}
	var picks []pick
	for s, byH := range counts {
		best := pick{salt: s, h: -1}
		for h, n := range byH {
			best.all += n
			if n > best.n || (n == best.n && h < best.h) {
				best.h, best.n = h, n
			}
		}
		picks = append(picks, best)
	}
	sort.Slice(picks, func(i, j int) bool {
		if picks[i].all != picks[j].all {
			return picks[i].all > picks[j].all
		}
		return picks[i].salt < picks[j].salt
	})
	seeded := 0
	for _, pk := range picks {
		if placement.Seed(p, pk.salt, pk.h) {
			seeded++
		}
	}
	return seeded
}
