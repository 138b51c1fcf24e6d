package emu

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"

	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/ftl"
	byteunits "github.com/rbctl/rbctl/units"
)

// Prefix starts every emulated-SSD device spec.
const Prefix = "emu:"

// ErrSpec: the device spec is malformed or describes an impossible device.
var ErrSpec = errors.New("emu: invalid device spec")

// SpecError is an error of a device the spec describes whose fix lies in the spec's
// parameters (op=, ru=, ruhs=) rather than in a command's flags; errors.Is finds ErrSpec
// and, through Err, the cause.
type SpecError struct{ Err error }

func (e *SpecError) Error() string   { return e.Err.Error() }
func (e *SpecError) Unwrap() []error { return []error{ErrSpec, e.Err} }

// Spec describes an emulated FDP SSD. The string form (docs/emulator.md) is
//
//	emu:PATH?size=4G&ru=64M&ruhs=8&rg=1&op=0.07&iso=persistent&gc=greedy&lba=4096
//
// with PATH a sparse data file (created if missing) or "mem" for memory.
type Spec struct {
	Path      string        // data file; "" keeps the data in memory
	Size      int64         // namespace capacity in bytes (size=, default 1G)
	LBASize   int           // logical block size (lba=, 512 or 4096; default 4096)
	RUSize    int64         // reclaim unit nominal size (ru=, default 16M)
	RUHs      int           // reclaim unit handles = placement handles of the namespace (ruhs=, default 8)
	RGs       int           // reclaim groups (rg=, default 1)
	OP        float64       // spare factor ρ = physical/logical − 1 (op=, default 0.07)
	Isolation ftl.Isolation // RUH type of every handle (iso=initial|persistent, default initial)
	// HandleIsolation, when non-nil, gives each handle its own type (iso=initial,persistent,…
	// with one entry per handle); Isolation is then its first entry.
	HandleIsolation []ftl.Isolation
	GC              ftl.GCPolicy // garbage collection victim policy (gc=greedy|cost-benefit)
	MappingUnit     int64        // FTL mapping unit (mu=, default = LBASize)
	FDP             bool         // FDP enabled when the device is created (fdp=on|off, default on)
	// given records which parameters the spec string set, so a reopen can tell a
	// deliberate change from a default.
	given map[string]bool
}

// DefaultSpec is the device an empty query gives.
func DefaultSpec() Spec {
	return Spec{Size: 1 << 30, LBASize: 4096, RUSize: 16 << 20, RUHs: 8, RGs: 1, OP: 0.07, FDP: true}
}

// IsSpec reports whether a device path names the emulated SSD.
func IsSpec(path string) bool { return strings.HasPrefix(path, Prefix) }

// ParseSpec parses an emu: device spec.
func ParseSpec(s string) (Spec, error) {
	if !IsSpec(s) {
		return Spec{}, fmt.Errorf("%w: %q does not start with %q", ErrSpec, s, Prefix)
	}
	rest := strings.TrimPrefix(s, Prefix)
	path, query, _ := strings.Cut(rest, "?")
	sp := DefaultSpec()
	sp.given = map[string]bool{}
	if path != "mem" && path != "" {
		sp.Path = path
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return Spec{}, fmt.Errorf("%w: %q: %v", ErrSpec, query, err)
	}
	for k, vs := range q {
		v := vs[len(vs)-1]
		bad := func(why string) error {
			return fmt.Errorf("%w: %s=%s: %s", ErrSpec, k, v, why)
		}
		if len(vs) > 1 {
			return Spec{}, fmt.Errorf("%w: %s is given %d times (%s=%s); give it once", ErrSpec, k, len(vs), k, strings.Join(vs, "&"+k+"="))
		}
		sp.given[k] = true
		switch k {
		case "size":
			if sp.Size, err = byteunits.ParseSize(v); err != nil {
				return Spec{}, bad(err.Error())
			}
		case "ru":
			if sp.RUSize, err = byteunits.ParseSize(v); err != nil {
				return Spec{}, bad(err.Error())
			}
		case "mu":
			if sp.MappingUnit, err = byteunits.ParseSize(v); err != nil {
				return Spec{}, bad(err.Error())
			}
		case "lba":
			n, err := byteunits.ParseSize(v)
			if err != nil || (n != 512 && n != 4096) {
				return Spec{}, bad("logical block size must be 512 or 4096")
			}
			sp.LBASize = int(n)
		case "ruhs":
			if sp.RUHs, err = strconv.Atoi(v); err != nil || sp.RUHs < 1 || sp.RUHs > 128 {
				return Spec{}, bad("reclaim unit handles must be 1..128")
			}
		case "rg":
			if sp.RGs, err = strconv.Atoi(v); err != nil || sp.RGs < 1 || sp.RGs > 64 {
				return Spec{}, bad("reclaim groups must be 1..64")
			}
		case "op":
			if sp.OP, err = strconv.ParseFloat(v, 64); err != nil || sp.OP < 0 || sp.OP > 10 || math.IsNaN(sp.OP) {
				return Spec{}, bad("spare factor must be a number in 0..10 (0.07 = 7 % extra flash)")
			}
		case "iso":
			if sp.Isolation, sp.HandleIsolation, err = parseIsolation(v); err != nil {
				return Spec{}, bad("isolation must be initial or persistent, or a comma list with one per handle")
			}
		case "gc":
			if sp.GC, err = ftl.ParseGCPolicy(v); err != nil {
				return Spec{}, bad("gc must be greedy or cost-benefit")
			}
		case "fdp":
			switch v {
			case "on", "1", "true":
				sp.FDP = true
			case "off", "0", "false":
				sp.FDP = false
			default:
				return Spec{}, bad("fdp must be on or off")
			}
		default:
			return Spec{}, fmt.Errorf("%w: unknown parameter %q; known: size, ru, ruhs, rg, op, iso, gc, lba, mu, fdp", ErrSpec, k)
		}
	}
	return sp, sp.validate()
}

func (s *Spec) validate() error {
	if s.MappingUnit == 0 {
		s.MappingUnit = int64(s.LBASize)
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrSpec}, a...)...)
	}
	lb := int64(s.LBASize)
	switch {
	case s.LBASize != 512 && s.LBASize != 4096:
		return bad("logical block size %d (512 or 4096)", s.LBASize)
	case s.MappingUnit < lb || s.MappingUnit%lb != 0:
		return bad("mapping unit %d must be a multiple of the logical block size %d", s.MappingUnit, lb)
	case s.Size <= 0 || s.Size%s.MappingUnit != 0:
		return bad("size %d must be a positive multiple of the mapping unit %d", s.Size, s.MappingUnit)
	case s.RUSize <= 0 || s.RUSize%s.MappingUnit != 0:
		return bad("reclaim unit size %d must be a positive multiple of the mapping unit %d", s.RUSize, s.MappingUnit)
	case s.RUHs < 1 || s.RUHs > 128:
		return bad("%d reclaim unit handles (1..128)", s.RUHs)
	case s.RGs < 1 || s.RGs > 64:
		return bad("%d reclaim groups (1..64)", s.RGs)
	}
	if s.HandleIsolation != nil && len(s.HandleIsolation) != s.RUHs {
		return bad("iso= lists %d handle types for %d handles", len(s.HandleIsolation), s.RUHs)
	}
	if s.RUHs > 1<<(16-fdp.RGIFFor(uint32(s.RGs))) {
		return bad("%d handles do not fit a PID beside %d reclaim groups", s.RUHs, s.RGs)
	}
	return nil
}

// String renders the spec in its canonical string form.
func (s Spec) String() string {
	p := s.Path
	if p == "" {
		p = "mem"
	}
	str := fmt.Sprintf("%s%s?size=%s&ru=%s&ruhs=%d&rg=%d&op=%g&iso=%s&gc=%s&lba=%d",
		Prefix, p, byteunits.FormatSpec(s.Size), byteunits.FormatSpec(s.RUSize), s.RUHs, s.RGs, s.OP, s.isoString(), s.GC, s.LBASize)
	if s.MappingUnit != int64(s.LBASize) {
		str += "&mu=" + byteunits.FormatSpec(s.MappingUnit)
	}
	return str
}

// handleIsolation returns the isolation of handle h.
func (s *Spec) handleIsolation(h int) ftl.Isolation {
	if s.HandleIsolation != nil {
		return s.HandleIsolation[h]
	}
	return s.Isolation
}

// isoString renders the isolation as the iso= parameter takes it.
func (s *Spec) isoString() string {
	name := func(i ftl.Isolation) string {
		if i == ftl.PersistentlyIsolated {
			return "persistent"
		}
		return "initial"
	}
	if s.HandleIsolation == nil {
		return name(s.Isolation)
	}
	parts := make([]string, len(s.HandleIsolation))
	for i, v := range s.HandleIsolation {
		parts[i] = name(v)
	}
	return strings.Join(parts, ",")
}

// parseIsolation parses "initial", "persistent" or a comma list of them.
func parseIsolation(v string) (ftl.Isolation, []ftl.Isolation, error) {
	if !strings.Contains(v, ",") {
		i, err := ftl.ParseIsolation(v)
		return i, nil, err
	}
	var list []ftl.Isolation
	for _, f := range strings.Split(v, ",") {
		i, err := ftl.ParseIsolation(strings.TrimSpace(f))
		if err != nil {
			return 0, nil, err
		}
		list = append(list, i)
	}
	return list[0], list, nil
}
