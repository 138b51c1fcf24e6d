package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
	"github.com/rbctl/rbctl/devices/safety"
	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/placement"
	"github.com/rbctl/rbctl/sim"
	"github.com/rbctl/rbctl/units"
	"github.com/rbctl/rbctl/workloads"
)

// Library packages state facts in their own terms (the engine names LMCache's config
// fields, meta_total_bytes or block_align); only the CLI knows which flag of the running
// command sets them. withFlagHints appends that, for the flags the command has.

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

// flagHints returns the hints for err on cmd, each naming a flag cmd has.
func flagHints(cmd *cobra.Command, err error) []string {
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

// withFlagHints appends flagHints to err ("...; hint; hint"), keeping it for errors.Is.
func withFlagHints(cmd *cobra.Command, err error) error {
	if err == nil {
		return nil
	}
	hints := flagHints(cmd, err)
	if len(hints) == 0 {
		return err
	}
	return fmt.Errorf("%w; %s", err, strings.Join(hints, "; "))
}

// hintAll wraps the RunE of c and of every command under it with withFlagHints.
func hintAll(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error { return withFlagHints(cmd, run(cmd, args)) }
	}
	for _, sub := range c.Commands() {
		hintAll(sub)
	}
}

// runHints phrases the fix of bench's and simulate's refusals: a geometry the FTL model
// refuses (flagsets.ModelHints) and a simulation too large for memory.
func runHints(has func(string) bool, err error) []string {
	var me *sim.MemoryError
	switch {
	case errors.As(err, &me) && me.ModelDominates && has("unit"):
		return []string{"use a bigger --unit (" + units.FormatSpec(2*me.FTL.MappingUnit) + " or more; slots round up to it) or a smaller --device-size"}
	case errors.As(err, &me) && has("device-size"):
		return []string{"use a smaller --device-size (about " + units.FormatSpec(me.FitsBytes) + " fits)"}
	}
	return flagsets.ModelHints(has, err)
}
