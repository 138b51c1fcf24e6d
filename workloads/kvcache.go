package workloads

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Tenant describes one cache_salt's traffic in the KV-cache model.
type Tenant struct {
	Salt         string  // cache_salt; "" for none
	Weight       float64 // share of requests
	Prefixes     int     // distinct shared prefixes (system prompts, documents)
	PrefixTokens int     // tokens in each shared prefix
	Theta        float64 // Zipf skew of prefix popularity (0 = uniform)
	Sessions     int     // conversations open at once
	Turns        float64 // mean turns per conversation (geometric); 1 = single-shot
	PromptTokens int     // mean new tokens per turn (uniform in [½, 1½]×mean)
	OutputTokens int     // mean generated tokens per turn, part of the next turn's history
	// TTL is how long this tenant's chunks stay cached, in capacity-writes: a chunk is
	// deleted once the cache has stored TTL × its capacity in bytes since it was stored
	// (0 = until evicted). The driver enforces it; tenants with different TTLs are the
	// different data lifetimes FDP placement separates.
	TTL float64
}

// DefaultTenant is a chat tenant: a few popular system prompts, multi-turn conversations.
func DefaultTenant(salt string) Tenant {
	return Tenant{Salt: salt, Weight: 1, Prefixes: 8, PrefixTokens: 1024, Theta: 0.9, Sessions: 64,
		Turns: 4, PromptTokens: 384, OutputTokens: 256}
}

// KVConfig configures the KV-cache workload model.
type KVConfig struct {
	Tenants          []Tenant
	ChunkTokens      int     // tokens per cached chunk (LMCache's chunk_size, default 256)
	BytesPerToken    int     // KV bytes per token for one kv_rank (see ModelPresets)
	MaxContextTokens int     // a conversation ends when its context would exceed this
	ReadOnlyFrac     float64 // fraction of requests that only look up and load (no store)
	Requests         int64   // stream length; 0 = unbounded (the caller stops)
	Seed             uint64
}

// ModelPreset is the KV footprint of a model: 2 (K and V) × layers × KV heads × head dim ×
// bytes per element, all kv_ranks together; for an MLA model (Latent > 0, DeepSeek-V2/V3)
// one latent of Latent elements per layer instead.
type ModelPreset struct {
	Name                     string
	Layers, KVHeads, HeadDim int
	ElemBytes                int
	Latent                   int // MLA: kv_lora_rank + qk_rope_head_dim; 0 for K/V heads
}

// BytesPerToken is the KV bytes one token occupies.
func (m ModelPreset) BytesPerToken() int {
	if m.Latent > 0 {
		return m.Layers * m.Latent * m.ElemBytes
	}
	return 2 * m.Layers * m.KVHeads * m.HeadDim * m.ElemBytes
}

// ModelPresets are common models in bf16 (GQA where the model uses it). "tiny" is a 4 KiB/token
// toy for quick runs on small devices.
var ModelPresets = []ModelPreset{
	{"llama3-8b", 32, 8, 128, 2, 0},   // 128 KiB/token
	{"mistral-7b", 32, 8, 128, 2, 0},  // 128 KiB/token
	{"qwen2.5-7b", 28, 4, 128, 2, 0},  // 56 KiB/token
	{"llama3-70b", 80, 8, 128, 2, 0},  // 320 KiB/token
	{"llama2-7b", 32, 32, 128, 2, 0},  // 512 KiB/token (no GQA)
	{"tiny", 2, 8, 64, 2, 0},          // 4 KiB/token
	{"deepseek-v3", 61, 0, 0, 2, 576}, // MLA, 512 + 64 latent: 68.6 KiB/token
}

// LookupModel finds a preset by name.
func LookupModel(name string) (ModelPreset, error) {
	var names []string
	for _, m := range ModelPresets {
		if m.Name == name {
			return m, nil
		}
		names = append(names, m.Name)
	}
	return ModelPreset{}, fmt.Errorf("unknown model preset %q (known: %s)", name, strings.Join(names, ", "))
}

// ChunkBytes is the payload of one full chunk.
func (c *KVConfig) ChunkBytes() int { return c.ChunkTokens * c.BytesPerToken }

// Validate checks the knobs.
func (c *KVConfig) Validate() error {
	if len(c.Tenants) == 0 {
		return errors.New("kv workload: no tenants")
	}
	if c.ChunkTokens <= 0 || c.BytesPerToken <= 0 {
		return fmt.Errorf("kv workload: chunk tokens (%d) and bytes per token (%d) must be positive", c.ChunkTokens, c.BytesPerToken)
	}
	if c.ReadOnlyFrac < 0 || c.ReadOnlyFrac > 1 {
		return fmt.Errorf("kv workload: read-only fraction %g outside [0,1]", c.ReadOnlyFrac)
	}
	var w float64
	seen := map[string]bool{}
	for i, t := range c.Tenants {
		if seen[t.Salt] {
			return fmt.Errorf("kv workload: tenant %q listed twice", t.Salt)
		}
		seen[t.Salt] = true
		if err := t.check(); err != nil {
			return fmt.Errorf("kv workload: tenant %d (%q): %v", i, t.Salt, err)
		}
		w += t.Weight
	}
	if w <= 0 {
		return errors.New("kv workload: tenant weights sum to zero")
	}
	return nil
}

// check names the first knob out of its range (NaN and infinities are out of every range).
func (t Tenant) check() error {
	for _, k := range []struct {
		name string
		v    float64
		min  float64
	}{
		{"w", t.Weight, 0}, {"prefixes", float64(t.Prefixes), 1}, {"prefix", float64(t.PrefixTokens), 0},
		{"theta", t.Theta, 0}, {"sessions", float64(t.Sessions), 1}, {"turns", t.Turns, 1},
		{"prompt", float64(t.PromptTokens), 1}, {"output", float64(t.OutputTokens), 0}, {"ttl", t.TTL, 0},
	} {
		if !(k.v >= k.min) || math.IsInf(k.v, 0) {
			return fmt.Errorf("%s=%g: want a finite number of at least %g", k.name, k.v, k.min)
		}
	}
	return nil
}

// ParseTenant parses "salt:key=value,key=value" (keys: w, prefixes, prefix, theta, sessions,
// turns, prompt, output, ttl), starting from DefaultTenant.
func ParseTenant(s string) (Tenant, error) {
	salt, rest, _ := strings.Cut(s, ":")
	t := DefaultTenant(salt)
	if rest == "" {
		return t, nil
	}
	for _, kv := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return t, fmt.Errorf("tenant %q: %q is not key=value", s, kv)
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return t, fmt.Errorf("tenant %q: %s=%q is not a finite number", s, k, v)
		}
		if f > 1<<40 {
			return t, fmt.Errorf("tenant %q: %s=%q is too large", s, k, v)
		}
		switch k {
		case "w", "weight":
			t.Weight = f
		case "prefixes":
			t.Prefixes = int(f)
		case "prefix":
			t.PrefixTokens = int(f)
		case "theta":
			t.Theta = f
		case "sessions":
			t.Sessions = int(f)
		case "turns":
			t.Turns = f
		case "prompt":
			t.PromptTokens = int(f)
		case "output":
			t.OutputTokens = int(f)
		case "ttl":
			t.TTL = f
		default:
			return t, fmt.Errorf("tenant %q: unknown knob %q (w, prefixes, prefix, theta, sessions, turns, prompt, output, ttl)", s, k)
		}
	}
	if err := t.check(); err != nil {
		return t, fmt.Errorf("tenant %q: %v", s, err)
	}
	return t, nil
}

// MultiTenant is the preset behind the FDP WAF table: a chat tenant whose conversations are
// dropped soon after they end (short lifetime), a RAG tenant with long shared documents kept
// until evicted (long lifetime), and an agent tenant in between.
func MultiTenant() []Tenant {
	chat := DefaultTenant("chat")
	chat.Weight, chat.TTL = 4, 0.15
	rag := DefaultTenant("rag")
	rag.Weight, rag.Prefixes, rag.PrefixTokens, rag.Theta, rag.Turns, rag.PromptTokens, rag.OutputTokens, rag.TTL =
		1, 4096, 4096, 0.6, 1, 256, 128, 0
	agent := DefaultTenant("agent")
	agent.Weight, agent.Turns, agent.PromptTokens, agent.TTL = 2, 8, 512, 0.5
	return []Tenant{chat, rag, agent}
}

// MaxWorkers bounds the workers:N preset.
const MaxWorkers = 4096

// Workers is the workers:N preset ("8"): N identical chat tenants of equal weight, worker
// i with salt "workerI:kv", as LMCache's FDP stress runner runs N workers each writing its
// own region. The salt's "workerI" prefix is its bucket under LMCache's cache_salt_prefix
// placement; with budgets "equal" each worker gets an even share of the cache.
func Workers(n string) ([]Tenant, error) {
	w, err := strconv.Atoi(n)
	if err != nil || w < 1 || w > MaxWorkers {
		return nil, fmt.Errorf("%w: workers:%s: want workers:N with N from 1 to %d", ErrSpec, n, MaxWorkers)
	}
	ts := make([]Tenant, w)
	for i := range ts {
		ts[i] = DefaultTenant("worker" + strconv.Itoa(i) + ":kv")
	}
	return ts, nil
}

type conversation struct {
	id     uint64
	prefix uint64 // shared prefix id
	tokens int    // context so far (prefix + previous turns)
	turns  int    // turns left
	open   bool
}

// KVGen generates the KV-cache request stream.
type KVGen struct {
	cfg    KVConfig
	r      *rand.Rand
	cum    []float64
	zipf   []*Zipf
	convs  [][]conversation
	nextID uint64
	n      int64
	keys   []Key
	salts  []string
}

// NewKV builds a generator; it returns an error for invalid knobs.
func NewKV(cfg KVConfig) (*KVGen, error) {
	if cfg.MaxContextTokens == 0 {
		cfg.MaxContextTokens = 32768
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &KVGen{cfg: cfg, r: newRand(cfg.Seed)}
	var sum float64
	for _, t := range cfg.Tenants {
		sum += t.Weight
		g.cum = append(g.cum, sum)
		g.zipf = append(g.zipf, NewZipf(uint64(t.Prefixes), t.Theta))
		g.convs = append(g.convs, make([]conversation, t.Sessions))
		g.salts = append(g.salts, t.Salt)
	}
	return g, nil
}

// Salts implements Generator.
func (g *KVGen) Salts() []string { return g.salts }

// ChunkBytes implements Generator.
func (g *KVGen) ChunkBytes() int { return g.cfg.ChunkBytes() }

// Config returns the knobs in use (with defaults filled in).
func (g *KVGen) Config() KVConfig { return g.cfg }

// Next implements Generator: one request per call.
func (g *KVGen) Next(op *Op) bool {
	if g.cfg.Requests > 0 && g.n >= g.cfg.Requests {
		return false
	}
	g.n++
	x := g.r.Float64() * g.cum[len(g.cum)-1]
	ti := 0
	for ti < len(g.cum)-1 && x >= g.cum[ti] {
		ti++
	}
	t := &g.cfg.Tenants[ti]
	c := &g.convs[ti][g.r.IntN(len(g.convs[ti]))]
	prompt := around(g.r, t.PromptTokens)
	if !c.open || c.turns <= 0 || c.tokens+prompt > g.cfg.MaxContextTokens {
		g.nextID++
		*c = conversation{id: g.nextID, prefix: g.zipf[ti].Next(g.r), tokens: t.PrefixTokens, open: true,
			turns: geometric(g.r, t.Turns)}
	}
	total := c.tokens + prompt
	nchunks := total / g.cfg.ChunkTokens // only full chunks are cached
	g.keys = g.keys[:0]
	for i := 0; i < nchunks; i++ {
		var h uint64
		if (i+1)*g.cfg.ChunkTokens <= t.PrefixTokens {
			// Wholly inside the shared prefix: the same for every conversation on it.
			h = hash2(hash2(uint64(ti)<<32|0xfeed, c.prefix), uint64(i))
		} else {
			h = hash2(hash2(uint64(ti)<<32|0xc0, c.id), uint64(i))
		}
		g.keys = append(g.keys, Key{Hash: h, Tenant: int32(ti)})
	}
	c.tokens = total + around(g.r, t.OutputTokens)
	c.turns--
	*op = Op{Kind: KindRequest, Tenant: int32(ti), Keys: g.keys, Size: g.cfg.ChunkBytes(),
		ReadOnly: g.cfg.ReadOnlyFrac > 0 && g.r.Float64() < g.cfg.ReadOnlyFrac}
	return true
}

// geometric draws a count ≥ 1 with the given mean.
func geometric(r *rand.Rand, mean float64) int {
	if mean <= 1 {
		return 1
	}
	p := 1 / mean
	n := 1
	for r.Float64() >= p && n < 1<<20 {
		n++
	}
	return n
}
