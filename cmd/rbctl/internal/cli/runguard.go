package cli

// Checks bench and simulate make before they run anything: the FTL configuration is one in
// which GC can always make room (ftl.Config.Feasibility), a simulation fits in memory, and
// the --save/--plot destinations are writable. Each refusal names the fix in real flags.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/ftl"
)

// feasKnobs names the knobs that change a configuration's spare space, as the user types
// them: flags ("--op") or emu: spec parameters ("op="). An empty name is a knob the user
// cannot turn (a real device's RU size and handle count).
type feasKnobs struct {
	op, ru, handles string
	where           string // appended to the fix ("in the emu: spec")
	opMax           float64
}

var (
	flagKnobs = feasKnobs{op: "--op ", ru: "--ru ", handles: "--handles ", opMax: 0.9}
	// A real FDP device: the shadow model's OP is ours, RUs and handles are the device's.
	shadowKnobs = feasKnobs{op: "--op ", opMax: 0.9}
	emuKnobs    = feasKnobs{op: "op=", ru: "ru=", handles: "ruhs=", where: " in the emu: spec", opMax: 1}
)

// checkFeasible refuses a configuration in which garbage collection could run out of room.
// what names the device ("this emulated device", "the shadow model of DEV").
func checkFeasible(c ftl.Config, what string, k feasKnobs) error {
	f, err := c.Feasibility()
	if err != nil {
		return err
	}
	if f.OK() {
		return nil
	}
	return errors.New(feasibilityText(c, f, what, k))
}

// feasibilityText states the rule for c and the fix in one sentence.
func feasibilityText(c ftl.Config, f ftl.Feasibility, what string, k feasKnobs) string {
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
		f.NeedRUs(), group, strings.Join(parts, " + "), what, trimFloat(f.SpareRUs()), rbBytesExact(c.LogicalBytes),
		rbBytesExact(c.RUBytes), c.OP)
	var fixes []string
	if k.op != "" && c.RUsPerGroup == 0 {
		if op, ok := minFeasibleOP(c, k.opMax); ok {
			fixes = append(fixes, k.op+trimFloat(op))
		}
	}
	if k.ru != "" {
		if ru, ok := maxFeasibleRU(c); ok {
			fixes = append(fixes, "a smaller "+strings.TrimSpace(k.ru)+" (at most "+emu.FormatSize(ru)+")")
		}
	}
	if k.handles != "" {
		if h, ok := maxFeasibleHandles(c); ok {
			fixes = append(fixes, "fewer "+strings.TrimSpace(k.handles)+" (at most "+strconv.Itoa(h)+")")
		}
	}
	switch len(fixes) {
	case 0:
		return s + ": this geometry cannot hold its open RUs (docs/ftl.md, Feasibility)"
	case 1:
		return s + ": use " + fixes[0] + k.where
	}
	return s + ": use " + strings.Join(fixes[:len(fixes)-1], ", ") + " or " + fixes[len(fixes)-1] + k.where
}

func trimFloat(v float64) string { return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64) }

func feasibleWith(c ftl.Config) bool {
	f, err := c.Feasibility()
	return err == nil && f.OK()
}

// minFeasibleOP is the smallest OP, in steps of 0.01, at which c becomes feasible.
func minFeasibleOP(c ftl.Config, limit float64) (float64, bool) {
	for i := int(math.Floor(c.OP*100)) + 1; float64(i)/100 <= limit; i++ {
		c.OP = float64(i) / 100
		if feasibleWith(c) {
			return c.OP, true
		}
	}
	return 0, false
}

// maxFeasibleRU is the largest RU, halving from c's, at which c becomes feasible.
func maxFeasibleRU(c ftl.Config) (int64, bool) {
	for ru := c.RUBytes / 2; ru >= c.MappingUnit && ru%c.MappingUnit == 0; ru /= 2 {
		c.RUBytes = ru
		if feasibleWith(c) {
			return ru, true
		}
	}
	return 0, false
}

// maxFeasibleHandles is the most handles, fewer than c's, at which c becomes feasible.
func maxFeasibleHandles(c ftl.Config) (int, bool) {
	for h := c.Handles - 1; h >= 1; h-- {
		c.Handles = h
		if c.HandleIsolation != nil {
			c.HandleIsolation = c.HandleIsolation[:h]
		}
		if feasibleWith(c) {
			return h, true
		}
	}
	return 0, false
}

// checkOutputs makes sure --save and --plot can be written before anything runs: the
// directory exists (or is created) and a file can be created in it.
func (o *reportOutFlags) checkOutputs() error {
	if o.save != "" {
		if st, err := os.Stat(o.save); err == nil && st.IsDir() {
			return fmt.Errorf("--save %s: is a directory; give a file name", o.save)
		}
		if err := writableDir(filepath.Dir(o.save)); err != nil {
			return fmt.Errorf("--save %s: %w", o.save, err)
		}
	}
	if o.plot != "" {
		if err := writableDir(o.plot); err != nil {
			return fmt.Errorf("--plot %s: %w", o.plot, err)
		}
	}
	return nil
}

func writableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create the directory: %w", errors.Unwrap(err))
	}
	f, err := os.CreateTemp(dir, ".rbctl-write-check-*")
	if err != nil {
		return fmt.Errorf("directory %s is not writable: %w", dir, errors.Unwrap(err))
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// memAvailable returns MemAvailable from /proc/meminfo; a variable so tests can pose as a
// small machine.
var memAvailable = func() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseMemAvailable(io.LimitReader(f, 1<<20))
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
