package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/workloads"
)

// Backend runs a workload through the engine. Payloads carry the chunk hash in their
// first 8 bytes, checked on every load, so a wrong payload is an error, not a fast result.
type Backend struct {
	E      *engine.Engine
	Model  string
	KVRank uint32
	salts  []string
	size   int
	pool   sync.Pool // *[]byte of size bytes
}

// ErrPayload: a loaded payload does not belong to its key.
var ErrPayload = errors.New("loaded payload does not match its key")

// NewBackend wraps an open engine for chunks of size bytes.
func NewBackend(e *engine.Engine, model string, salts []string, size int) *Backend {
	b := &Backend{E: e, Model: model, salts: salts, size: size}
	b.pool.New = func() any { s := make([]byte, size); return &s }
	return b
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
		out[i] = engine.ObjectKey(b.Model, b.KVRank, h[:], salt)
	}
	return out
}

// Slots implements workloads.Backend.
func (b *Backend) Slots() int64 { return b.E.Layout().MaxSlots }

// Lookup implements workloads.Backend: get_metadata_prefix with lock.
func (b *Backend) Lookup(ks []workloads.Key) (int, error) {
	return len(b.E.MetadataPrefix(b.keys(ks), true)), nil
}

// Load implements workloads.Backend.
func (b *Backend) Load(ks []workloads.Key, size int) (int, error) {
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

// Unlock implements workloads.Backend.
func (b *Backend) Unlock(ks []workloads.Key) { b.E.UnlockMany(b.keys(ks)) }

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
	res, err := b.E.PutMany(b.keys(ks), payloads)
	copy(ok, res.Results)
	return err
}

// Delete implements workloads.Backend (not forced: a key another request holds locked stays).
func (b *Backend) Delete(ks []workloads.Key) error {
	b.E.DeleteMany(b.keys(ks), false)
	return nil
}
