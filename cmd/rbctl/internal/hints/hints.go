// Package hints is the one place that adds to an error what to type next: library packages
// state facts in their own terms (the engine names LMCache's config fields, meta_total_bytes
// or block_align; the FTL model gives the nearest feasible geometry), and only the CLI knows
// which flag of the running command sets them. Add appends that, for the flags the command
// has.
package hints

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/devices/safety"
	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/placement"
	"github.com/rbctl/rbctl/sim"
	"github.com/rbctl/rbctl/units"
	"github.com/rbctl/rbctl/workloads"
)

// Add appends the hints for err on cmd ("...; hint; hint"), keeping err for errors.Is.
func Add(cmd *cobra.Command, err error) error {
	if err == nil {
		return nil
	}
	h := For(cmd, err)
	if len(h) == 0 {
		return err
	}
	return fmt.Errorf("%w; %s", err, strings.Join(h, "; "))
}

// engineFields maps an engine config field, as engine errors name it, to its flag; a
// layout field is format's when the running command does not set it.
var engineFields = []struct {
	field, flag string
	layout      bool
}{
	{"meta_total_bytes", "meta-bytes", true},
	{"block_align", "block-align", true},
	{"slot_bytes", "slot-bytes", true},
	{"header_bytes", "header-bytes", true},
	{"capacity_bytes", "capacity", true},
	{"namespace", "key-namespace", false},
}

// For returns the hints for err on cmd, each naming a flag cmd has or a command to run.
func For(cmd *cobra.Command, err error) []string {
	has := func(flag string) bool { return cmd.Flags().Lookup(flag) != nil }
	var hints []string
	var fe *engine.FieldError
	if errors.As(err, &fe) {
		var named []string
		for _, f := range engineFields {
			switch {
			case !fe.Has(f.field):
			case has(f.flag):
				named = append(named, f.field+" is --"+f.flag)
			case f.layout:
				named = append(named, f.field+" is rbctl format's --"+f.flag)
			}
		}
		if len(named) > 0 {
			hints = append(hints, strings.Join(named, ", "))
		}
	}
	hints = append(hints, openHints(cmd, err)...)
	switch {
	case errors.Is(err, engine.ErrNoCheckpoint) && errors.Is(err, engine.ErrCorrupt):
		hints = append(hints, "rbctl recover --scan rebuilds it from the slot headers (with --dry-run: what it would rebuild)")
	case errors.Is(err, engine.ErrNoCheckpoint) && cmd.Name() != "format":
		hints = append(hints, "format it first (rbctl format)")
	}
	if has("force") {
		switch {
		case errors.Is(err, safety.ErrHasData) && cmd.Name() == "recover":
			hints = append(hints, "pass --force to overwrite it")
		case errors.Is(err, safety.ErrHasData):
			hints = append(hints, "pass --force to destroy it")
		case errors.Is(err, cache.ErrRefused):
			hints = append(hints, "pass --force to write it anyway (--dry-run lists what would be dropped)")
		}
	}
	hints = append(hints, runHints(has, err)...)
	if errors.Is(err, workloads.ErrRegionTooLarge) && has("region") {
		hints = append(hints, "--region sets the region size")
	}
	if errors.Is(err, blockdev.ErrEmptyFile) {
		switch {
		case has("create"):
			hints = append(hints, "--create SIZE makes it")
		case has("size"):
			hints = append(hints, "--size SIZE makes it")
		default:
			hints = append(hints, "rbctl format --create SIZE makes and formats one")
		}
	}
	if errors.Is(err, placement.ErrOracleOnly) {
		hints = append(hints, "rbctl simulate runs the oracle:* references")
	}
	if errors.Is(err, emu.ErrNoDevice) && cmd.Name() != "format" {
		hints = append(hints, "rbctl format or rbctl emu serve creates it")
	}
	if errors.Is(err, blockdev.ErrNoDirect) && has("direct") {
		hints = append(hints, "--direct=false opens it without O_DIRECT")
	}
	if errors.Is(err, blockdev.ErrNotRegular) {
		for _, f := range []string{"create", "size"} {
			if has(f) {
				hints = append(hints, "--"+f+" is for regular files")
			}
		}
	}
	var le *blockdev.LockedError
	if errors.As(err, &le) && strings.HasSuffix(le.Command, " serve") && cmd.Parent() != nil && cmd.Parent().Parent() == nil {
		hints = append(hints, "a node serves it: rbctl remote ls --server HOST:PORT lists its keys, rbctl remote get reads one")
	}
	if errors.Is(err, blockdev.ErrNeedsPassthrough) && has("io-engine") {
		hints = append(hints, "use --io-engine passthru")
	}
	return hints
}

// openHints phrase what gets past cache.Open's refusals of an existing cache.
func openHints(cmd *cobra.Command, err error) []string {
	var ne *cache.NamespaceError
	var fe *cache.FallbackError
	switch {
	case errors.As(err, &ne):
		return []string{"drop --key-namespace"}
	case errors.Is(err, cache.ErrNamespaceUnknown):
		return []string{"pass --key-namespace object (LMCache MP mode) or --key-namespace legacy (LMCache's non-MP backend)"}
	case errors.As(err, &fe):
		return []string{"run rbctl recover: it takes back the keys whose slots still hold them and writes the repaired index (rbctl inspect shows both containers)"}
	case errors.Is(err, engine.ErrSelectionDoubt):
		return []string{"rbctl inspect shows both containers, rbctl recover --force continues from the one chosen"}
	case errors.Is(err, engine.ErrScanLayout) && !cmd.Flags().Changed("slot-bytes"):
		return []string{"give the cache's --slot-bytes (and --header-bytes, --block-align, --meta-bytes when not the defaults)"}
	}
	return nil
}

// runHints phrases the fix of bench's and simulate's refusals: a simulation too large for
// memory, and a geometry the FTL model refuses (modelHints).
func runHints(has func(string) bool, err error) []string {
	var me *sim.MemoryError
	switch {
	case errors.As(err, &me) && me.ModelDominates && has("unit"):
		return []string{"use a bigger --unit (" + units.FormatSpec(2*me.FTL.MappingUnit) + " or more; slots round up to it) or a smaller --device-size"}
	case errors.As(err, &me) && has("device-size"):
		return []string{"use a smaller --device-size (about " + units.FormatSpec(me.FitsBytes) + " fits)"}
	}
	return modelHints(has, err)
}

// The FTL model's refusals, recognised by their methods so that the CLI imports no model
// package (ftl.ErrNoSpare, *ftl.InfeasibleError).
type (
	spareError    interface{ NeedsSpare() bool }
	geometryError interface {
		Fixes() (minOP float64, maxRUBytes int64, maxHandles int)
	}
)

// modelHints phrases the fix of the FTL model's refusals of a geometry (bench's shadow
// model, simulate, an emulated device): too little over-provisioning, or one GC cannot run
// in. The fix is in the emu: spec's parameters for an emulated device (emu.ErrSpec), else in
// the command's flags.
func modelHints(has func(string) bool, err error) []string {
	var hints []string
	var se spareError
	if errors.As(err, &se) && se.NeedsSpare() {
		switch {
		case has("op"):
			hints = append(hints, "--op sets the over-provisioning")
		case errors.Is(err, emu.ErrSpec):
			hints = append(hints, "op= in the emu: spec sets the over-provisioning")
		}
	}
	var ge geometryError
	if !errors.As(err, &ge) {
		return hints
	}
	minOP, maxRU, maxHandles := ge.Fixes()
	op, ru, handles, where := "--op ", "--ru", "--handles", ""
	if errors.Is(err, emu.ErrSpec) {
		op, ru, handles, where = "op=", "ru=", "ruhs=", " in the emu: spec"
	}
	var fixes []string
	if minOP > 0 && (where != "" || has("op")) {
		fixes = append(fixes, op+strconv.FormatFloat(math.Round(minOP*100)/100, 'f', -1, 64))
	}
	if maxRU > 0 && (where != "" || has("ru")) {
		fixes = append(fixes, "a smaller "+ru+" (at most "+units.FormatSpec(maxRU)+")")
	}
	if maxHandles > 0 && (where != "" || has("handles")) {
		fixes = append(fixes, "fewer "+handles+" (at most "+strconv.Itoa(maxHandles)+")")
	}
	if n := len(fixes); n > 1 {
		fixes = []string{strings.Join(fixes[:n-1], ", ") + " or " + fixes[n-1]}
	}
	if len(fixes) == 1 {
		hints = append(hints, "use "+fixes[0]+where)
	}
	return hints
}
