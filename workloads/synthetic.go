package workloads

import (
	"fmt"
	"math/rand/v2"
	"strconv"
)

// Pattern selects how a synthetic generator picks keys.
type Pattern string

const (
	Sequential Pattern = "sequential" // key i, i+1, ... wrapping at Keys
	Uniform    Pattern = "uniform"    // uniformly random keys
	ZipfKeys   Pattern = "zipf"       // Zipf(Theta) popularity, key 0 the most popular
)

// SyntheticConfig configures a single-key workload.
type SyntheticConfig struct {
	Pattern  Pattern
	Keys     uint64  // key space
	Theta    float64 // Zipf skew
	ReadFrac float64 // fraction of gets; the rest are puts
	Size     int     // payload bytes per key
	Tenants  int     // keys are spread over this many salts (t0, t1, ...) by key; 0 = no salt
	Ops      int64   // stream length; 0 = unbounded
	Seed     uint64
}

// Synthetic generates put/get ops on single keys.
type Synthetic struct {
	cfg   SyntheticConfig
	r     *rand.Rand
	z     *Zipf
	next  uint64
	n     int64
	key   [1]Key
	salts []string
}

// NewSynthetic builds a generator.
func NewSynthetic(cfg SyntheticConfig) (*Synthetic, error) {
	switch cfg.Pattern {
	case Sequential, Uniform, ZipfKeys:
	default:
		return nil, fmt.Errorf("unknown synthetic pattern %q (sequential, uniform, zipf)", cfg.Pattern)
	}
	if cfg.Keys == 0 || cfg.Size <= 0 {
		return nil, fmt.Errorf("synthetic workload: keys (%d) and size (%d) must be positive", cfg.Keys, cfg.Size)
	}
	if cfg.ReadFrac < 0 || cfg.ReadFrac > 1 {
		return nil, fmt.Errorf("synthetic workload: read fraction %g outside [0,1]", cfg.ReadFrac)
	}
	s := &Synthetic{cfg: cfg, r: newRand(cfg.Seed)}
	if cfg.Pattern == ZipfKeys {
		s.z = NewZipf(cfg.Keys, cfg.Theta)
	}
	if cfg.Tenants <= 0 {
		s.salts = []string{""}
	} else {
		for i := 0; i < cfg.Tenants; i++ {
			s.salts = append(s.salts, "t"+strconv.Itoa(i))
		}
	}
	return s, nil
}

// Salts implements Generator.
func (s *Synthetic) Salts() []string { return s.salts }

// ChunkBytes implements Generator.
func (s *Synthetic) ChunkBytes() int { return s.cfg.Size }

// Next implements Generator.
func (s *Synthetic) Next(op *Op) bool {
	if s.cfg.Ops > 0 && s.n >= s.cfg.Ops {
		return false
	}
	s.n++
	var k uint64
	switch s.cfg.Pattern {
	case Sequential:
		k = s.next % s.cfg.Keys
		s.next++
	case Uniform:
		k = s.r.Uint64N(s.cfg.Keys)
	case ZipfKeys:
		k = s.z.Next(s.r)
	}
	kind := KindPut
	if s.cfg.ReadFrac > 0 && s.r.Float64() < s.cfg.ReadFrac {
		kind = KindGet
	}
	t := int32(k % uint64(len(s.salts)))
	s.key[0] = Key{Hash: mix(k), Tenant: t}
	*op = Op{Kind: kind, Tenant: t, Keys: s.key[:], Size: s.cfg.Size}
	return true
}
