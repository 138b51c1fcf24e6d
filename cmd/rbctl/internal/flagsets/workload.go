package flagsets

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagcheck"
	"github.com/rbctl/rbctl/devices/safety"
	"github.com/rbctl/rbctl/placement"
	"github.com/rbctl/rbctl/workloads"
)

// Workload is the workload and driver flags bench and simulate share (workloads.Spec).
type Workload struct {
	Spec       workloads.Spec
	WriteTrace string
}

// Register defines the workload flags on fs; defaultModel is the --model default.
func (w *Workload) Register(fs *pflag.FlagSet, defaultModel string) {
	var models []string
	for _, m := range workloads.ModelPresets {
		models = append(models, fmt.Sprintf("%s (%d KiB/token)", m.Name, m.BytesPerToken()>>10))
	}
	s := &w.Spec
	fs.StringVar(&s.Kind, "workload", "kv", "kv, sequential, uniform, zipf, trace:FILE (.jsonl or .csv), mooncake:FILE (a Mooncake request trace; docs/bench.md) or l2trace:FILE[,FILE...] (a node's recording; docs/record.md)")
	fs.StringVar(&s.Preset, "preset", "multi-tenant", "kv tenants when no --tenant is given: multi-tenant (chat/rag/agent with different lifetimes), chat, "+
		"or workers:N (N equal tenants worker0:kv..., one per stress-runner worker)")
	fs.StringArrayVar(&s.Tenants, "tenant", nil, "kv tenant SALT:k=v,... (w, prefixes, prefix, theta, sessions, turns, prompt, output, ttl); repeatable")
	fs.StringVar(&s.Model, "model", defaultModel, "model preset for KV bytes per token: "+strings.Join(models, ", "))
	fs.StringVar(&s.ModelConfig, "model-config", "", "a Hugging Face config.json to size the KV cache by instead of --model (MLA models too)")
	flagcheck.SizeVar(fs, &s.BytesPerToken, "bytes-per-token", "", "override the model's KV bytes per token (e.g. 128K)")
	fs.IntVar(&s.ChunkTokens, "chunk-tokens", 256, "tokens per cached chunk (LMCache chunk_size)")
	fs.IntVar(&s.MaxContext, "max-context", 32768, "kv: a conversation ends when its context would exceed this many tokens")
	fs.Float64Var(&s.ReadOnlyFrac, "read-only-frac", 0, "kv: fraction of requests that only look up and load")
	fs.Int64Var(&s.Requests, "requests", 0, "stop after this many ops (0: no limit)")
	fs.Uint64Var(&s.Seed, "seed", 1, "generator seed (same seed, same ops)")
	fs.Uint64Var(&s.Keys, "keys", 100000, "synthetic: key space")
	fs.Float64Var(&s.Theta, "theta", 0.99, "synthetic zipf: skew")
	fs.Float64Var(&s.ReadFrac, "read-frac", 0.5, "synthetic: fraction of gets")
	flagcheck.SizeVar(fs, &s.ValueSize, "value-size", "", "synthetic: payload bytes per key (default: one kv chunk)")
	fs.IntVar(&s.SyntheticTenants, "synthetic-tenants", 4, "synthetic: spread keys over this many salts")
	fs.StringVar((*string)(&s.Eviction), "eviction", "lru", "cache eviction at the target utilisation: lru, fifo, region (whole regions of one tenant, least recent first) or region-fifo")
	flagcheck.SizeVar(fs, &s.Region, "region", "", "region size for --eviction region/region-fifo (default: the reclaim unit size: the device's FDP configuration, else --ru)")
	fs.Var(budgetsValue{&s.Budgets}, "budgets", "per-tenant slot budgets SALT=N|SIZE|P%,...; '*' for every other salt, equal (or *=equal) for an even split: "+
		"a tenant evicts only its own entries; salts without a budget share the rest (docs/simulate.md)")
	fs.Float64Var(&s.Util, "util", 0.9, "target utilisation: the cache evicts to keep this fraction of its slots in use")
	fs.IntVar(&s.Workers, "workers", 1, "concurrent requests")
	fs.Float64Var(&s.Rate, "rate", 0, "arrival rate in requests/s (Poisson); 0 = closed loop")
	fs.StringVar(&w.WriteTrace, "write-trace", "", "write the generated ops (--requests of them) as a trace file (.jsonl or .csv) and exit")
	fs.IntVar(&s.TraceLoops, "trace-loops", 1, "trace: replay the trace this many times")
	fs.StringVar(&s.SaltBy, "salt-by", "root", "mooncake: each request's cache_salt: none, root (its first block), hash:N (the root in N buckets), prefix:N (its first N blocks) or group[:F] (the block after its shared prompt, a block F (16) or more blocks follow; docs/bench.md)")
	fs.StringVar(&s.L2Replay, "l2-replay", "recorded", "l2trace: recorded (the recorded gets, fetches, sets and deletes) or misses (a get that misses in the replay stores the chunk; recorded sets are dropped: for comparing admission policies; docs/record.md)")
	fs.Float64Var(&s.Speed, "speed", 0, "mooncake: replay the trace's timestamps this many times faster (0: as fast as possible)")
	fs.StringVar(&s.Admission, "admission", "all", "which missed chunks are stored: all, second-hit[:W], tinylfu[:W] or prefix-depth:N; simulate compares a comma-separated list (docs/bench.md)")
}

// budgetsValue is --budgets, parsed when set so that a malformed spec is refused with the
// flag's name before anything runs.
type budgetsValue struct{ b *placement.Budgets }

func (v budgetsValue) String() string { return v.b.String() }
func (v budgetsValue) Type() string   { return "budgets" }
func (v budgetsValue) Set(s string) error {
	b, err := placement.ParseBudgets(s)
	if err == nil {
		*v.b = b
	}
	return err
}

// Inputs are the files the workload reads (a trace), for the output checks.
func (w *Workload) Inputs() []string {
	for _, p := range []string{"trace:", "mooncake:"} {
		if f, ok := strings.CutPrefix(w.Spec.Kind, p); ok {
			return []string{f}
		}
	}
	if fs, ok := strings.CutPrefix(w.Spec.Kind, "l2trace:"); ok {
		return strings.Split(fs, ",")
	}
	return nil
}

// Fit says which of a recording node's cache settings an l2trace replay takes: those whose
// flags were not given (sizeFlags and --util for its size, --eviction, --admission).
func (w *Workload) Fit(fs *pflag.FlagSet, sizeFlags ...string) workloads.Fit {
	size := !fs.Changed("util")
	for _, f := range sizeFlags {
		size = size && !fs.Changed(f)
	}
	return workloads.Fit{Size: size, Eviction: !fs.Changed("eviction"), Admission: !fs.Changed("admission")}
}

// IsTrace says the workload replays a request trace (mooncake:FILE) or a node's recording
// (l2trace:FILE), which runs whole.
func (w *Workload) IsTrace() bool {
	return strings.HasPrefix(w.Spec.Kind, "mooncake:") || strings.HasPrefix(w.Spec.Kind, "l2trace:")
}

// Traced writes the trace --write-trace asks for, reporting it on out; done says the
// command ends there. inputs are the command's other inputs (its devices), which the trace
// must not be written over.
func (w *Workload) Traced(out io.Writer, inputs ...string) (done bool, err error) {
	if w.WriteTrace == "" {
		return false, nil
	} else if w.Spec.Requests <= 0 {
		return true, fmt.Errorf("--write-trace needs --requests N (how many ops to write)")
	}
	if err := safety.Output("--write-trace", w.WriteTrace, append(inputs, w.Inputs()...)); err != nil {
		return true, err
	}
	src, err := w.Spec.Build()
	if err != nil {
		return true, err
	}
	n, err := workloads.WriteTrace(w.WriteTrace, src, w.Spec.Requests)
	if err == nil {
		fmt.Fprintf(out, "wrote %d ops to %s\n", n, w.WriteTrace)
	}
	return true, err
}
