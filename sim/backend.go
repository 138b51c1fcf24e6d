package sim

import (
	"errors"
	"fmt"
	"sync"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/placement"
	"github.com/rbctl/rbctl/workloads"
)

// BackendConfig lays a simulated raw-block cache over an FTL model: the engine's layout
// (engine.ComputeLayout: a metadata region with two alternating checkpoint containers,
// then fixed-size slots), its slot allocation and its write/deallocate stream, without
// moving any data.
type BackendConfig struct {
	FTL           *ftl.Model       // the modelled device (required); its logical size is the device size
	Policy        placement.Policy // nil = no placement directive on any write
	Salts         []string         // Key.Tenant → cache_salt
	Model         string           // model name given to the policy
	SlotBytes     int64            // header + payload; rounded up to the FTL mapping unit
	MetaBytes     int64            // metadata region (both containers); 0 = engine.MetaBytesFor the device
	EntryBytes    int              // checkpoint bytes per index entry (default 64)
	CheckpointOps int64            // write a checkpoint after this many stores+deletes (0 = never)
	Deallocate    bool             // deallocate a slot when its key is deleted (H6)
	// AnySlot reuses the most recently freed slot whatever handle last wrote it (LMCache's
	// fdp_slot_reuse_policy none) rather than one of the same handle first (pid_affinity).
	AnySlot bool
}

// Backend is a workloads.Backend that feeds the FTL model directly (rbctl simulate).
type Backend struct {
	cfg      BackendConfig
	layout   engine.Layout
	mu       sync.Mutex
	unit     int64
	slots    *engine.SlotAllocator // the engine's slot allocation
	index    map[workloads.Key]int64
	handleOf []int32 // per slot: handle+1 it was written with
	dirty    int64
	seq      int64
	nHandles int
}

var _ workloads.Backend = (*Backend)(nil)

// NewBackend builds the layout on cfg.FTL. The slot size is rounded up to the mapping unit
// and the metadata region to two of them, so that every slot and container starts on a
// unit; the rest is the engine's arithmetic.
func NewBackend(cfg BackendConfig) (*Backend, error) {
	if cfg.FTL == nil {
		return nil, errors.New("simulated cache: no FTL model")
	}
	fc := cfg.FTL.Config()
	unit := fc.MappingUnit
	if cfg.EntryBytes == 0 {
		cfg.EntryBytes = 64
	}
	l, err := Layout(fc, cfg.SlotBytes, cfg.MetaBytes)
	if err != nil {
		return nil, err
	}
	b := &Backend{cfg: cfg, layout: l, unit: unit, index: map[workloads.Key]int64{}, nHandles: fc.Handles}
	// pid_affinity unless AnySlot; no slot groups (rbctl simulate has no --slot-groups).
	b.slots = engine.NewSlotAllocator(l.MaxSlots, !cfg.AnySlot, 0)
	b.handleOf = make([]int32, l.MaxSlots)
	return b, nil
}

// Layout is the engine layout a simulated cache has on the model fc: slots of slotBytes
// rounded up to the mapping unit, after a metadata region of metaBytes (0: what rbctl
// format --meta-bytes auto gives the device) rounded to two units.
func Layout(fc ftl.Config, slotBytes, metaBytes int64) (engine.Layout, error) {
	unit := fc.MappingUnit
	if slotBytes <= 0 || unit <= 0 {
		return engine.Layout{}, fmt.Errorf("simulated cache: slot bytes %d and mapping unit %d must be positive", slotBytes, unit)
	}
	ec := engine.DefaultConfig()
	for ec.BlockAlign > 512 && unit%int64(ec.BlockAlign) != 0 { // mapping units below 4 KiB
		ec.BlockAlign /= 2
	}
	ec.SlotBytes = roundUp(slotBytes, unit)
	if metaBytes == 0 {
		// What rbctl format --meta-bytes auto gives this device (compact checkpoints).
		metaBytes = engine.MetaBytesFor(fc.LogicalBytes, ec.SlotBytes, engine.DefaultBlockAlign, engine.CheckpointCompact)
	}
	ec.MetaTotalBytes = roundUp(metaBytes, 2*unit)
	l, err := engine.ComputeLayout(ec, fc.LogicalBytes)
	if err != nil {
		return l, fmt.Errorf("simulated cache on %d bytes: %w", fc.LogicalBytes, err)
	}
	return l, nil
}

func roundUp(v, a int64) int64 { return (v + a - 1) / a * a }

// Slots implements workloads.Backend.
func (b *Backend) Slots() int64 { return b.layout.MaxSlots }

// SlotBytes is the slot size after rounding to the mapping unit.
func (b *Backend) SlotBytes() int64 { return b.layout.SlotBytes }

// MetaBytes is the metadata region's size.
func (b *Backend) MetaBytes() int64 { return b.layout.MetaTotalBytes }

// Checkpoints is how many checkpoints were written.
func (b *Backend) Checkpoints() int64 { return b.seq }

func (b *Backend) salt(t int32) string {
	if t >= 0 && int(t) < len(b.cfg.Salts) {
		return b.cfg.Salts[t]
	}
	return ""
}

func (b *Backend) observe(k workloads.Key, ev placement.Event) {
	if b.cfg.Policy != nil {
		placement.Observe(b.cfg.Policy, k.Identity(), ev)
	}
}

// handle asks the policy; None and out-of-range answers mean no directive.
func (b *Backend) handle(w placement.Write) placement.Handle {
	if b.cfg.Policy == nil {
		return placement.None
	}
	h := b.cfg.Policy.Place(w)
	if h < 0 || int(h) >= b.nHandles {
		return placement.None
	}
	return h
}

// ftlHandle is the FTL handle of a placement decision: no directive lands on handle 0.
func ftlHandle(h placement.Handle) int { return int(max(h, 0)) }

// Lookup implements workloads.Backend.
func (b *Backend) Lookup(keys []workloads.Key) (int, error) {
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

// Load implements workloads.Backend (no data moves; the policy still sees the access).
func (b *Backend) Load(keys []workloads.Key, size int) (int, error) {
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

// Unlock implements workloads.Backend.
func (b *Backend) Unlock([]workloads.Key) {}

// Store implements workloads.Backend: allocate a slot, ask the policy, write header+payload.
func (b *Backend) Store(keys []workloads.Key, size int, ok []bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.layout.SlotWriteBytes(size)
	units := (n + b.unit - 1) / b.unit
	if int64(size) > b.layout.PayloadBytes() || units*b.unit > b.layout.SlotBytes {
		return fmt.Errorf("simulated cache: a %d-byte payload does not fit a %d-byte slot", size, b.layout.SlotBytes)
	}
	for i, k := range keys {
		if _, dup := b.index[k]; dup {
			ok[i] = true
			continue
		}
		h := b.handle(placement.Write{Model: b.cfg.Model, CacheSalt: b.salt(k.Tenant), Identity: k.Identity(),
			ChunkIndex: -1, Size: b.layout.HeaderBytes + size})
		slot, found := b.alloc(h)
		if !found {
			ok[i] = false
			continue
		}
		if err := b.cfg.FTL.Write(b.slotUnit(slot), units, ftlHandle(h)); err != nil {
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

// slotUnit is the first mapping unit of slot.
func (b *Backend) slotUnit(slot int64) int64 { return b.layout.SlotOffset(slot) / b.unit }

// alloc takes a slot as the engine does (engine.SlotAllocator): a free slot last written
// with the same handle (LMCache's pid affinity, unless AnySlot), then any free slot, then
// a never-used one.
func (b *Backend) alloc(h placement.Handle) (int64, bool) {
	s := b.slots.Alloc(h)
	return int64(s), s >= 0
}

func (b *Backend) release(slot int64, h placement.Handle) { b.slots.Free(int32(slot), h) }

// Delete implements workloads.Backend.
func (b *Backend) Delete(keys []workloads.Key) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, k := range keys {
		slot, ok := b.index[k]
		if !ok {
			continue
		}
		delete(b.index, k)
		b.release(slot, placement.Handle(b.handleOf[slot]-1))
		if b.cfg.Deallocate {
			b.cfg.FTL.Deallocate(b.slotUnit(slot), b.layout.SlotBytes/b.unit)
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
func (b *Backend) dirtied() error {
	b.dirty++
	if b.cfg.CheckpointOps <= 0 || b.dirty < b.cfg.CheckpointOps {
		return nil
	}
	b.dirty = 0
	b.seq++
	c := b.layout.ContainerBytes
	n := min(int64(b.layout.BlockAlign)+int64(len(b.index))*int64(b.cfg.EntryBytes), c)
	units := (n + b.unit - 1) / b.unit
	h := b.handle(placement.Write{Model: b.cfg.Model, Metadata: true, ChunkIndex: -1, Size: int(n)})
	return b.cfg.FTL.Write(b.layout.ContainerOffsetFor(uint64(b.seq))/b.unit, units, ftlHandle(h))
}
