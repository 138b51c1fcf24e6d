package ftl

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/rbctl/rbctl/units"
)

// ErrCannotReclaim marks a configuration in which garbage collection can run out of room
// (Feasibility().OK() is false); match it with errors.Is, read the figures with errors.As
// and *InfeasibleError.
var ErrCannotReclaim = errors.New("garbage collection can run out of room")

// Tunable says which parameters of a configuration its owner can change, so that an
// InfeasibleError offers only fixes within reach (a real device's RU size and handle
// count are the device's).
type Tunable struct {
	OP      bool
	OPMax   float64 // the largest OP worth suggesting
	RU      bool
	Handles bool
}

// InfeasibleError is a configuration GC cannot always make room in, with the nearest
// feasible values of the tunable parameters (zero: none within reach).
type InfeasibleError struct {
	What        string // what the configuration models ("this emulated device")
	Config      Config
	Feasibility Feasibility
	MinOP       float64 // smallest feasible OP, in steps of 0.01
	MaxRUBytes  int64   // largest feasible RU size, halving from Config's
	MaxHandles  int     // most feasible handles, fewer than Config's
}

func (e *InfeasibleError) Unwrap() error { return ErrCannotReclaim }

// Fixes are the nearest feasible values (zero: none within reach), for a caller that phrases
// them without importing this package (rbctl's hints).
func (e *InfeasibleError) Fixes() (minOP float64, maxRUBytes int64, maxHandles int) {
	return e.MinOP, e.MaxRUBytes, e.MaxHandles
}

// Error states the rule and the shortfall; the fixes are fields, for the caller to phrase.
func (e *InfeasibleError) Error() string {
	f, c := e.Feasibility, e.Config
	var parts []string
	if f.HostRUs > 1 {
		parts = append(parts, fmt.Sprintf("%d open RUs of the other handles", f.HostRUs-1))
	}
	switch {
	case f.Persistent == 0:
		parts = append(parts, "1 shared GC RU")
	case f.Persistent == f.HostRUs:
		parts = append(parts, fmt.Sprintf("%d GC RUs, one per persistently isolated handle,", f.GCRUs))
	default:
		parts = append(parts, fmt.Sprintf("%d GC RUs, one per persistently isolated handle and one shared,", f.GCRUs))
	}
	parts = append(parts, fmt.Sprintf("a reserve of %d", f.Reserve))
	group := ""
	if f.Groups > 1 {
		group = " per reclaim group"
	}
	s := fmt.Sprintf("garbage collection needs %d spare RUs%s (%s); %s has %s (%s, %s RUs, op %g)",
		f.NeedRUs(), group, strings.Join(parts, " + "), e.What, trimFloat(f.SpareRUs()), units.FormatExact(c.LogicalBytes),
		units.FormatExact(c.RUBytes), c.OP)
	if e.MinOP == 0 && e.MaxRUBytes == 0 && e.MaxHandles == 0 {
		s += ": this geometry cannot hold its open RUs (docs/ftl.md, Feasibility)"
	}
	return s
}

// CheckFeasible returns nil when GC can always make room in c, else an *InfeasibleError
// naming c as what, with the fixes t allows. It fails with ErrConfig on a configuration New
// rejects for another reason than its capacity.
func (c Config) CheckFeasible(what string, t Tunable) error {
	f, err := c.Feasibility()
	if err != nil {
		return err
	}
	if f.OK() {
		return nil
	}
	e := &InfeasibleError{What: what, Config: c, Feasibility: f}
	if t.OP && c.RUsPerGroup == 0 {
		e.MinOP, _ = c.minFeasibleOP(t.OPMax)
	}
	if t.RU {
		e.MaxRUBytes, _ = c.maxFeasibleRU()
	}
	if t.Handles {
		e.MaxHandles, _ = c.maxFeasibleHandles()
	}
	return e
}

func (c Config) feasible() bool {
	f, err := c.Feasibility()
	return err == nil && f.OK()
}

// minFeasibleOP is the smallest OP, in steps of 0.01 up to limit, at which c is feasible.
func (c Config) minFeasibleOP(limit float64) (float64, bool) {
	for i := int(math.Floor(c.OP*100)) + 1; float64(i)/100 <= limit; i++ {
		c.OP = float64(i) / 100
		if c.feasible() {
			return c.OP, true
		}
	}
	return 0, false
}

// maxFeasibleRU is the largest RU, halving from c's, at which c is feasible.
func (c Config) maxFeasibleRU() (int64, bool) {
	for ru := c.RUBytes / 2; ru >= c.MappingUnit && c.MappingUnit > 0 && ru%c.MappingUnit == 0; ru /= 2 {
		c.RUBytes = ru
		if c.feasible() {
			return ru, true
		}
	}
	return 0, false
}

// maxFeasibleHandles is the most handles, fewer than c's, at which c is feasible.
func (c Config) maxFeasibleHandles() (int, bool) {
	for h := c.Handles - 1; h >= 1; h-- {
		c.Handles = h
		if c.HandleIsolation != nil {
			c.HandleIsolation = c.HandleIsolation[:min(h, len(c.HandleIsolation))]
		}
		if c.feasible() {
			return h, true
		}
	}
	return 0, false
}

func trimFloat(v float64) string { return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64) }
