package workloads

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/bits-and-blooms/bloom/v3"
)

// Admission decides which missed chunks a request stores (docs/bench.md, "Admission"). The
// Driver asks it for every chunk of a request's tail that the cache does not hold, in
// prompt order, and stores the leading run it admits: a chunk after a refused one could
// never be reached by a prefix lookup, so it is not written either (it is still shown to the
// policy, which may keep state about it). Puts (KindPut) are always stored. An Admission is
// used by one Driver, under its lock.
type Admission interface {
	// Name is the spec it was parsed from.
	Name() string
	// Seen records that a request looked k up (hit or miss).
	Seen(k Key)
	// Admit says whether the missed chunk k, at index pos of its request's chunks, is
	// stored. victim is the chunk the cache evicts to make room for it, nil while the cache
	// has room.
	Admit(k Key, pos int, victim *Key) bool
}

// Admission specs.
const (
	AdmitAll       = "all"
	AdmitSecondHit = "second-hit"
	AdmitTinyLFU   = "tinylfu"
	AdmitDepth     = "prefix-depth"
)

// CheckAdmission refuses a malformed admission spec: all, second-hit[:W], tinylfu[:W] or
// prefix-depth:N (W a window in chunks, N chunks).
func CheckAdmission(spec string) error {
	_, err := NewAdmission(spec, 1)
	return err
}

// NewAdmission builds the policy of spec for a cache that keeps target chunks; nil for
// all. second-hit stores a chunk on its second miss within a window of W misses (default:
// target), remembered by a Bloom filter (the doorkeeper) cleared every W; tinylfu stores a
// chunk when a count-min sketch of lookups (aged every W lookups, default 10 × target)
// says it is asked for more often than the chunk it would evict; prefix-depth:N stores
// only a request's first N chunks.
func NewAdmission(spec string, target int64) (Admission, error) {
	name, arg, hasArg := strings.Cut(spec, ":")
	n := int64(0)
	if hasArg {
		v, err := strconv.ParseInt(arg, 10, 64)
		if err != nil || v < 1 || v > 1<<40 {
			return nil, fmt.Errorf("%w: admission %q: %q is not a positive count", ErrSpec, spec, arg)
		}
		n = v
	}
	target = max(target, 1)
	switch {
	case name == AdmitAll && !hasArg:
		return nil, nil
	case name == AdmitSecondHit:
		if n == 0 {
			n = target
		}
		return &secondHit{spec: spec, window: n, f: bloom.NewWithEstimates(uint(min(n, 1<<30)), 0.01)}, nil
	case name == AdmitTinyLFU:
		if n == 0 {
			n = 10 * target
		}
		return &tinyLFU{spec: spec, s: newSketch(n)}, nil
	case name == AdmitDepth && hasArg:
		return depth{spec: spec, n: int(min(n, 1<<30))}, nil
	}
	return nil, fmt.Errorf("%w: admission %q is not all, second-hit[:W], tinylfu[:W] or prefix-depth:N", ErrSpec, spec)
}

func keyBytes(b *[12]byte, k Key) []byte {
	binary.LittleEndian.PutUint64(b[:8], k.Hash)
	binary.LittleEndian.PutUint32(b[8:], uint32(k.Tenant))
	return b[:]
}

type secondHit struct {
	spec   string
	window int64
	added  int64
	f      *bloom.BloomFilter
	buf    [12]byte
}

func (s *secondHit) Name() string { return s.spec }
func (s *secondHit) Seen(Key)     {}
func (s *secondHit) Admit(k Key, _ int, _ *Key) bool {
	if s.f.TestOrAdd(keyBytes(&s.buf, k)) {
		return true
	}
	if s.added++; s.added >= s.window {
		s.f.ClearAll()
		s.added = 0
	}
	return false
}

type tinyLFU struct {
	spec string
	s    *sketch
}

func (t *tinyLFU) Name() string { return t.spec }
func (t *tinyLFU) Seen(k Key)   { t.s.add(k) }
func (t *tinyLFU) Admit(k Key, _ int, victim *Key) bool {
	return victim == nil || t.s.estimate(k) > t.s.estimate(*victim)
}

type depth struct {
	spec string
	n    int
}

func (d depth) Name() string                      { return d.spec }
func (d depth) Seen(Key)                          {}
func (d depth) Admit(_ Key, pos int, _ *Key) bool { return pos < d.n }

// sketch is TinyLFU's frequency sketch: a count-min sketch of four rows of 4-bit counters
// (one byte each here, saturating at 15) whose counts are halved every window additions, so
// that it follows the recent past (Einziger et al., "TinyLFU", 2017).
type sketch struct {
	rows         [4][]uint8
	mask         uint64
	window, adds int64
}

func newSketch(window int64) *sketch {
	w := uint64(64)
	for int64(w) < window && w < 1<<28 {
		w <<= 1
	}
	s := &sketch{mask: w - 1, window: window}
	for i := range s.rows {
		s.rows[i] = make([]uint8, w)
	}
	return s
}

func (s *sketch) slot(k Key, i int) uint64 {
	return hash2(k.Hash^uint64(k.Tenant)<<40, uint64(i)+1) & s.mask
}

func (s *sketch) add(k Key) {
	for i := range s.rows {
		if c := &s.rows[i][s.slot(k, i)]; *c < 15 {
			*c++
		}
	}
	if s.adds++; s.adds >= s.window {
		s.adds = 0
		for i := range s.rows {
			for j := range s.rows[i] {
				s.rows[i][j] >>= 1
			}
		}
	}
}

func (s *sketch) estimate(k Key) uint8 {
	m := uint8(15)
	for i := range s.rows {
		m = min(m, s.rows[i][s.slot(k, i)])
	}
	return m
}

// admitter returns the admission test of a request's missed keys (keys[i] at index pos+i
// of the request), or nil when every miss is stored (no policy, or a put). It shows each
// chunk the cache does not hold to the policy with the entry its store would evict (the
// class's least recent unpinned entries, in order) and admits the leading run the policy
// accepts (lock held).
func (d *Driver) admitter(keys []Key, pos int) func(i int, k Key) bool {
	if d.adm == nil || pos < 0 || len(keys) == 0 {
		return nil
	}
	r := d.res
	c := r.class(keys[0].Tenant)
	cur := r.lrus[c].tail
	refused := false
	return func(i int, k Key) bool {
		if _, held := r.idx[k]; held {
			return !refused
		}
		var victim *Key
		if r.held[c] >= r.limit[c] {
			for cur != nilIdx && (r.ents[cur].pins > 0 || r.ents[cur].pending) {
				cur = r.ents[cur].prev
			}
			if cur != nilIdx {
				victim = &r.ents[cur].key
			}
		}
		if ok := d.adm.Admit(k, pos+i, victim); !ok || refused {
			refused = true
			d.c.AdmissionRefused++
			return false
		}
		if victim != nil {
			cur = r.ents[cur].prev
		}
		return true
	}
}
