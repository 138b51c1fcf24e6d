package engine

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/rbctl/rbctl/blockdev"
)

// The engine's staging buffers.
//
// At Format/Open the engine allocates one arena with blockdev.Alloc (outside the Go heap)
// holding poolSlots slot-sized buffers, and registers it with the device when the device
// implements blockdev.BufferRegistrar (io_uring fixed buffers; NVMe passthrough
// IORING_URING_CMD_FIXED). Every op whose Buf lies inside the arena then goes out as a fixed
// read/write. The arena stages header+payload of puts, loads whose destination cannot take
// the transfer directly, checkpoint writes that fit one slot buffer, and the slot-header
// reads of recovery.
//
// Size: Config.BufferPoolBytes rounded down to whole slots; 0 means
// min(QueueDepth × SlotBytes, 256 MiB) — one full put batch (maxBatch ≤ QueueDepth slots,
// ≤ 64 MiB) always fits, several concurrent batches usually do. The cap is 1 GiB (the
// io_uring limit for one registered buffer). When the arena is empty (more concurrent
// staging than it holds) a buffer is allocated per call as before the arena existed and
// cached in a small overflow list; such buffers are not registered (Stats.BufferPoolMisses).
//
// A registration failure (e.g. RLIMIT_MEMLOCK) is counted in Stats.BufferRegisterErrors and
// the engine runs unregistered; it never fails Open. Registration is dropped again when the
// engine closes (see release), so a device that outlives the engine (a wrapper whose Close
// keeps the inner device open) never keeps the unmapped arena registered.

const (
	defaultPoolCap = 256 << 20
	maxPoolBytes   = 1 << 30
)

type bufPool struct {
	size int // bytes per buffer (SlotBytes)

	mu    sync.Mutex
	arena []byte  // nil: no arena (disabled, not initialised, or too small for one slot)
	free  []int32 // LIFO of free arena buffer indices (hot buffers are reused first)
	out   int     // arena buffers handed out and not yet returned
	dead  bool    // released: hand out no more arena buffers, unmap when out reaches 0

	ch     chan []byte // overflow cache of per-call allocations
	misses atomic.Int64
}

func newBufPool(size, keep int) bufPool { return bufPool{size: size, ch: make(chan []byte, keep)} }

// poolBytes is the arena size for cfg (0: no arena).
func poolBytes(cfg Config) int64 {
	n := cfg.BufferPoolBytes
	switch {
	case n < 0:
		return 0
	case n == 0:
		n = min(int64(cfg.QueueDepth)*cfg.SlotBytes, defaultPoolCap)
	}
	n = min(n, maxPoolBytes)
	return n / cfg.SlotBytes * cfg.SlotBytes
}

// initArena allocates the arena of n bytes (a multiple of p.size).
func (p *bufPool) initArena(n int64) error {
	if n < int64(p.size) || p.size <= 0 {
		return nil
	}
	b, err := blockdev.Alloc(int(n))
	if err != nil {
		return err
	}
	k := int(n / int64(p.size))
	p.mu.Lock()
	p.arena = b
	p.free = make([]int32, k)
	for i := range p.free {
		p.free[i] = int32(k - 1 - i) // buffer 0 on top
	}
	p.mu.Unlock()
	return nil
}

func (p *bufPool) get() ([]byte, error) {
	p.mu.Lock()
	if n := len(p.free); n > 0 && !p.dead {
		i := int(p.free[n-1])
		p.free = p.free[:n-1]
		p.out++
		p.mu.Unlock()
		lo := i * p.size
		return p.arena[lo : lo+p.size : lo+p.size], nil
	}
	hasArena := p.arena != nil
	p.mu.Unlock()
	if hasArena {
		p.misses.Add(1)
	}
	select {
	case b := <-p.ch:
		return b, nil
	default:
		return blockdev.Alloc(p.size)
	}
}

// arenaIndex returns the arena buffer b starts in, or -1. Caller holds p.mu.
func (p *bufPool) arenaIndex(b []byte) int {
	if p.arena == nil || len(b) == 0 && cap(b) == 0 {
		return -1
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(p.arena)))
	a := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if a < base || a >= base+uintptr(len(p.arena)) {
		return -1
	}
	return int((a - base) / uintptr(p.size))
}

func (p *bufPool) put(b []byte) {
	if b == nil {
		return
	}
	p.mu.Lock()
	if i := p.arenaIndex(b); i >= 0 {
		p.out--
		if p.dead {
			if p.out == 0 {
				_ = blockdev.Free(p.arena)
				p.arena, p.free = nil, nil
			}
		} else {
			p.free = append(p.free, int32(i))
		}
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	select {
	case p.ch <- b:
	default:
		_ = blockdev.Free(b)
	}
}

func (p *bufPool) drain() {
	for {
		select {
		case b := <-p.ch:
			_ = blockdev.Free(b)
		default:
			return
		}
	}
}

// releaseArena unmaps the arena now, or when the last buffer handed out comes back.
func (p *bufPool) releaseArena() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.arena == nil || p.dead {
		return
	}
	p.dead = true
	p.free = nil
	if p.out == 0 {
		_ = blockdev.Free(p.arena)
		p.arena = nil
	}
}

// arenaBuf is the whole arena (for registration); nil when there is none.
func (p *bufPool) arenaBuf() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.arena
}

// scratch returns n bytes of aligned staging memory: an arena buffer when n fits one (and
// one is free), else a fresh allocation. release returns it.
func (e *Engine) scratch(n int) (b []byte, release func(), err error) {
	if n <= e.pool.size {
		b, err := e.pool.get()
		if err != nil {
			return nil, nil, err
		}
		return b[:n], func() { e.pool.put(b) }, nil
	}
	b, err = blockdev.Alloc(n)
	if err != nil {
		return nil, nil, err
	}
	return b, func() { _ = blockdev.Free(b) }, nil
}

// unregisterPage replaces an engine's registration when it closes: a page that is never
// unmapped, so a device that outlives the engine holds no registration of freed memory.
var unregisterPage struct {
	once sync.Once
	b    []byte
}

// setupBuffers allocates the arena and registers it with the device (Format and Open call
// it; newEngine does not, so engines built for tests without I/O allocate nothing).
func (e *Engine) setupBuffers() {
	n := poolBytes(e.cfg)
	if n == 0 {
		return
	}
	if err := e.pool.initArena(n); err != nil {
		e.noteRegisterErr(err) // runs with per-call buffers, as without an arena
		return
	}
	e.bufStats.poolBytes.Store(n)
	if e.cfg.NoRegisterBuffers {
		return
	}
	r, ok := e.dev.(blockdev.BufferRegistrar)
	if !ok {
		return
	}
	if err := r.RegisterBuffers([][]byte{e.pool.arenaBuf()}); err != nil {
		if !errors.Is(err, blockdev.ErrNotSupported) {
			e.noteRegisterErr(err)
		}
		return
	}
	e.bufStats.registered.Store(true)
}

func (e *Engine) noteRegisterErr(err error) {
	e.bufStats.regErrs.Add(1)
	e.bufStats.lastErr.Store(err.Error())
}

// releaseBuffers drops the device's registration of the arena (when it still has one: the
// device may outlive the engine) and unmaps the arena. Called after dev.Close on Close, and
// on a failed Format/Open.
func (e *Engine) releaseBuffers() {
	user := e.bufStats.userRegs.Swap(0) > 0
	if e.bufStats.registered.Swap(false) || user {
		if r, ok := e.dev.(blockdev.BufferRegistrar); ok {
			unregisterPage.once.Do(func() { unregisterPage.b, _ = blockdev.Alloc(4096) })
			if unregisterPage.b != nil {
				// A closed device refuses (its registration died with it); an open one now
				// holds the never-freed page instead of the arena.
				_ = r.RegisterBuffers([][]byte{unregisterPage.b})
			}
		}
	}
	e.pool.drain()
	e.pool.releaseArena()
}

type bufStats struct {
	poolBytes  atomic.Int64
	registered atomic.Bool // the arena is registered
	regErrs    atomic.Int64
	lastErr    atomic.Value // string

	regMu    sync.Mutex // serialises RegisterMemory
	userMem  [][]byte   // caller buffers registered by RegisterMemory
	userRegs atomic.Int64
}

// registerMemory registers the caller's buffers with the device next to the arena, replacing
// buffers an earlier call registered (none: only the arena stays registered).
func (e *Engine) registerMemory(bufs [][]byte) error {
	if err := e.usable(); err != nil {
		return err
	}
	r, ok := e.dev.(blockdev.BufferRegistrar)
	if !ok {
		return fmt.Errorf("%w: RegisterMemory: the device (%T) has no registered buffers", blockdev.ErrNotSupported, e.dev)
	}
	var bytes int64
	for i, b := range bufs {
		if len(b) == 0 {
			return fmt.Errorf("%w: RegisterMemory: buffer %d is empty", ErrConfig, i)
		}
		bytes += int64(len(b))
	}
	st := &e.bufStats
	st.regMu.Lock()
	defer st.regMu.Unlock()
	arena := st.registered.Load() // the arena is part of the current registration
	var all [][]byte
	if arena {
		all = append(all, e.pool.arenaBuf())
	}
	all = append(all, bufs...)
	if len(all) == 0 {
		if st.userMem == nil { // nothing registered, nothing asked for
			return nil
		}
		// Drop the caller's buffers: register the never-freed page in their place.
		unregisterPage.once.Do(func() { unregisterPage.b, _ = blockdev.Alloc(4096) })
		if unregisterPage.b == nil {
			return errors.New("RegisterMemory: no page to replace the registration with")
		}
		all = [][]byte{unregisterPage.b}
	}
	if err := r.RegisterBuffers(all); err != nil {
		// The device may have dropped the old registration: operations fall back to plain
		// reads and writes, which stay correct. Put the arena back alone if it was there.
		st.userMem = nil
		st.userRegs.Store(0)
		if arena && r.RegisterBuffers([][]byte{e.pool.arenaBuf()}) != nil {
			st.registered.Store(false)
		}
		return fmt.Errorf("RegisterMemory: %w", err)
	}
	st.registered.Store(arena)
	st.userMem = slices.Clone(bufs)
	st.userRegs.Store(bytes)
	return nil
}
