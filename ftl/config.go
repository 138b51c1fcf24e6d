package ftl

import (
	"errors"
	"fmt"
	"math"
)

// Isolation is the reclaim-unit-handle type of FDP (nvme-fdp-reference §2.3, RUHT).
type Isolation int

const (
	// InitiallyIsolated handles write host data to their own RUs, but garbage collection may
	// mix the data of every initially isolated handle in a shared GC destination RU.
	InitiallyIsolated Isolation = iota
	// PersistentlyIsolated handles keep their data apart for its whole life: GC relocates a
	// handle's data only into that handle's own GC destination RU.
	PersistentlyIsolated
)

// RUHT returns the NVMe RUH type code: 1 = Initially Isolated, 2 = Persistently Isolated.
func (i Isolation) RUHT() uint8 {
	if i == PersistentlyIsolated {
		return 2
	}
	return 1
}

func (i Isolation) String() string {
	switch i {
	case InitiallyIsolated:
		return "initially-isolated"
	case PersistentlyIsolated:
		return "persistently-isolated"
	}
	return fmt.Sprintf("Isolation(%d)", int(i))
}

// ParseIsolation accepts "initial", "initially-isolated", "persistent", "persistently-isolated".
func ParseIsolation(s string) (Isolation, error) {
	switch s {
	case "initial", "initially", "initially-isolated", "ii":
		return InitiallyIsolated, nil
	case "persistent", "persistently", "persistently-isolated", "pi":
		return PersistentlyIsolated, nil
	}
	return 0, fmt.Errorf("ftl: unknown isolation %q; known: initial, persistent", s)
}

// GCPolicy selects the garbage-collection victim.
type GCPolicy int

const (
	// Greedy reclaims the closed RU with the fewest valid mapping units (O(1) amortised,
	// bucket lists by valid count). This is the policy the Lambert-W formula describes.
	Greedy GCPolicy = iota
	// CostBenefit reclaims the closed RU maximising (1-u)·age/(1+u), u = valid fraction,
	// age = host mapping units written since the RU was closed (Rosenblum & Ousterhout).
	// Victim selection scans the reclaim group's RUs.
	CostBenefit
)

func (g GCPolicy) String() string {
	switch g {
	case Greedy:
		return "greedy"
	case CostBenefit:
		return "cost-benefit"
	}
	return fmt.Sprintf("GCPolicy(%d)", int(g))
}

// ParseGCPolicy accepts "greedy" and "cost-benefit" (or "cb").
func ParseGCPolicy(s string) (GCPolicy, error) {
	switch s {
	case "greedy":
		return Greedy, nil
	case "cost-benefit", "costbenefit", "cb":
		return CostBenefit, nil
	}
	return 0, fmt.Errorf("ftl: unknown GC policy %q; known: greedy, cost-benefit", s)
}

// Config describes the modelled device. Zero values of ReclaimGroups, Handles and
// FreeReserve select their defaults.
type Config struct {
	// MappingUnit is the bytes per logical-to-physical map entry (e.g. 4096). Required.
	MappingUnit int64
	// LogicalBytes is the host-visible capacity; a multiple of MappingUnit. Required.
	LogicalBytes int64
	// OP is the spare factor ρ = physical/logical − 1. The physical space is
	// floor(LogicalBytes·(1+OP) / (RUBytes·ReclaimGroups)) RUs per reclaim group.
	// Ignored when RUsPerGroup is set.
	OP float64
	// RUsPerGroup, when > 0, sets the physical size directly (e.g. from an FDP config)
	// instead of deriving it from OP.
	RUsPerGroup int
	// RUBytes is the reclaim unit size; a multiple of MappingUnit. Required.
	RUBytes int64
	// ReclaimGroups (default 1). Physical RUs are split evenly between groups; GC works
	// inside one group.
	ReclaimGroups int
	// Handles is the number of reclaim unit handles (default 1). Handle 0 is the default
	// handle, used for writes without a placement directive.
	Handles int
	// Isolation applies to every handle unless HandleIsolation is given.
	Isolation Isolation
	// HandleIsolation, if non-nil, gives each handle its own isolation (len == Handles).
	HandleIsolation []Isolation
	// GC selects the victim policy.
	GC GCPolicy
	// FreeReserve is the number of free RUs per reclaim group kept back for GC: a host write
	// that needs a new RU first runs GC until more than FreeReserve RUs are free. The default
	// (0 → 1) is the minimum that always leaves GC a destination (see docs/ftl.md).
	FreeReserve int
}

// Errors returned by New and the write path. Test with errors.Is.
var (
	ErrConfig = errors.New("ftl: invalid configuration")
	// ErrNoSpare (with ErrConfig): the physical space cannot hold the logical space plus
	// the GC reserve; more over-provisioning or smaller RUs fix it.
	ErrNoSpare    error = noSpare{}
	ErrOutOfRange       = errors.New("ftl: logical range outside the device")
	ErrBadHandle        = errors.New("ftl: no such reclaim unit handle")
	ErrBadGroup         = errors.New("ftl: no such reclaim group")
	// ErrInfeasible: GC cannot make room — every closed RU is full of valid data, or there is
	// no free RU left as a GC destination. Reported instead of stalling. The write that hit
	// it is incomplete (units before the failing one were written; the failing unit's old
	// copy was invalidated).
	ErrInfeasible = errors.New("ftl: infeasible: garbage collection cannot free space (every closed RU is full or no GC destination is free)")
)

// noSpare is ErrNoSpare's type: NeedsSpare lets a caller that phrases fixes (rbctl's
// hints) recognise it without importing this package.
type noSpare struct{}

func (noSpare) Error() string    { return "too little over-provisioning" }
func (noSpare) NeedsSpare() bool { return true }

// maxPhysUnits keeps physical addresses in uint32 with one value left for "unmapped".
const maxPhysUnits = math.MaxUint32 - 1

// resolved is a validated Config with derived sizes.
type resolved struct {
	Config
	logicalUnits int64
	unitsPerRU   int64
	rusPerGroup  int64
	reserve      int
	iso          []Isolation
}

func (c Config) resolve() (resolved, error) {
	r, err := c.geometry()
	if err != nil {
		return resolved{}, err
	}
	// Each group must hold its share of the logical space plus its reserve; anything less
	// can never be filled. (Open RUs per handle make it tighter: Config.Feasibility states
	// the rule under which GC can always make room; the model itself reports ErrInfeasible
	// at run time, as a device would.)
	needPerGroup := (r.logicalUnits+int64(r.ReclaimGroups)-1)/int64(r.ReclaimGroups) + int64(r.reserve)*r.unitsPerRU
	if r.rusPerGroup*r.unitsPerRU < needPerGroup {
		return resolved{}, fmt.Errorf("%w (%w): physical space per reclaim group (%d RUs of %d bytes) cannot hold its share of the logical space plus a reserve of %d RUs; raise the over-provisioning or use smaller RUs",
			ErrConfig, ErrNoSpare, r.rusPerGroup, c.RUBytes, r.reserve)
	}
	return r, nil
}

// geometry validates c and derives its sizes, without the capacity check of resolve.
func (c Config) geometry() (resolved, error) {
	r := resolved{Config: c}
	bad := func(format string, a ...any) (resolved, error) {
		return resolved{}, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, a...)...)
	}
	if c.MappingUnit <= 0 {
		return bad("MappingUnit must be > 0 (e.g. 4096), got %d", c.MappingUnit)
	}
	if c.RUBytes <= 0 || c.RUBytes%c.MappingUnit != 0 {
		return bad("RUBytes (%d) must be a positive multiple of MappingUnit (%d)", c.RUBytes, c.MappingUnit)
	}
	if c.LogicalBytes <= 0 || c.LogicalBytes%c.MappingUnit != 0 {
		return bad("LogicalBytes (%d) must be a positive multiple of MappingUnit (%d)", c.LogicalBytes, c.MappingUnit)
	}
	if r.ReclaimGroups == 0 {
		r.ReclaimGroups = 1
	}
	if r.ReclaimGroups < 0 || r.ReclaimGroups > 1<<16 {
		return bad("ReclaimGroups must be in 1..65536, got %d", c.ReclaimGroups)
	}
	if r.Handles == 0 {
		r.Handles = 1
	}
	if r.Handles < 0 || r.Handles > 1<<16 {
		return bad("Handles must be in 1..65536, got %d", c.Handles)
	}
	if c.Isolation != InitiallyIsolated && c.Isolation != PersistentlyIsolated {
		return bad("unknown Isolation %d", int(c.Isolation))
	}
	r.iso = make([]Isolation, r.Handles)
	for i := range r.iso {
		r.iso[i] = c.Isolation
	}
	if c.HandleIsolation != nil {
		if len(c.HandleIsolation) != r.Handles {
			return bad("HandleIsolation has %d entries for %d handles", len(c.HandleIsolation), r.Handles)
		}
		for i, v := range c.HandleIsolation {
			if v != InitiallyIsolated && v != PersistentlyIsolated {
				return bad("HandleIsolation[%d]: unknown Isolation %d", i, int(v))
			}
		}
		copy(r.iso, c.HandleIsolation)
	}
	if c.GC != Greedy && c.GC != CostBenefit {
		return bad("unknown GC policy %d", int(c.GC))
	}
	r.logicalUnits = c.LogicalBytes / c.MappingUnit
	r.unitsPerRU = c.RUBytes / c.MappingUnit
	if r.unitsPerRU > math.MaxInt32/2 {
		return bad("RU of %d mapping units is too large", r.unitsPerRU)
	}
	if c.RUsPerGroup < 0 {
		return bad("RUsPerGroup must be >= 0, got %d", c.RUsPerGroup)
	}
	if c.RUsPerGroup > 0 {
		r.rusPerGroup = int64(c.RUsPerGroup)
	} else {
		if c.OP < 0 || math.IsNaN(c.OP) || math.IsInf(c.OP, 0) {
			return bad("OP (spare factor) must be >= 0, got %v", c.OP)
		}
		phys := float64(c.LogicalBytes) * (1 + c.OP)
		rus := phys / float64(c.RUBytes*int64(r.ReclaimGroups))
		if rus*float64(r.unitsPerRU) > maxPhysUnits {
			return bad("OP %v gives a physical space beyond the model's 2^32-2 mapping units", c.OP)
		}
		r.rusPerGroup = int64(rus)
	}
	r.reserve = c.FreeReserve
	if r.reserve == 0 {
		r.reserve = 1
	}
	if r.reserve < 0 {
		return bad("FreeReserve must be >= 0, got %d", c.FreeReserve)
	}
	totalRUs := r.rusPerGroup * int64(r.ReclaimGroups)
	if totalRUs > math.MaxInt32-1 {
		return bad("%d RUs exceed the model's limit of 2^31-2; use larger RUs", totalRUs)
	}
	if totalRUs*r.unitsPerRU > maxPhysUnits {
		return bad("physical space of %d mapping units exceeds the model's 2^32-2 limit; use a larger MappingUnit", totalRUs*r.unitsPerRU)
	}
	if r.logicalUnits > maxPhysUnits {
		return bad("logical space of %d mapping units exceeds the model's 2^32-2 limit", r.logicalUnits)
	}
	return r, nil
}

// UnmarshalText parses an isolation name (ParseIsolation), so that a flag or a config file
// takes it as text.
func (i *Isolation) UnmarshalText(b []byte) error { return unmarshal(i, b, ParseIsolation) }

// UnmarshalText parses a GC policy name (ParseGCPolicy).
func (g *GCPolicy) UnmarshalText(b []byte) error { return unmarshal(g, b, ParseGCPolicy) }

func unmarshal[T any](dst *T, b []byte, parse func(string) (T, error)) error {
	v, err := parse(string(b))
	if err == nil {
		*dst = v
	}
	return err
}
