package workloads

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/rbctl/rbctl/placement"
)

// Spec describes a workload and how the cache is driven, as rbctl bench and rbctl simulate
// take it (docs/bench.md). Build turns it into a Source; Driver into a DriverConfig.
type Spec struct {
	Kind          string   // kv, sequential, uniform, zipf, trace:FILE (.jsonl or .csv), mooncake:FILE or l2trace:FILE[,FILE...]
	Preset        string   // kv without Tenants: multi-tenant (default), chat or workers:N
	Tenants       []string // kv tenants as ParseTenant takes them
	Model         string   // model preset (ModelPresets) for KV bytes per token
	ModelConfig   string   // a Hugging Face config.json to take the KV size from instead of Model
	BytesPerToken int64    // overrides the model's (0: the model's)
	ChunkTokens   int      // tokens per cached chunk
	MaxContext    int      // kv: a conversation ends beyond this many tokens
	ReadOnlyFrac  float64  // kv: fraction of requests that only look up and load
	Requests      int64    // stop after this many ops (0: no limit)
	Seed          uint64

	Keys             uint64  // synthetic: key space
	Theta            float64 // synthetic zipf: skew
	ReadFrac         float64 // synthetic: fraction of gets
	ValueSize        int64   // synthetic: payload bytes per key (0: one kv chunk)
	SyntheticTenants int     // synthetic: salts the keys are spread over

	TraceLoops int // trace: replays of the trace

	SaltBy    string  // mooncake: cache_salt rule (ParseSaltBy; "" = root)
	L2Replay  string  // l2trace: L2Recorded ("" too) or L2Misses (l2replay.go)
	Speed     float64 // trace arrival times replayed this many times faster (0: as fast as possible)
	Admission string  // admission policy (NewAdmission; "" = all)

	Eviction Eviction // lru when empty
	Region   int64    // region bytes for regional eviction (0: the reclaim unit)
	Util     float64  // target utilisation, in (0, 1]
	Workers  int
	Rate     float64 // requests/s, Poisson; 0 = closed loop
	// Budgets gives tenants slot budgets of their own (budgets.go); nil: none.
	Budgets placement.Budgets
}

// Source makes identical op streams of a workload (one per run) and says what it is.
type Source struct {
	New        func() (Generator, error)
	TTL        []float64 // per tenant, in capacity-writes
	ChunkBytes int
	Trace      *TraceStats // a request trace's figures (mooncake); nil otherwise
	// TraceWindow, for a request trace, is the figures of its first n requests (a run a
	// duration cut short).
	TraceWindow func(n int64) TraceStats
	// Recorded, for a node's recording (l2trace:FILE), says what it holds and the
	// recording node's cache; nil otherwise.
	Recorded    *Recorded
	Name        string // the workload kind
	Description string
	Salts       []string
}

// ErrSpec marks a workload specification that cannot be built.
var ErrSpec = errors.New("invalid workload")

// Build checks s and returns its Source.
func (s Spec) Build() (*Source, error) {
	m, err := s.model()
	if err != nil {
		return nil, err
	}
	if s.Admission != "" {
		// A comma list is simulate's comparison of several (sim.Options.Admissions).
		for _, a := range strings.Split(s.Admission, ",") {
			if err := CheckAdmission(a); err != nil {
				return nil, err
			}
		}
	}
	if s.SaltBy != "" {
		if _, err := ParseSaltBy(s.SaltBy); err != nil {
			return nil, err
		}
	}
	if s.Speed < 0 || s.Speed > 1e9 {
		return nil, fmt.Errorf("%w: trace speed %g is not in [0, 1e9]", ErrSpec, s.Speed)
	}
	bpt := m.BytesPerToken()
	if s.BytesPerToken < 0 || s.BytesPerToken > 1<<30 {
		return nil, fmt.Errorf("%w: %d KV bytes per token", ErrSpec, s.BytesPerToken)
	} else if s.BytesPerToken > 0 {
		bpt = int(s.BytesPerToken)
	}
	if err := s.checkEviction(); err != nil {
		return nil, err
	}
	chunk := s.ChunkTokens * bpt
	src := &Source{Name: s.Kind, ChunkBytes: chunk}
	switch {
	case s.Kind == "kv":
		ts, err := s.kvTenants()
		if err != nil {
			return nil, err
		}
		cfg := KVConfig{Tenants: ts, ChunkTokens: s.ChunkTokens, BytesPerToken: bpt, MaxContextTokens: s.MaxContext,
			ReadOnlyFrac: s.ReadOnlyFrac, Requests: s.Requests, Seed: s.Seed}
		if _, err := NewKV(cfg); err != nil {
			return nil, err
		}
		src.New = func() (Generator, error) { return NewKV(cfg) }
		var parts []string
		for _, t := range ts {
			src.TTL = append(src.TTL, t.TTL)
			src.Salts = append(src.Salts, t.Salt)
			parts = append(parts, fmt.Sprintf("%s(w=%g,ttl=%g,turns=%g)", t.Salt, t.Weight, t.TTL, t.Turns))
		}
		src.Description = fmt.Sprintf("kv %s, %d tokens/chunk × %d KiB/token = %g MiB chunks, tenants %s", m.Name, s.ChunkTokens, bpt>>10,
			float64(chunk)/(1<<20), strings.Join(parts, " "))
	case strings.HasPrefix(s.Kind, "mooncake:"):
		if err := s.buildMooncake(src, m.Name, bpt); err != nil {
			return nil, err
		}
	case strings.HasPrefix(s.Kind, "l2trace:"):
		if err := s.buildL2(src); err != nil {
			return nil, err
		}
	case strings.HasPrefix(s.Kind, "trace:"):
		path := strings.TrimPrefix(s.Kind, "trace:")
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("workload %s: %w", s.Kind, err)
		}
		tr, err := ReadTrace(f, FormatOf(path))
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		loops := s.TraceLoops
		src.New = func() (Generator, error) { return tr.Replay(loops), nil }
		g := tr.Replay(1)
		src.ChunkBytes, src.Salts = g.ChunkBytes(), g.Salts()
		src.Description = fmt.Sprintf("trace %s: %d ops, %d salts", path, len(tr.Ops), len(src.Salts))
	default:
		size := int64(chunk)
		if s.ValueSize > 0 {
			size = s.ValueSize
		}
		if size > 1<<32 {
			return nil, fmt.Errorf("%w: value size %d is above 4 GiB", ErrSpec, size)
		}
		cfg := SyntheticConfig{Pattern: Pattern(s.Kind), Keys: s.Keys, Theta: s.Theta, ReadFrac: s.ReadFrac,
			Size: int(size), Tenants: s.SyntheticTenants, Ops: s.Requests, Seed: s.Seed}
		g, err := NewSynthetic(cfg)
		if err != nil {
			return nil, fmt.Errorf("workload %s: %w", s.Kind, err)
		}
		src.New = func() (Generator, error) { return NewSynthetic(cfg) }
		src.ChunkBytes, src.Salts = int(size), g.Salts()
		src.Description = fmt.Sprintf("%s over %d keys of %d B, read fraction %g", s.Kind, s.Keys, size, s.ReadFrac)
	}
	if err := s.Budgets.Check(src.Salts); err != nil {
		return nil, err
	}
	if len(s.Budgets) > 0 {
		src.Description += ", budgets " + s.Budgets.String()
	}
	return src, nil
}

// model is the model s sizes its chunks by: ModelConfig's, else the Model preset.
func (s Spec) model() (ModelPreset, error) {
	if s.ModelConfig != "" {
		return LoadModelConfig(s.ModelConfig)
	}
	return LookupModel(s.Model)
}

// buildMooncake reads the Mooncake trace of s.Kind into src.
func (s Spec) buildMooncake(src *Source, model string, bpt int) error {
	if err := CheckChunkTokens(s.ChunkTokens); err != nil {
		return err
	}
	sb, err := ParseSaltBy(cmp.Or(s.SaltBy, "root"))
	if err != nil {
		return err
	}
	path := strings.TrimPrefix(s.Kind, "mooncake:")
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("workload %s: %w", s.Kind, err)
	}
	defer f.Close()
	tr, err := ReadMooncake(f, sb)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	chunk, loops := s.ChunkTokens*bpt, s.TraceLoops
	if s.Requests > 0 && loops <= 1 {
		// --requests is the replayed window: its figures, ceiling and tenants are those
		// of the first Requests requests, not the file's.
		tr = tr.Window(s.Requests)
	}
	src.New = func() (Generator, error) { return tr.Replay(s.ChunkTokens, chunk, loops), nil }
	st := tr.Chunked(s.ChunkTokens)
	src.Salts, src.Trace = tr.Salts(), &st
	src.TraceWindow = func(n int64) TraceStats { return tr.Window(n).Chunked(s.ChunkTokens) }
	what := fmt.Sprintf("%d requests", st.Requests)
	if st.FileRequests > 0 {
		what = fmt.Sprintf("the first %d of %d requests", st.Requests, st.FileRequests)
	}
	src.Description = fmt.Sprintf("mooncake trace %s: %s, %d block references, %d distinct blocks of %d tokens; %s, %d tokens/chunk × %d B/token = %.2f MiB chunks; salt by %s (%d salts)",
		path, what, st.BlockRefs, st.DistinctBlocks, MooncakeBlockTokens, model, s.ChunkTokens, bpt, float64(chunk)/(1<<20), sb, len(src.Salts))
	return nil
}

func (s Spec) kvTenants() ([]Tenant, error) {
	if len(s.Tenants) > 0 {
		var ts []Tenant
		for _, spec := range s.Tenants {
			t, err := ParseTenant(spec)
			if err != nil {
				return nil, err
			}
			ts = append(ts, t)
		}
		return ts, nil
	}
	switch s.Preset {
	case "", "multi-tenant":
		return MultiTenant(), nil
	case "chat":
		return []Tenant{DefaultTenant("chat")}, nil
	}
	if n, ok := strings.CutPrefix(s.Preset, "workers:"); ok {
		return Workers(n)
	}
	return nil, fmt.Errorf("%w: unknown kv preset %q (multi-tenant, chat or workers:N)", ErrSpec, s.Preset)
}

func (s Spec) checkEviction() error {
	if _, err := ParseEviction(string(s.eviction())); err != nil {
		return fmt.Errorf("%w: %w", ErrSpec, err)
	}
	if s.Region < 0 || (s.Region > 0 && !s.Eviction.Regional()) {
		return fmt.Errorf("%w: a region size (%d bytes) applies to region or region-fifo eviction, not %s", ErrSpec, s.Region, s.eviction())
	}
	return nil
}

func (s Spec) eviction() Eviction {
	if s.Eviction == "" {
		return LRU
	}
	return s.Eviction
}

// Driver is the DriverConfig of s for src. ruBytes (0: unknown) sizes the regions of
// regional eviction when s gives no Region; slotBytes is the cache's slot size.
func (s Spec) Driver(src *Source, ruBytes, slotBytes int64) (DriverConfig, error) {
	if err := s.checkEviction(); err != nil {
		return DriverConfig{}, err
	}
	if s.Util <= 0 || s.Util > 1 {
		return DriverConfig{}, fmt.Errorf("%w: target utilisation %g is not a fraction in (0, 1]", ErrSpec, s.Util)
	}
	ev := s.eviction()
	dc := DriverConfig{Eviction: ev, TargetUtil: s.Util, TTL: src.TTL, Workers: s.Workers, Rate: s.Rate, MaxOps: s.Requests, Seed: s.Seed,
		Budgets: s.Budgets, SlotBytes: slotBytes, Speed: s.Speed, Admission: s.Admission}
	if s.Speed > 0 && s.Rate > 0 {
		return dc, fmt.Errorf("%w: a trace's own arrival times (a replay speed) and Poisson arrivals (a rate) do not mix", ErrSpec)
	}
	if !ev.Regional() {
		return dc, nil
	}
	rb := s.Region
	if rb == 0 {
		rb = ruBytes
	}
	if rb == 0 {
		return dc, fmt.Errorf("%w: %s eviction needs a region size and the device's reclaim unit size is unknown", ErrSpec, ev)
	}
	if rb < slotBytes {
		return dc, fmt.Errorf("%w: %s eviction: a region of %d bytes is smaller than one %d-byte slot", ErrSpec, ev, rb, slotBytes)
	}
	dc.RegionSlots = float64(rb) / float64(slotBytes)
	return dc, nil
}

// WriteTrace writes the first n ops of src as a trace file at path (format from its name)
// and returns how many it wrote.
func WriteTrace(path string, src *Source, n int64) (int64, error) {
	if n <= 0 {
		return 0, fmt.Errorf("%w: writing a trace needs a positive op count, not %d", ErrSpec, n)
	}
	g, err := src.New()
	if err != nil {
		return 0, err
	}
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	tw, err := NewTraceWriter(f, FormatOf(path))
	if err != nil {
		return 0, err
	}
	var op Op
	i := int64(0)
	for ; i < n && g.Next(&op); i++ {
		if err := tw.Write(&op, g.Salts()); err != nil {
			return i, err
		}
	}
	if err := tw.Close(); err != nil {
		return i, err
	}
	return i, f.Close()
}
