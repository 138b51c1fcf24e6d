package sim

import (
	"fmt"
	"math"

	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/internal/sys"
	"github.com/rbctl/rbctl/internal/sys/memlimit"
	"github.com/rbctl/rbctl/units"
)

// MemAvailable returns MemAvailable from /proc/meminfo. Run bounds its estimate by it
// (Options.MemAvailable replaces it) and by the process's other limits (memlimit).
func MemAvailable() (int64, error) {
	b, err := sys.ReadFileBounded("/proc/meminfo", 1<<20)
	if err != nil {
		return 0, err
	}
	return memlimit.ParseMemAvailable(b)
}

// otherLimits are the limits besides MemAvailable: RLIMIT_AS, the cgroup's, GOMEMLIMIT.
var otherLimits = func() []memlimit.Limit {
	s := memlimit.System
	s.MemInfoAt = ""
	return s.Limits()
}

// ErrNoMemory marks a simulation that does not fit in the memory available. It is
// memlimit.ErrNoMemory, so a refusal at run time (RunOne) matches it too.
var ErrNoMemory = memlimit.ErrNoMemory

// MemoryError is a simulation refused for its memory, with what would fit.
type MemoryError struct {
	FTL          ftl.Config // the largest run's model
	Slots        int64
	Model, Cache int64  // estimated bytes: the FTL model, the simulated cache
	Available    int64  // bytes that may be allocated under the smallest limit
	Limit        string // which limit that is
	// FitsBytes is about the largest device size that fits, rounded down to its largest
	// binary unit; ModelDominates says the FTL model is the larger part, which a bigger
	// mapping unit (at least 2× the current) shrinks.
	FitsBytes      int64
	ModelDominates bool
}

func (e *MemoryError) Unwrap() error { return ErrNoMemory }

func (e *MemoryError) Error() string {
	return fmt.Sprintf("simulate of %s needs about %s of memory (FTL model %s at %s mapping units, simulated cache %s for %d slots); "+
		"only %s available (limit: %s)", units.FormatSize(e.FTL.LogicalBytes), units.FormatSize(e.Model+e.Cache), units.FormatSize(e.Model),
		units.FormatSize(e.FTL.MappingUnit), units.FormatSize(e.Cache), e.Slots, units.FormatSize(e.Available), e.Limit)
}

// checkMemory refuses runs whose estimate (MemoryBytes) exceeds the smallest of what avail
// reports (MemAvailable) and the other limits; it passes when none can tell.
func checkMemory(runs []RunConfig, avail func() (int64, error), others []memlimit.Limit) error {
	var peak *MemoryError
	for _, r := range runs {
		model, cache, err := MemoryBytes(r)
		if err != nil {
			return err
		}
		if peak == nil || model+cache > peak.Model+peak.Cache {
			unit := r.FTL.MappingUnit
			peak = &MemoryError{FTL: r.FTL, Model: model, Cache: cache, Slots: r.FTL.LogicalBytes / max(roundUp(r.SlotBytes, unit), unit)}
		}
	}
	if peak == nil {
		return nil
	}
	lim := memlimit.Limit{Bytes: math.MaxInt64}
	if n, err := avail(); err == nil {
		lim = memlimit.Limit{Name: "MemAvailable in /proc/meminfo", Bytes: n}
	}
	for _, l := range others {
		if l.Bytes < lim.Bytes {
			lim = l
		}
	}
	n := lim.Bytes
	if peak.Model+peak.Cache <= n {
		return nil
	}
	peak.Available, peak.Limit = n, lim.Name
	peak.FitsBytes = roundDownUnit(int64(float64(peak.FTL.LogicalBytes) * float64(n) / float64(peak.Model+peak.Cache)))
	peak.ModelDominates = peak.Model > peak.Cache
	return peak
}

// roundDownUnit rounds n down to a whole number of its largest binary unit (at least 1 MiB).
func roundDownUnit(n int64) int64 {
	for _, m := range []int64{1 << 40, 1 << 30, 1 << 20} {
		if n >= m {
			return n / m * m
		}
	}
	return 1 << 20
}
