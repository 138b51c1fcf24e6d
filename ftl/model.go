package ftl

import (
	"fmt"
	"math/bits"
)

const (
	unmapped = ^uint32(0) // l2p entry of a deallocated / never-written logical unit
	noRU     = int32(-1)
	sharedGC = -1 // RU owner for the shared GC destination of initially isolated handles
)

// RU states.
const (
	ruFree uint8 = iota
	ruOpen
	ruClosed
)

// Model is the FTL state. Create it with New.
type Model struct {
	cfg   resolved
	u     uint32 // mapping units per RU
	shift uint8  // log2(u) when u is a power of two (u >= 2), else 0
	nrg   int
	nh    int
	mu    uint64 // MappingUnit as uint64 for counters
	rpg   int32  // RUs per reclaim group
	nRUs  int32

	l2p       []uint32 // logical unit → physical unit (unmapped if none)
	p2l       []uint32 // physical unit → logical unit it was written for (stale allowed; check l2p)
	lbaHandle []uint16 // handle that last wrote each logical unit (per-handle accounting; nil with one handle)

	ruValid    []int32
	ruWP       []int32 // units written into the RU
	ruState    []uint8
	ruOwner    []int32 // handle of a host RU or a persistent GC RU; sharedGC for the shared GC RU
	ruFirst    []int32 // handle that last wrote the first unit relocated into a GC RU (noRU: none yet)
	ruMixed    []bool  // the RU holds units last written through more than one handle
	ruNext     []int32 // bucket list (closed) or free stack (free)
	ruPrev     []int32
	ruClosedAt []uint64

	freeHead  []int32 // per group
	freeCount []int
	openHost  []int32 // per (group, handle)
	gcDest    []int32 // per (group, handle+1); slot 0 is the shared destination
	heads     []int32 // per (group, valid count 0..u): bucket list heads of closed RUs
	minValid  []int32 // per group: lower bound of the smallest non-empty bucket
	nClosed   int     // RUs in state closed

	clock uint64 // host mapping units written (age for cost-benefit)
	st    counters
	hs    []handleCounters

	events  []Event
	dropped uint64
}

type counters struct {
	host, media, erased, relocated, gcRuns uint64
	mixed                                  uint64 // relocated out of RUs that held several handles' data
	valid                                  int64  // mapped logical units
}

type handleCounters struct {
	host, media, relocated uint64
}

// New validates cfg and returns a fresh model: every logical unit deallocated, every RU free.
func New(cfg Config) (*Model, error) {
	r, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	m := &Model{
		cfg:  r,
		u:    uint32(r.unitsPerRU),
		nrg:  r.ReclaimGroups,
		nh:   r.Handles,
		mu:   uint64(r.MappingUnit),
		rpg:  int32(r.rusPerGroup),
		nRUs: int32(r.rusPerGroup) * int32(r.ReclaimGroups),
	}
	if m.u >= 2 && m.u&(m.u-1) == 0 {
		m.shift = uint8(bits.TrailingZeros32(m.u))
	}
	n := int(m.nRUs)
	m.l2p = make([]uint32, r.logicalUnits)
	for i := range m.l2p {
		m.l2p[i] = unmapped
	}
	m.p2l = make([]uint32, int64(n)*int64(m.u))
	if m.nh > 1 {
		m.lbaHandle = make([]uint16, r.logicalUnits)
	}
	m.ruValid = make([]int32, n)
	m.ruWP = make([]int32, n)
	m.ruState = make([]uint8, n)
	m.ruOwner = make([]int32, n)
	m.ruFirst = make([]int32, n)
	m.ruMixed = make([]bool, n)
	m.ruNext = make([]int32, n)
	m.ruPrev = make([]int32, n)
	m.ruClosedAt = make([]uint64, n)
	m.freeHead = make([]int32, m.nrg)
	m.freeCount = make([]int, m.nrg)
	m.openHost = make([]int32, m.nrg*m.nh)
	m.gcDest = make([]int32, m.nrg*(m.nh+1))
	m.heads = make([]int32, m.nrg*int(m.u+1))
	m.minValid = make([]int32, m.nrg)
	m.hs = make([]handleCounters, m.nh)
	for i := range m.openHost {
		m.openHost[i] = noRU
	}
	for i := range m.gcDest {
		m.gcDest[i] = noRU
	}
	for i := range m.heads {
		m.heads[i] = noRU
	}
	// Free stacks: lowest RU index on top, so allocation order is deterministic and readable.
	for g := 0; g < m.nrg; g++ {
		m.freeHead[g] = noRU
		for i := m.rpg - 1; i >= 0; i-- {
			ru := int32(g)*m.rpg + i
			m.ruNext[ru] = m.freeHead[g]
			m.freeHead[g] = ru
		}
		m.freeCount[g] = int(m.rpg)
		m.minValid[g] = int32(m.u)
	}
	return m, nil
}

// Config returns the configuration with defaults filled in.
func (m *Model) Config() Config {
	c := m.cfg.Config
	c.ReclaimGroups, c.Handles, c.FreeReserve = m.nrg, m.nh, m.cfg.reserve
	c.RUsPerGroup = int(m.rpg)
	c.HandleIsolation = append([]Isolation(nil), m.cfg.iso...)
	return c
}

// LogicalUnits is the number of host-visible mapping units (valid LBAs for Write are
// 0..LogicalUnits()-1, in mapping units).
func (m *Model) LogicalUnits() int64 { return int64(len(m.l2p)) }

// UnitsPerRU is RUBytes / MappingUnit.
func (m *Model) UnitsPerRU() int64 { return int64(m.u) }

// RUsPerGroup is the number of physical RUs in each reclaim group.
func (m *Model) RUsPerGroup() int { return int(m.rpg) }

// SpareFactor is the model's actual ρ = physical/logical − 1 after rounding to whole RUs.
func (m *Model) SpareFactor() float64 {
	return float64(int64(m.nRUs)*int64(m.u))/float64(len(m.l2p)) - 1
}

func (m *Model) checkRange(lba, units int64) error {
	if lba < 0 || units < 0 || lba > int64(len(m.l2p)) || units > int64(len(m.l2p))-lba {
		return fmt.Errorf("%w: units [%d, %d+%d) on a device of %d units", ErrOutOfRange, lba, lba, units, len(m.l2p))
	}
	return nil
}

// Write writes units mapping units starting at logical unit lba through handle. Each unit goes
// to reclaim group lba%ReclaimGroups (the model stripes units over groups when the caller
// does not choose one; use WriteGroup to choose). HostBytes grows by units·MappingUnit (by
// the units that landed, if an error stops the write part-way).
func (m *Model) Write(lba, units int64, handle int) error {
	if err := m.checkRange(lba, units); err != nil {
		return err
	}
	if handle < 0 || handle >= m.nh {
		return fmt.Errorf("%w: handle %d, device has %d", ErrBadHandle, handle, m.nh)
	}
	if m.nrg == 1 {
		return m.writeRun(uint32(lba), uint32(units), 0, handle)
	}
	for i := range units {
		lu := lba + i
		if err := m.writeRun(uint32(lu), 1, int(lu%int64(m.nrg)), handle); err != nil {
			return err
		}
	}
	return nil
}

// WriteGroup writes through the (reclaim group, handle) pair a placement ID names.
func (m *Model) WriteGroup(lba, units int64, group, handle int) error {
	if err := m.checkRange(lba, units); err != nil {
		return err
	}
	if handle < 0 || handle >= m.nh {
		return fmt.Errorf("%w: handle %d, device has %d", ErrBadHandle, handle, m.nh)
	}
	if group < 0 || group >= m.nrg {
		return fmt.Errorf("%w: group %d, device has %d", ErrBadGroup, group, m.nrg)
	}
	return m.writeRun(uint32(lba), uint32(units), group, handle)
}

// WriteBytes writes the byte range [off, off+n) through handle. Mapping units only partly
// covered are written whole (read-modify-write), so media bytes can exceed host bytes;
// HostBytes grows by n exactly.
func (m *Model) WriteBytes(off, n int64, handle int) error {
	if n <= 0 {
		if n < 0 {
			return fmt.Errorf("%w: negative length %d", ErrOutOfRange, n)
		}
		return nil
	}
	mu := int64(m.mu)
	first, last := off/mu, (off+n+mu-1)/mu
	if off < 0 {
		return fmt.Errorf("%w: negative offset %d", ErrOutOfRange, off)
	}
	if err := m.Write(first, last-first, handle); err != nil {
		return err
	}
	// Write counted whole units; correct host bytes to what the host sent.
	whole := uint64(last-first) * m.mu
	m.st.host += uint64(n) - whole
	m.hs[handle].host += uint64(n) - whole
	return nil
}

// writeRun writes count units starting at lu into (g, h), counting host and media bytes
// for the units that landed.
func (m *Model) writeRun(lu, count uint32, g, h int) error {
	slot := g*m.nh + h
	u := m.u
	start := lu
	var err error
	for end := lu + count; lu < end; lu++ {
		if old := m.l2p[lu]; old != unmapped {
			m.invalidate(old)
			m.l2p[lu] = unmapped // GC below must not relocate the dead copy
			m.st.valid--
		}
		ru := m.openHost[slot]
		if ru == noRU {
			if ru, err = m.allocHost(g, h); err != nil {
				break
			}
			m.openHost[slot] = ru
		}
		wp := m.ruWP[ru]
		p := uint32(ru)*u + uint32(wp)
		m.p2l[p] = lu
		m.l2p[lu] = p
		if m.nh > 1 {
			m.lbaHandle[lu] = uint16(h)
		}
		m.ruValid[ru]++
		m.ruWP[ru] = wp + 1
		m.st.valid++
		m.clock++
		if uint32(wp+1) == u {
			m.close(ru)
			m.openHost[slot] = noRU
		}
	}
	done := uint64(lu-start) * m.mu
	m.st.host += done
	m.st.media += done
	m.hs[h].host += done
	m.hs[h].media += done
	return err
}

// Deallocate marks units mapping units from lba as holding no data (NVMe DSM deallocate,
// TRIM). Out-of-range parts are ignored.
func (m *Model) Deallocate(lba, units int64) {
	if lba < 0 {
		units += lba
		lba = 0
	}
	if end := int64(len(m.l2p)); units > end-lba {
		units = end - lba
	}
	for lu := lba; lu < lba+units; lu++ {
		if old := m.l2p[lu]; old != unmapped {
			m.invalidate(old)
			m.l2p[lu] = unmapped
			m.st.valid--
		}
	}
}

// DeallocateBytes deallocates the mapping units wholly inside [off, off+n); partly covered
// units keep their data, as on a drive whose deallocation granularity is the mapping unit.
func (m *Model) DeallocateBytes(off, n int64) {
	mu := int64(m.mu)
	if off < 0 || n <= 0 {
		return
	}
	first, last := (off+mu-1)/mu, (off+n)/mu
	if last > first {
		m.Deallocate(first, last-first)
	}
}

// invalidate drops one valid unit from the RU holding physical unit p.
func (m *Model) invalidate(p uint32) {
	ru := m.ruOf(p)
	v := m.ruValid[ru]
	m.ruValid[ru] = v - 1
	if m.ruState[ru] == ruClosed {
		g := ru / m.rpg
		m.unlink(ru, g, v)
		m.link(ru, g, v-1)
		if v-1 < m.minValid[g] {
			m.minValid[g] = v - 1
		}
	}
}

// ruOf is the RU holding physical unit p; a shift when the RU size is a power of two.
func (m *Model) ruOf(p uint32) int32 {
	if m.shift != 0 {
		return int32(p >> m.shift)
	}
	return int32(p / m.u)
}

// UpdateRUH closes handle's open RU in every reclaim group early (NVMe RUH Update). Each RU
// closed with unwritten space logs an RU Not Fully Written event; the unwritten space is
// lost until the RU is reclaimed. The next write through the handle opens a fresh RU.
func (m *Model) UpdateRUH(handle int) error {
	if handle < 0 || handle >= m.nh {
		return fmt.Errorf("%w: handle %d, device has %d", ErrBadHandle, handle, m.nh)
	}
	for g := range m.nrg {
		m.updateRUH(g, handle)
	}
	return nil
}

// UpdateRUHGroup closes the open RU of one (reclaim group, handle) pair, as an RUH Update
// with a placement ID naming that group does.
func (m *Model) UpdateRUHGroup(group, handle int) error {
	if handle < 0 || handle >= m.nh {
		return fmt.Errorf("%w: handle %d, device has %d", ErrBadHandle, handle, m.nh)
	}
	if group < 0 || group >= m.nrg {
		return fmt.Errorf("%w: group %d, device has %d", ErrBadGroup, group, m.nrg)
	}
	m.updateRUH(group, handle)
	return nil
}

func (m *Model) updateRUH(g, h int) {
	slot := g*m.nh + h
	ru := m.openHost[slot]
	if ru == noRU {
		return // nothing written since the last switch: the RU is still empty
	}
	left := int64(m.u) - int64(m.ruWP[ru])
	m.close(ru)
	m.openHost[slot] = noRU
	m.emit(Event{Type: EventRUNotFullyWritten, Group: g, Handle: h, UnwrittenBytes: left * int64(m.mu), HostClock: m.clock})
}

// RUHStatus is what RUH Status reports for one (reclaim group, handle) pair.
type RUHStatus struct {
	Group, Handle int
	// RUAMWBytes: bytes that can still be written before the handle moves to a new RU
	// (a handle without an open RU reports a whole RU, as a fresh one will be opened).
	RUAMWBytes int64
	// OpenRU is the index of the open RU, or -1 if none is open.
	OpenRU int
}

// RUHStatus returns the status of (group, handle). Out-of-range arguments return ok=false.
func (m *Model) RUHStatus(group, handle int) (s RUHStatus, ok bool) {
	if group < 0 || group >= m.nrg || handle < 0 || handle >= m.nh {
		return RUHStatus{}, false
	}
	s = RUHStatus{Group: group, Handle: handle, RUAMWBytes: m.cfg.RUBytes, OpenRU: -1}
	if ru := m.openHost[group*m.nh+handle]; ru != noRU {
		s.OpenRU = int(ru)
		s.RUAMWBytes = (int64(m.u) - int64(m.ruWP[ru])) * int64(m.mu)
	}
	return s, true
}
