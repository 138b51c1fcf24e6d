package cli

// The CLI contract (docs/cli.md), enforced here for every command rather than per command:
// exit codes, flag ranges, interruption and the escaping of untrusted text on output.

import (
	"context"
	"errors"
	"io/fs"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagcheck"
	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
	"github.com/rbctl/rbctl/reports"
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
var errInterrupted = flagsets.ErrInterrupted

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

// flagRule is the accepted range of one flag (flagcheck.Rule; OpenMin excludes Min).
type flagRule = flagcheck.Rule

const (
	ruleInt      = flagcheck.Int      // integer in [Min, Max]
	ruleFloat    = flagcheck.Float    // float in [Min, Max] (finite)
	ruleFraction = flagcheck.Fraction // float in [0, 1] unless Min/Max narrow it
	ruleDuration = flagcheck.Duration // duration in [Min, Max] (seconds in Min/Max)
	ruleSize     = flagcheck.Size     // size string in [Min, Max] bytes, or one of Words
	ruleAny      = flagcheck.Any      // any value the type accepts (IDs decided by the device)
)

const (
	maxCount = 1 << 40
	maxBytes = 1 << 62
)

func intRule(min, max float64) flagRule { return flagRule{Kind: ruleInt, Min: min, Max: max} }
func sizeRule(min float64, words ...string) flagRule {
	return flagRule{Kind: ruleSize, Min: min, Max: maxBytes, Words: words}
}
func durRule(minSec float64, openMin bool, zero string) flagRule {
	return flagRule{Kind: ruleDuration, Min: minSec, Max: 10 * 365 * 24 * 3600, OpenMin: openMin, Zero: zero}
}

// flagRules holds the range of every non-boolean, non-enum flag, by flag name, with
// "command path/--flag" entries where one command gives a name its own meaning. The test
// TestEveryNumericFlagHasARule keeps it complete.
var flagRules = map[string]flagRule{
	// durations
	"duration":            {Kind: ruleDuration, Min: 0, Max: 10 * 365 * 24 * 3600, OpenMin: true, Zero: "no time limit, with --requests", ZeroNeeds: "requests"},
	"warmup-timeout":      durRule(0, true, ""),
	"checkpoint-interval": durRule(0.1, false, ""), // each checkpoint writes the whole index
	"watch":               durRule(0.001, false, "no refresh: one screen"),
	"min-run":             durRule(0.001, false, "the default, 20ms"),
	"max-run":             durRule(0.001, false, "the default, 250ms"),

	// counts
	"workers":           intRule(1, 4096),
	"queue-depth":       intRule(1, 4096),
	"handles":           intRule(1, 65535),
	"keys":              intRule(1, maxCount),
	"requests":          {Kind: ruleInt, Min: 1, Max: maxCount, Zero: "no limit"},
	"chunk-tokens":      intRule(1, 1<<20),
	"max-context":       intRule(1, 1<<30),
	"synthetic-tenants": intRule(1, 4096),
	"trace-loops":       intRule(1, 1<<20),
	"reserve":           {Kind: ruleInt, Min: 1, Max: 1 << 20, Zero: "the minimum, 1"},
	"checkpoint-ops":    {Kind: ruleInt, Min: 1, Max: maxCount, Zero: "never"},
	"count":             {Kind: ruleInt, Min: 1, Max: maxCount, Zero: "until interrupted"},
	"events":            intRule(0, 1<<16),
	"max-keys":          {Kind: ruleInt, Min: 1, Max: maxCount, Zero: "all"},
	"kills":             intRule(1, 1<<20),
	"slots":             {Kind: ruleInt, Min: 4, Max: 1 << 24, Zero: "the default, 96"},
	"clean-every":       {Kind: ruleInt, Min: 2, Max: 1 << 20, Zero: "never"}, // 1: every cycle clean, no kill ever counted
	"corrupt-every":     {Kind: ruleInt, Min: 1, Max: 1 << 20, Zero: "never"},
	"fault-every":       {Kind: ruleInt, Min: 1, Max: 1 << 20, Zero: "never"},
	"torn-every":        {Kind: ruleInt, Min: 1, Max: 1 << 20, Zero: "never"},
	"io-queues":         intRule(1, 1024),
	"queue-size":        intRule(2, 65536),
	"block-align":       {Kind: ruleInt, Min: 512, Max: 1 << 24, Pow2: true},
	"seed":              {Kind: ruleAny},

	// fractions and rates
	"util":           {Kind: ruleFraction, Min: 0, Max: 1, OpenMin: true},
	"read-frac":      {Kind: ruleFraction, Min: 0, Max: 1},
	"read-only-frac": {Kind: ruleFraction, Min: 0, Max: 1},
	"fault-prob":     {Kind: ruleFraction, Min: 0, Max: 1},
	"op":             {Kind: ruleFraction, Min: 0, Max: 0.9},
	"theta":          {Kind: ruleFloat, Min: 0, Max: 10},
	"rate":           {Kind: ruleFloat, Min: 0, Max: 1e9, Zero: "closed loop"},
	"speed":          {Kind: ruleFloat, Min: 0, Max: 1e9, Zero: "as fast as possible"},
	"warmup":         {Kind: ruleFloat, Min: 0, Max: 1000},
	"measure":        {Kind: ruleFloat, Min: 0, Max: 1000, OpenMin: true},

	// sizes
	"ru":              sizeRule(4096, "auto"),
	"capacity":        sizeRule(1, "0"),
	"slot-bytes":      sizeRule(512),
	"header-bytes":    sizeRule(512),
	"meta-bytes":      sizeRule(4096, "auto"),
	"create":          sizeRule(4096, ""),
	"value-size":      sizeRule(1, ""),
	"region":          sizeRule(4096, ""),
	"bytes-per-token": sizeRule(1, ""),
	"unit":            {Kind: ruleSize, Min: 512, Max: maxBytes, MultipleOf: 512, Words: []string{"auto"}}, // the simulated engine's block alignment

	// NVMe identifiers: the device decides; the type bounds them.
	"namespace-id":       {Kind: ruleAny},
	"endgrp-id":          {Kind: ruleAny},
	"enable-conf-idx":    {Kind: ruleAny},
	"placement-handle":   {Kind: ruleAny},
	"rank":               {Kind: ruleAny},
	"group":              {Kind: ruleAny}, // object_group_id: up to 2^63-1, checked with the key
	"lid":                {Kind: ruleAny},
	"lsi":                {Kind: ruleAny},
	"lsp":                {Kind: ruleAny},
	"offset":             {Kind: ruleAny},
	"rbctl nvme log/len": {Kind: ruleInt, Min: 4, Max: 1 << 26, MultipleOf: 4},

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

	// serve: the cache node's peer timeouts and lease, and the replica handle (-1: policy).
	"lease":          {Kind: ruleDuration, Min: 0.001, Max: 60}, // the longest lease a node grants
	"peer-timeout":   durRule(0.001, false, ""),
	"fetch-timeout":  durRule(0.001, false, ""),
	"replica-handle": intRule(-1, 65535),
	"max-leases":     intRule(1, 1<<24), "max-leases-per-client": intRule(1, 1<<24),
	"resp-max-conns": intRule(1, 1<<20), "resp-conns-per-addr": intRule(1, 1<<20), "resp-memory": sizeRule(1 << 20),
	"record-max-bytes": sizeRule(4096), "record-files": intRule(0, 1<<20),
	"resp-idle-timeout": durRule(0, false, "never (valkey's timeout 0)"),

	// cluster-bench: the cluster and its workload (clusterbench.Options bounds them too).
	"nodes":                        intRule(2, 16),
	"tenants":                      intRule(1, 4096),
	"prefix-chunks":                intRule(1, 256),
	"unique-chunks":                intRule(0, 255),
	"chunk-size":                   {Kind: ruleSize, Min: 4096, Max: maxBytes, MultipleOf: 4096},
	"rbctl cluster-bench/handles":  intRule(2, 65535), // a node needs two (clusterbench.Options)
	"rbctl cluster-bench/requests": {Kind: ruleInt, Min: 1, Max: 1 << 24, Zero: "1200, or the whole trace"},
	"rbctl cluster-bench/ru":       sizeRule(4096),
	"interval":                     durRule(0, false, "back to back"),

	// simulate: the modelled device's size (--capacity, a hidden alias, is format's
	// "bytes of the device the cache uses").
	"device-size":              sizeRule(1 << 20),
	"rbctl recover/slot-bytes": sizeRule(512, ""), "rbctl recover/header-bytes": sizeRule(512, ""), "rbctl recover/meta-bytes": sizeRule(4096, ""),
	"rbctl recover/block-align": {Kind: ruleInt, Min: 512, Max: 1 << 24, Pow2: true, Zero: "the default, 4096"},
}

// ruleFor finds f's rule: a size rule applies to string flags only (other string flags are
// free text or enums checked by their command), every other rule to numeric flags only.
func ruleFor(cmd *cobra.Command, f *pflag.Flag) (flagRule, bool) {
	if r, ok := flagRules[cmd.CommandPath()+"/"+f.Name]; ok {
		return r, true
	}
	r, ok := flagRules[f.Name]
	if !ok || (r.Kind == ruleSize) != (f.Value.Type() == "string") || (r.Kind != ruleSize && !flagcheck.Numeric(f)) {
		return flagRule{}, false
	}
	return r, true
}

// validateFlags checks every flag of cmd against its rule. It runs before any command, so no
// command starts with a value outside its range.
func validateFlags(cmd *cobra.Command) error { return flagcheck.Validate(cmd, ruleFor) }

// rbEscape renders untrusted text (keys, salts, model names read from a device or given on
// the command line) with control characters and invalid UTF-8 escaped (reports.Escape).
func rbEscape(s string) string { return reports.Escape(s) }

// rulesMarkdown and flagsMarkdown render docs/cli.md's generated tables (kept in step by
// TestCLIDocFlagTable).
func rulesMarkdown(root *cobra.Command) string { return flagcheck.RulesMarkdown(root, ruleFor) }
func flagsMarkdown(root *cobra.Command) string { return flagcheck.FlagsMarkdown(root, ruleFor) }
