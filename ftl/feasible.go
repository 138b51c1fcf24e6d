package ftl

// The feasibility rule follows from allocHost and reclaim (docs/ftl.md, "Feasibility").
//
// GC runs when a host write needs a new RU and at most FreeReserve RUs of its group are free.
// At that moment the writing handle has no open host RU (it has just filled or closed one),
// so the group holds at most HostRUs−1 open host RUs and GCRUs open GC destinations, and at
// most its logical share minus one unit is valid (the unit being written was unmapped a
// moment before). If the closed RUs can hold more than that, one of them has a stale unit,
// the greedy victim has fewer valid units than an RU holds, those fit in the one free RU the
// reserve guarantees, and erasing the victim gains space; a reclaim pops at most one new
// destination and returns one RU, so the free count never falls while GC runs. Hence GC
// always makes room when
//
//	(RUsPerGroup − FreeReserve − (HostRUs − 1) − GCRUs) × unitsPerRU ≥ logical units per group
//
// that is, spare RUs ≥ FreeReserve + HostRUs + GCRUs − 1. One RU less and a host that
// fills the device while its other handles' open RUs hold only stale data leaves GC no
// victim (TestFeasibilityBoundIsTight).

// Feasibility is the spare-space budget of one reclaim group of a configuration.
type Feasibility struct {
	Groups      int     // reclaim groups; the figures below are per group
	RUsPerGroup int     // physical RUs
	LogicalRUs  float64 // the group's share of the logical space, in RUs
	HostRUs     int     // open host RUs a group can hold: one per handle
	GCRUs       int     // open GC destinations: one per persistently isolated handle, one shared by the initially isolated
	Reserve     int     // free RUs kept for GC (FreeReserve, default 1)
	// Persistent is how many handles are persistently isolated (each has its own GC RU).
	Persistent int

	spareUnits int64
	unitsPerRU int64
}

// SpareRUs is the group's physical space beyond its logical share, in RUs: what
// over-provisioning gives.
func (f Feasibility) SpareRUs() float64 { return float64(f.spareUnits) / float64(f.unitsPerRU) }

// NeedRUs is the spare space GC always needs: Reserve + HostRUs + GCRUs − 1 RUs.
func (f Feasibility) NeedRUs() int { return f.Reserve + f.HostRUs + f.GCRUs - 1 }

// OK reports whether GC can always make room: SpareRUs ≥ NeedRUs, exact in mapping units.
func (f Feasibility) OK() bool { return f.spareUnits >= int64(f.NeedRUs())*f.unitsPerRU }

// Feasibility returns c's spare-space budget. It fails only on a configuration New would
// reject for another reason than its capacity.
func (c Config) Feasibility() (Feasibility, error) {
	r, err := c.geometry()
	if err != nil {
		return Feasibility{}, err
	}
	groups := int64(r.ReclaimGroups)
	share := (r.logicalUnits + groups - 1) / groups
	f := Feasibility{Groups: r.ReclaimGroups, RUsPerGroup: int(r.rusPerGroup), HostRUs: r.Handles, Reserve: r.reserve,
		LogicalRUs: float64(share) / float64(r.unitsPerRU), spareUnits: r.rusPerGroup*r.unitsPerRU - share, unitsPerRU: r.unitsPerRU}
	shared := false
	for _, iso := range r.iso {
		if iso == PersistentlyIsolated {
			f.Persistent++
		} else {
			shared = true
		}
	}
	f.GCRUs = f.Persistent
	if shared {
		f.GCRUs++
	}
	return f, nil
}

// Bytes of model state per RU: ruValid, ruWP, ruOwner, ruNext, ruPrev (int32), ruState
// (uint8) and ruClosedAt (uint64).
const ruStateBytes = 5*4 + 1 + 8

// MemoryBytes is what New allocates for c: 4 bytes per logical unit (forward map), 4 per
// physical unit (reverse map), 2 more per logical unit with several handles (the handle that
// last wrote it), ruStateBytes per RU, and the per-group bucket heads (4 per possible valid
// count). Counters and per-handle slots are left out (bytes per handle).
func (c Config) MemoryBytes() (int64, error) {
	r, err := c.geometry()
	if err != nil {
		return 0, err
	}
	rus := r.rusPerGroup * int64(r.ReclaimGroups)
	n := 4*r.logicalUnits + 4*rus*r.unitsPerRU + ruStateBytes*rus + 4*int64(r.ReclaimGroups)*(r.unitsPerRU+1)
	if r.Handles > 1 {
		n += 2 * r.logicalUnits
	}
	return n, nil
}
