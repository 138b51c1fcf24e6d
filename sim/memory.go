package sim

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/internal/sys"
	"github.com/rbctl/rbctl/units"
)

// MemAvailable returns MemAvailable from /proc/meminfo.
func MemAvailable() (int64, error) {
	b, err := sys.ReadFileBounded("/proc/meminfo", 1<<20)
	if err != nil {
		return 0, err
	}
	return parseMemAvailable(bytes.NewReader(b))
}

// parseMemAvailable finds "MemAvailable: N kB" in meminfo text.
func parseMemAvailable(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != "MemAvailable" {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil || kb < 0 || kb > math.MaxInt64>>10 {
			return 0, fmt.Errorf("/proc/meminfo: MemAvailable %q is not a size in kB", strings.TrimSpace(rest))
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("/proc/meminfo has no MemAvailable")
}

// ErrNoMemory marks a simulation that does not fit in the memory available.
var ErrNoMemory = errors.New("simulation does not fit in memory")

// MemoryError is a simulation refused for its memory, with what would fit.
type MemoryError struct {
	FTL          ftl.Config // the largest run's model
	Slots        int64
	Model, Cache int64 // estimated bytes: the FTL model, the simulated cache
	Available    int64
	// FitsBytes is about the largest device size that fits, rounded down to its largest
	// binary unit; ModelDominates says the FTL model is the larger part, which a bigger
	// mapping unit (at least 2× the current) shrinks.
	FitsBytes      int64
	ModelDominates bool
}

func (e *MemoryError) Unwrap() error { return ErrNoMemory }

func (e *MemoryError) Error() string {
	return fmt.Sprintf("simulate of %s needs about %s of memory (FTL model %s at %s mapping units, simulated cache %s for %d slots); "+
		"this machine has %s available", units.FormatSize(e.FTL.LogicalBytes), units.FormatSize(e.Model+e.Cache), units.FormatSize(e.Model),
		units.FormatSize(e.FTL.MappingUnit), units.FormatSize(e.Cache), e.Slots, units.FormatSize(e.Available))
}

// checkMemory refuses runs whose estimate (MemoryBytes) exceeds what avail reports; it
// passes when avail cannot tell.
func checkMemory(runs []RunConfig, avail func() (int64, error)) error {
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
	n, err := avail()
	if err != nil || peak.Model+peak.Cache <= n {
		return nil
	}
	peak.Available = n
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
