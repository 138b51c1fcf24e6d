package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/engine/sharded"
	"github.com/rbctl/rbctl/workloads"
)

// Backend runs a workload through the engine, or a cache sharded over several devices.
// Payloads carry the chunk hash in their first 8 bytes, checked on every load, so a wrong
// payload is an error, not a fast result. Over several devices a device error fails only
// the keys on that device (not stored, not loaded) and is not returned: the workload goes
// on, and the cache's Observe hook counts it against the device.
type Backend struct {
	C      *sharded.Cache
	Model  string
	KVRank uint32
	// Ranks > 1 spreads the chunks over kv ranks KVRank..KVRank+Ranks-1 by chunk hash (a
	// tensor-parallel model for a cache routed by kv_rank: each rank's chunks on its device).
	Ranks int
	// RankSet, when set, is the ranks to spread the chunks over instead (the TP ranks of an
	// LMCache config's per_tp_device_paths, which need not be 0..N-1).
	RankSet []uint64
	// Legacy builds LMCache's legacy keys (model@world_size@worker_id@hash@half, identity
	// the chunk hash; they carry no cache_salt) for an engine in the legacy namespace.
	Legacy bool
	salts  []string
	size   int
	pool   sync.Pool // *[]byte of size bytes
	arena  *loadArena
}

// loadArena holds aligned load buffers outside the Go heap, registered with the cache's
// devices where they register buffers: loads read straight into them (no staging copy)
// as fixed reads. Loads use heap buffers when it is empty.
type loadArena struct {
	mem        []byte
	free       chan []byte
	registered bool
}

// maxArenaBytes bounds the load arena.
const maxArenaBytes = 256 << 20

// UseLoadBuffers gives loads n buffers (fewer if n of them would pass maxArenaBytes) of the
// chunk size rounded up to align, allocated with blockdev.Alloc and registered with every
// device that takes registered buffers. It reports whether all devices registered them
// (unregistered, aligned buffers still avoid the staging copy). Release frees them: call
// it only after the cache is closed.
func (b *Backend) UseLoadBuffers(n int, align int64) (bool, error) {
	if b.arena != nil {
		return false, errors.New("bench: load buffers already set up")
	}
	size := (int64(b.size) + align - 1) / align * align
	if size > maxArenaBytes {
		return false, nil // chunks this large load into heap buffers
	}
	n = max(1, min(n, int(maxArenaBytes/size)))
	mem, err := blockdev.Alloc(n * int(size))
	if err != nil {
		return false, err
	}
	a := &loadArena{mem: mem, free: make(chan []byte, n)}
	for i := range n {
		a.free <- mem[i*int(size) : (i+1)*int(size) : (i+1)*int(size)]
	}
	a.registered = b.C.RegisterMemory([][]byte{mem}) == nil
	b.arena = a
	return a.registered, nil
}

// Release frees the load buffers; the cache must be closed (its devices may hold the
// registration until then).
func (b *Backend) Release() {
	if b.arena != nil {
		blockdev.Free(b.arena.mem)
		b.arena = nil
	}
}

// ErrPayload: a loaded payload does not belong to its key.
var ErrPayload = errors.New("loaded payload does not match its key")

// NewBackend wraps an open engine for chunks of size bytes.
func NewBackend(e *engine.Engine, model string, salts []string, size int) *Backend {
	c, err := sharded.New([]*engine.Engine{e}, sharded.Config{})
	if err != nil {
		panic(err) // one non-nil engine and the default route: cannot fail
	}
	return NewShardedBackend(c, model, salts, size)
}

// NewShardedBackend wraps an open sharded cache for chunks of size bytes.
func NewShardedBackend(c *sharded.Cache, model string, salts []string, size int) *Backend {
	b := &Backend{C: c, Model: model, salts: salts, size: size}
	b.pool.New = func() any { s := make([]byte, size); return &s }
	return b
}

// tolerate drops the device errors of a cache over several devices (their keys failed);
// one device's error is returned as the engine's own.
func (b *Backend) tolerate(err error) error {
	var se *sharded.ShardError
	if !errors.As(err, &se) {
		return err
	}
	if b.C.Len() > 1 {
		return nil
	}
	return se.Err
}

func (b *Backend) keys(ks []workloads.Key) []engine.Key {
	out := make([]engine.Key, len(ks))
	var h [8]byte
	for i, k := range ks {
		binary.BigEndian.PutUint64(h[:], k.Hash)
		salt := ""
		if int(k.Tenant) < len(b.salts) {
			salt = b.salts[k.Tenant]
		}
		rank := uint64(b.KVRank)
		world := uint64(max(b.Ranks, 1))
		switch {
		case len(b.RankSet) > 0:
			rank = b.RankSet[k.Hash%uint64(len(b.RankSet))]
			world = max(world, slices.Max(b.RankSet)+1)
		case b.Ranks > 1:
			rank += k.Hash % uint64(b.Ranks)
		}
		if b.Legacy {
			out[i] = engine.LegacyKey(fmt.Sprintf("%s@%d@%d@%x@half", b.Model, world, rank, k.Hash), k.Hash)
			continue
		}
		out[i] = engine.ObjectKey(b.Model, uint32(rank), h[:], salt) // ranks of a bench are small
	}
	return out
}

// Slots implements workloads.Backend.
func (b *Backend) Slots() int64 { return b.C.Slots() }

// Lookup implements workloads.Backend: get_metadata_prefix with lock.
func (b *Backend) Lookup(ks []workloads.Key) (int, error) {
	return len(b.C.MetadataPrefix(b.keys(ks), true)), nil
}

// Load implements workloads.Backend.
func (b *Backend) Load(ks []workloads.Key, size int) (int, error) {
	bufs := make([][]byte, len(ks))
	ptrs := make([]*[]byte, len(ks)) // nil: an arena buffer
	for i := range ks {
		if b.arena != nil && size <= b.size {
			select {
			case buf := <-b.arena.free:
				bufs[i] = buf // whole: a direct read needs the payload rounded up
				continue
			default:
			}
		}
		ptrs[i] = b.pool.Get().(*[]byte)
		bufs[i] = (*ptrs[i])[:size]
	}
	defer func() {
		for i, p := range ptrs {
			if p == nil {
				b.arena.free <- bufs[i]
				continue
			}
			b.pool.Put(p)
		}
	}()
	ok, err := b.C.LoadManyInto(b.keys(ks), bufs)
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
	return n, b.tolerate(err)
}

// Unlock implements workloads.Backend.
func (b *Backend) Unlock(ks []workloads.Key) { b.C.UnlockMany(b.keys(ks)) }

// Store implements workloads.Backend.
func (b *Backend) Store(ks []workloads.Key, size int, ok []bool) error {
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
	res, err := b.C.PutMany(b.keys(ks), payloads)
	copy(ok, res.Results)
	return b.tolerate(err)
}

// Delete implements workloads.Backend (not forced: a key another request holds locked stays).
func (b *Backend) Delete(ks []workloads.Key) error {
	b.C.DeleteMany(b.keys(ks), false)
	return nil
}
