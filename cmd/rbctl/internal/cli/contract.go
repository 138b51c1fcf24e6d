package cli

// The CLI contract (docs/cli.md), enforced here for every command rather than per command:
// exit codes, flag ranges, interruption and the escaping of untrusted text on output.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rbctl/rbctl/units"
)

// Exit codes (docs/cli.md).
const (
	exitOK          = 0
	exitError       = 1
	exitUnsupported = 2 // the device lacks the feature (FDP)
	exitNotFound    = 3 // a key or a device that does not exist
	exitInterrupted = 130
)

// errInterrupted marks a command stopped by SIGINT/SIGTERM. A command that printed a partial
// result returns it (wrapped or bare); Execute maps it, and any error while the context is
// cancelled, to exitInterrupted.
var errInterrupted = errors.New("interrupted")

// errNotFound marks a key or device that does not exist; it maps to exitNotFound.
var errNotFound = errors.New("not found")

// notFound wraps err so that it exits with exitNotFound.
func notFound(err error) error { return &ExitError{Code: exitNotFound, Err: err} }

// exitCode maps an error returned by a command to the process exit code.
func exitCode(ctx context.Context, err error) int {
	var ee *ExitError
	switch {
	case errors.As(err, &ee):
		return ee.Code
	case errors.Is(err, errInterrupted), ctx.Err() != nil, errors.Is(err, context.Canceled):
		return exitInterrupted
	case errors.Is(err, errNotFound), errors.Is(err, fs.ErrNotExist):
		return exitNotFound
	case err != nil:
		return exitError
	}
	return exitOK
}

// ruleKind says how a flag's value is checked.
type ruleKind int

const (
	ruleInt      ruleKind = iota // integer in [min, max]
	ruleFloat                    // float in [min, max] (finite)
	ruleFraction                 // float in [0, 1] unless min/max narrow it
	ruleDuration                 // duration in [min, max] (seconds in min/max)
	ruleSize                     // size string in [min, max] bytes, or one of words
	ruleAny                      // any value the type accepts (IDs decided by the device)
)

// flagRule is the accepted range of one flag. open* exclude the bound itself.
type flagRule struct {
	kind       ruleKind
	min, max   float64
	openMin    bool
	words      []string // size flags: words accepted besides sizes (auto, "")
	zero       string   // what 0 means, when 0 is outside [min, max] but accepted
	pow2       bool     // integer: a power of two
	multipleOf int64    // integer: a multiple of this
	zeroNeeds  string   // 0 is accepted only when this other flag is non-zero
}

const (
	maxCount = 1 << 40
	maxBytes = 1 << 62
)

func intRule(min, max float64) flagRule { return flagRule{kind: ruleInt, min: min, max: max} }
func sizeRule(min float64, words ...string) flagRule {
	return flagRule{kind: ruleSize, min: min, max: maxBytes, words: words}
}
func durRule(minSec float64, openMin bool, zero string) flagRule {
	return flagRule{kind: ruleDuration, min: minSec, max: 10 * 365 * 24 * 3600, openMin: openMin, zero: zero}
}

// flagRules holds the range of every non-boolean, non-enum flag, by flag name, with
// "command path/--flag" entries where one command gives a name its own meaning. The test
// TestEveryNumericFlagHasARule keeps it complete.
var flagRules = map[string]flagRule{
	// durations
	"duration":            {kind: ruleDuration, min: 0, max: 10 * 365 * 24 * 3600, openMin: true, zero: "no time limit, with --requests", zeroNeeds: "requests"},
	"warmup-timeout":      durRule(0, true, ""),
	"checkpoint-interval": durRule(0, true, ""),
	"watch":               durRule(0.001, false, "no refresh: one screen"),
	"min-run":             durRule(0.001, false, "the default, 20ms"),
	"max-run":             durRule(0.001, false, "the default, 250ms"),

	// counts
	"workers":           intRule(1, 4096),
	"queue-depth":       intRule(1, 4096),
	"handles":           intRule(1, 65535),
	"keys":              intRule(1, maxCount),
	"requests":          {kind: ruleInt, min: 1, max: maxCount, zero: "no limit"},
	"chunk-tokens":      intRule(1, 1<<20),
	"max-context":       intRule(1, 1<<30),
	"synthetic-tenants": intRule(1, 4096),
	"trace-loops":       intRule(1, 1<<20),
	"reserve":           {kind: ruleInt, min: 1, max: 1 << 20, zero: "the minimum, 1"},
	"checkpoint-ops":    {kind: ruleInt, min: 1, max: maxCount, zero: "never"},
	"count":             {kind: ruleInt, min: 1, max: maxCount, zero: "until interrupted"},
	"events":            intRule(0, 1<<16),
	"max-keys":          {kind: ruleInt, min: 1, max: maxCount, zero: "all"},
	"kills":             intRule(1, 1<<20),
	"slots":             {kind: ruleInt, min: 4, max: 1 << 24, zero: "the default, 96"},
	"clean-every":       {kind: ruleInt, min: 1, max: 1 << 20, zero: "never"},
	"corrupt-every":     {kind: ruleInt, min: 1, max: 1 << 20, zero: "never"},
	"fault-every":       {kind: ruleInt, min: 1, max: 1 << 20, zero: "never"},
	"torn-every":        {kind: ruleInt, min: 1, max: 1 << 20, zero: "never"},
	"io-queues":         intRule(1, 1024),
	"queue-size":        intRule(2, 65536),
	"block-align":       {kind: ruleInt, min: 512, max: 1 << 24, pow2: true},
	"seed":              {kind: ruleAny},

	// fractions and rates
	"util":           {kind: ruleFraction, min: 0, max: 1, openMin: true},
	"read-frac":      {kind: ruleFraction, min: 0, max: 1},
	"read-only-frac": {kind: ruleFraction, min: 0, max: 1},
	"fault-prob":     {kind: ruleFraction, min: 0, max: 1},
	"op":             {kind: ruleFraction, min: 0, max: 0.9},
	"theta":          {kind: ruleFloat, min: 0, max: 10},
	"rate":           {kind: ruleFloat, min: 0, max: 1e9, zero: "closed loop"},
	"warmup":         {kind: ruleFloat, min: 0, max: 1000},
	"measure":        {kind: ruleFloat, min: 0, max: 1000, openMin: true},

	// sizes
	"size":            sizeRule(1, ""),
	"ru":              sizeRule(4096, "auto"),
	"capacity":        sizeRule(1, "0"),
	"slot-bytes":      sizeRule(512),
	"header-bytes":    sizeRule(512),
	"meta-bytes":      sizeRule(4096, "auto"),
	"create":          sizeRule(4096, ""),
	"value-size":      sizeRule(1, ""),
	"region":          sizeRule(4096, ""),
	"bytes-per-token": sizeRule(1, ""),
	"unit":            sizeRule(512, "auto"),

	// NVMe identifiers: the device decides; the type bounds them.
	"nsid":               {kind: ruleAny},
	"namespace-id":       {kind: ruleAny},
	"endgrp-id":          {kind: ruleAny},
	"enable-conf-idx":    {kind: ruleAny},
	"placement-handle":   {kind: ruleAny},
	"rank":               {kind: ruleAny},
	"lid":                {kind: ruleAny},
	"lsi":                {kind: ruleAny},
	"lsp":                {kind: ruleAny},
	"offset":             {kind: ruleAny},
	"rbctl nvme log/len": {kind: ruleInt, min: 4, max: 1 << 26, multipleOf: 4},

	// emu serve: the NVMe/TCP target's limits (nvmetcp.New takes these ranges).
	"rbctl emu serve/io-queues":  intRule(1, 128),
	"rbctl emu serve/queue-size": intRule(2, 1024),
	"write-budget":               sizeRule(1 << 20),
	"max-connections":            intRule(1, 1<<16),
	"max-controllers":            intRule(1, 0xFFEF),
	"handshake-timeout":          durRule(0.001, false, ""),
	"stall-timeout":              durRule(0.001, false, ""),
	"keepalive-slack":            durRule(0.001, false, ""),
	"idle-timeout":               durRule(0.001, false, ""),

	// simulate: --capacity is the modelled device's size.
	"rbctl simulate/capacity": sizeRule(1 << 20),
}

// ruleFor finds f's rule: a size rule applies to string flags only (other string flags are
// free text or enums checked by their command), every other rule to numeric flags only.
func ruleFor(cmd *cobra.Command, f *pflag.Flag) (flagRule, bool) {
	if r, ok := flagRules[cmd.CommandPath()+"/"+f.Name]; ok {
		return r, true
	}
	r, ok := flagRules[f.Name]
	if !ok {
		return flagRule{}, false
	}
	if r.kind == ruleSize && f.Value.Type() != "string" {
		return flagRule{}, false
	}
	if r.kind != ruleSize && !numericFlag(f) {
		return flagRule{}, false
	}
	return r, true
}

// numericFlag reports whether f's type needs a rule.
func numericFlag(f *pflag.Flag) bool {
	switch f.Value.Type() {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64",
		"float32", "float64", "duration":
		return true
	}
	return false
}

// validateFlags checks every flag of cmd against its rule. It runs before any command, so no
// command starts with a value outside its range.
func validateFlags(cmd *cobra.Command) error {
	var errs []error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		r, ok := ruleFor(cmd, f)
		if !ok {
			return
		}
		if err := r.check(f); err != nil {
			errs = append(errs, err)
			return
		}
		if r.zeroNeeds != "" && isZero(f) {
			if o := cmd.Flags().Lookup(r.zeroNeeds); o != nil && isZero(o) {
				errs = append(errs, fmt.Errorf("--%s 0 needs --%s > 0 (otherwise the run never ends)", f.Name, r.zeroNeeds))
			}
		}
	})
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// isZero reports whether a numeric flag holds 0.
func isZero(f *pflag.Flag) bool {
	if d, err := time.ParseDuration(f.Value.String()); err == nil {
		return d == 0
	}
	v, err := strconv.ParseFloat(f.Value.String(), 64)
	return err == nil && v == 0
}

func (r flagRule) rangeText() string {
	lo := "["
	if r.openMin {
		lo = "("
	}
	num := func(v float64) string {
		switch {
		case r.kind == ruleDuration:
			return (time.Duration(v * float64(time.Second))).String()
		case r.kind == ruleSize:
			return rbBytesExact(int64(v))
		case v >= 1<<20 && v == math.Trunc(v) && r.kind == ruleInt:
			return "2^" + strconv.Itoa(int(math.Round(math.Log2(v))))
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	s := lo + num(r.min) + ", " + num(r.max) + "]"
	if r.kind == ruleDuration && r.max >= 365*24*3600 {
		s = "> 0"
		if !r.openMin {
			s = ">= " + num(r.min)
		}
	}
	if r.kind == ruleSize {
		s = "a size of at least " + num(r.min) + " (e.g. 4096, 64K, 1MiB, 2G)"
		var w []string
		for _, x := range r.words {
			if x != "" {
				w = append(w, strconv.Quote(x))
			}
		}
		if len(w) > 0 {
			s += " or " + strings.Join(w, ", ")
		}
	}
	if r.pow2 {
		s += ", a power of two"
	}
	if r.multipleOf > 1 {
		s += ", a multiple of " + strconv.FormatInt(r.multipleOf, 10)
	}
	if r.zero != "" {
		s += " (or 0: " + r.zero + ")"
	}
	return s
}

func rbBytesExact(n int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.m && n%u.m == 0 {
			return strconv.FormatInt(n/u.m, 10) + " " + u.s
		}
	}
	return strconv.FormatInt(n, 10) + " B"
}

func (r flagRule) check(f *pflag.Flag) error {
	bad := func() error {
		return fmt.Errorf("--%s %s: out of range; want %s", f.Name, f.Value.String(), r.rangeText())
	}
	in := func(v float64) bool {
		if r.zero != "" && v == 0 {
			return true
		}
		if math.IsNaN(v) || math.IsInf(v, 0) || v > r.max || v < r.min || (r.openMin && v == r.min) {
			return false
		}
		return true
	}
	switch r.kind {
	case ruleAny:
		return nil
	case ruleDuration:
		d, err := time.ParseDuration(f.Value.String())
		if err != nil {
			return fmt.Errorf("--%s %s: %v", f.Name, f.Value.String(), err)
		}
		if !in(d.Seconds()) {
			return bad()
		}
	case ruleInt:
		s := f.Value.String()
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("--%s %s: not a number", f.Name, s)
		}
		if !in(v) {
			return bad()
		}
		n, _ := strconv.ParseInt(s, 10, 64)
		if r.pow2 && n > 0 && n&(n-1) != 0 {
			return bad()
		}
		if r.multipleOf > 1 && n%r.multipleOf != 0 {
			return bad()
		}
	case ruleFloat, ruleFraction:
		v, err := strconv.ParseFloat(f.Value.String(), 64)
		if err != nil {
			return fmt.Errorf("--%s %s: not a number", f.Name, f.Value.String())
		}
		if !in(v) {
			return bad()
		}
	case ruleSize:
		s := strings.TrimSpace(f.Value.String())
		for _, w := range r.words {
			if strings.EqualFold(s, w) {
				return nil
			}
		}
		n, err := units.ParseSize(s)
		if err != nil {
			return fmt.Errorf("--%s %q: %v; want %s", f.Name, f.Value.String(), err, r.rangeText())
		}
		if !in(float64(n)) {
			return bad()
		}
	}
	return nil
}

// rbEscape renders untrusted text (keys, salts, model names read from a device or given on
// the command line) with control characters and invalid UTF-8 escaped, so that output never
// carries terminal escape sequences or line breaks that were not ours.
func rbEscape(s string) string {
	clean := true
	for _, c := range s {
		if c < 0x20 || c == 0x7f || c == '\\' || (c >= 0x80 && c < 0xa0) || c == 0xfffd {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	q := strconv.QuoteToASCII(s)
	return q[1 : len(q)-1]
}

// rulesMarkdown renders every flag rule as the table docs/cli.md carries (kept in step by
// TestCLIDocFlagTable).
func rulesMarkdown(root *cobra.Command) string {
	uses := map[string][]string{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if r, ok := ruleFor(c, f); ok && r.kind != ruleAny {
				key := f.Name + "\x00" + r.rangeText()
				uses[key] = append(uses[key], strings.TrimPrefix(c.CommandPath(), "rbctl "))
			}
		})
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	keys := make([]string, 0, len(uses))
	for k := range uses {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("| flag | commands | accepted values |\n|---|---|---|\n")
	for _, k := range keys {
		name, rng, _ := strings.Cut(k, "\x00")
		fmt.Fprintf(&b, "| `--%s` | %s | %s |\n", name, strings.Join(uses[k], ", "), strings.ReplaceAll(rng, "|", "\\|"))
	}
	return b.String()
}
