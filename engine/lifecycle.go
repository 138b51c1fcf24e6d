package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/placement"
)

// Construction (newEngine, format) and close. Open and recovery are in recovery.go.

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
		handles:  info.Handles,
		vectored: blockdev.WritesTail(dev) && cfg.HeaderBytes%cfg.BlockAlign == 0,
		lbs:      int64(cfg.BlockAlign),
		slots:    make([]slotRec, lay.MaxSlots),
		tab:      newTable(lay.MaxSlots),
		keys:     newArena(),
		prefixes: newInterner(),
		salts:    newInterner(),
		metas:    map[int32]*ObjMeta{},
		bySalt:   map[string]int64{},
		byHandle: map[placement.Handle]int64{},
		stop:     make(chan struct{}),
		kick:     make(chan struct{}, 1),

		deallocKick: make(chan struct{}, 1),
	}
	e.deallocDone.L = &e.mu
	e.roomInit()
	if e.now == nil {
		e.now = time.Now
	}
	if err := e.checkHandle(cfg.MetadataHandle, "checkpoint write", "Config.MetadataHandle"); err != nil {
		return nil, err
	}
	if o, ok := cfg.Placer.(placement.Observer); ok {
		e.obs = o
	}
	var groupSlots int64
	if cfg.SlotGroupBytes > 0 {
		groupSlots = max(1, cfg.SlotGroupBytes/cfg.SlotBytes)
	}
	e.alloc.init(lay.MaxSlots, cfg.SlotAffinity, groupSlots)
	for i := range e.slots {
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
	if e.cfg.DeallocateOnDelete && !e.cfg.ReadOnly && !e.cfg.DeallocateInline {
		e.bg.Add(1)
		go e.deallocLoop()
	}
	if e.cfg.Periodic && !e.cfg.ReadOnly {
		e.bg.Add(1)
		go e.checkpointLoop()
	}
}

// allocateMetadata reserves the metadata region of a regular file, so that no checkpoint
// can fail for want of space on the filesystem under a sparse device file (format used to
// leave the second container sparse). A filesystem that cannot reserve space is left as
// it is; one that has no room for the region is an error.
func (e *Engine) allocateMetadata() error {
	err := blockdev.Allocate(e.dev, 0, e.layout.MetaTotalBytes)
	if err != nil && !errors.Is(err, blockdev.ErrNotSupported) {
		return fmt.Errorf("reserving the %d-byte metadata region: %w", e.layout.MetaTotalBytes, err)
	}
	return nil
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
	if err := e.allocateMetadata(); err != nil {
		return nil, fmt.Errorf("format: %w", err)
	}
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
		e.drainDeallocs()
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
