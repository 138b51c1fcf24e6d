package workloads

import (
	"errors"
	"fmt"
	"sync"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/placement"
)

// SimConfig lays a simulated raw-block cache over an FTL model: the engine's layout (a
// metadata region with two alternating checkpoint containers, then fixed-size slots), its
// slot allocation and its write/deallocate stream, without moving any data.
type SimConfig struct {
	FTL           *ftl.Model       // the modelled device (required); its logical size is the device size
	Policy        placement.Policy // nil = no placement directive on any write
	Salts         []string         // Key.Tenant → cache_salt
	Model         string           // model name given to the policy
	SlotBytes     int64            // slot size; rounded up to the FTL mapping unit
	HeaderBytes   int              // slot header bytes (0: engine.DefaultHeaderBytes)
	MetaBytes     int64            // metadata region (both containers); 0 = engine.MetaBytesFor the device
	EntryBytes    int              // checkpoint bytes per index entry (default 64)
	CheckpointOps int64            // write a checkpoint after this many stores+deletes (0 = never)
	Deallocate    bool             // deallocate a slot when its key is deleted (H6)
}

// SimBackend is a Backend that feeds the FTL model directly (rbctl simulate).
type SimBackend struct {
	cfg      SimConfig
	mu       sync.Mutex
	unit     int64
	slotB    int64
	base     int64 // data region start
	slots    int64
	next     int64
	free     [][]int64 // per handle+1 (index 0: no directive), LIFO
	index    map[Key]int64
	handleOf []int32 // per slot: handle+1 it was written with
	dirty    int64
	seq      int64
	nHandles int
}

// ErrSimDevice: the device cannot hold the layout.
var ErrSimDevice = errors.New("simulated device too small for the layout")

// NewSimBackend builds the layout on cfg.FTL.
func NewSimBackend(cfg SimConfig) (*SimBackend, error) {
	if cfg.FTL == nil {
		return nil, errors.New("sim backend: no FTL model")
	}
	fc := cfg.FTL.Config()
	unit := fc.MappingUnit
	if cfg.HeaderBytes == 0 {
		cfg.HeaderBytes = engine.DefaultHeaderBytes
	}
	if cfg.EntryBytes == 0 {
		cfg.EntryBytes = 64
	}
	slotB := (cfg.SlotBytes + unit - 1) / unit * unit
	if slotB <= 0 {
		return nil, fmt.Errorf("sim backend: slot bytes %d must be positive", cfg.SlotBytes)
	}
	size := fc.LogicalBytes
	meta := cfg.MetaBytes
	if meta == 0 {
		// What rbctl format --meta-bytes auto gives this device (compact checkpoints).
		meta = engine.MetaBytesFor(size, slotB, engine.DefaultBlockAlign, engine.CheckpointCompact)
	}
	meta = (meta + 2*unit - 1) / (2 * unit) * (2 * unit)
	if meta >= size {
		return nil, fmt.Errorf("%w: metadata region %d ≥ device %d", ErrSimDevice, meta, size)
	}
	b := &SimBackend{cfg: cfg, unit: unit, slotB: slotB, base: meta, slots: (size - meta) / slotB,
		index: map[Key]int64{}, nHandles: fc.Handles}
	if b.slots <= 0 {
		return nil, fmt.Errorf("%w: no room for one %d-byte slot", ErrSimDevice, slotB)
	}
	b.free = make([][]int64, fc.Handles+1)
	b.handleOf = make([]int32, b.slots)
	return b, nil
}

// Slots implements Backend.
func (b *SimBackend) Slots() int64 { return b.slots }

// SlotBytes is the slot size after rounding to the mapping unit.
func (b *SimBackend) SlotBytes() int64 { return b.slotB }

// MetaBytes is the metadata region's size.
func (b *SimBackend) MetaBytes() int64 { return b.base }

// Checkpoints is how many checkpoints were written.
func (b *SimBackend) Checkpoints() int64 { return b.seq }

func (b *SimBackend) identity(k Key) uint64 { return mix(k.Hash ^ uint64(k.Tenant)<<56) }

func (b *SimBackend) salt(t int32) string {
	if int(t) < len(b.cfg.Salts) {
		return b.cfg.Salts[t]
	}
	return ""
}

func (b *SimBackend) observe(k Key, ev placement.Event) {
	if b.cfg.Policy != nil {
		placement.Observe(b.cfg.Policy, b.identity(k), ev)
	}
}

// handle asks the policy and maps None (and out-of-range answers) to the FTL's default handle 0.
func (b *SimBackend) handle(w placement.Write) int {
	if b.cfg.Policy == nil {
		return placement.None
	}
	h := b.cfg.Policy.Place(w)
	if h < 0 || h >= b.nHandles {
		return placement.None
	}
	return h
}

// Lookup implements Backend.
func (b *SimBackend) Lookup(keys []Key) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, k := range keys {
		if _, ok := b.index[k]; !ok {
			break
		}
		n++
		b.observe(k, placement.Lookup)
	}
	return n, nil
}

// Load implements Backend (no data moves; the policy still sees the access).
func (b *SimBackend) Load(keys []Key, size int) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, k := range keys {
		if _, ok := b.index[k]; ok {
			n++
			b.observe(k, placement.Load)
		}
	}
	return n, nil
}

// Unlock implements Backend.
func (b *SimBackend) Unlock([]Key) {}

// Store implements Backend: allocate a slot, ask the policy, write header+payload.
func (b *SimBackend) Store(keys []Key, size int, ok []bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := int64(b.cfg.HeaderBytes) + int64(size)
	units := (n + b.unit - 1) / b.unit
	if units*b.unit > b.slotB {
		return fmt.Errorf("sim backend: a %d-byte payload does not fit a %d-byte slot", size, b.slotB)
	}
	for i, k := range keys {
		if _, dup := b.index[k]; dup {
			ok[i] = true
			continue
		}
		h := b.handle(placement.Write{Model: b.cfg.Model, CacheSalt: b.salt(k.Tenant), Identity: b.identity(k),
			ChunkIndex: -1, Size: int(n)})
		slot, found := b.alloc(h)
		if !found {
			ok[i] = false
			continue
		}
		fh := max(h, 0)
		if err := b.cfg.FTL.Write((b.base+slot*b.slotB)/b.unit, units, fh); err != nil {
			b.release(slot, h)
			return err
		}
		b.index[k] = slot
		b.handleOf[slot] = int32(h + 1)
		ok[i] = true
		b.observe(k, placement.Store)
		if err := b.dirtied(); err != nil {
			return err
		}
	}
	return nil
}

// alloc prefers a free slot last written with the same handle (LMCache's pid affinity),
// then any free slot, then a never-used one.
func (b *SimBackend) alloc(h int) (int64, bool) {
	for _, l := range []int{h + 1, -1} {
		if l >= 0 {
			if f := b.free[l]; len(f) > 0 {
				s := f[len(f)-1]
				b.free[l] = f[:len(f)-1]
				return s, true
			}
			continue
		}
		for j, f := range b.free {
			if len(f) > 0 {
				s := f[len(f)-1]
				b.free[j] = f[:len(f)-1]
				return s, true
			}
		}
	}
	if b.next < b.slots {
		b.next++
		return b.next - 1, true
	}
	return 0, false
}

func (b *SimBackend) release(slot int64, h int) { b.free[h+1] = append(b.free[h+1], slot) }

// Delete implements Backend.
func (b *SimBackend) Delete(keys []Key) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, k := range keys {
		slot, ok := b.index[k]
		if !ok {
			continue
		}
		delete(b.index, k)
		b.release(slot, int(b.handleOf[slot])-1)
		if b.cfg.Deallocate {
			b.cfg.FTL.Deallocate((b.base+slot*b.slotB)/b.unit, b.slotB/b.unit)
		}
		b.observe(k, placement.Delete)
		if err := b.dirtied(); err != nil {
			return err
		}
	}
	return nil
}

// dirtied counts a mutation and writes a checkpoint when CheckpointOps have accumulated:
// a header block plus EntryBytes per entry into the container the sequence number selects.
func (b *SimBackend) dirtied() error {
	b.dirty++
	if b.cfg.CheckpointOps <= 0 || b.dirty < b.cfg.CheckpointOps {
		return nil
	}
	b.dirty = 0
	b.seq++
	c := b.base / 2
	n := min(engine.DefaultBlockAlign+int64(len(b.index))*int64(b.cfg.EntryBytes), c)
	units := (n + b.unit - 1) / b.unit
	h := b.handle(placement.Write{Model: b.cfg.Model, Metadata: true, ChunkIndex: -1, Size: int(n)})
	return b.cfg.FTL.Write(((b.seq+1)%2)*c/b.unit, units, max(h, 0))
}
