// Package admission holds the admission policies that decide which missed KV chunks a cache
// writes to flash (docs/bench.md, "Admission"): all, second-hit, tinylfu and prefix-depth.
// The workload driver (bench, simulate) and a cache node (rbctl serve) ask the same
// policies, keyed on a chunk's 64-bit identity, so a policy measured in simulate is the
// one a node runs.
//
// A Policy is not safe for concurrent use; callers hold their own lock.
package admission

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/bits-and-blooms/bloom/v3"
)

// ErrSpec is wrapped by every malformed admission spec.
var ErrSpec = errors.New("admission policy")

// Key names a chunk to a policy: a 64-bit hash of its identity and a group (the workload's
// tenant; 0 for a node's keys, whose hash already covers the cache_salt).
type Key struct {
	Hash  uint64
	Group int32
}

// Policy decides which missed chunks are stored.
type Policy interface {
	// Name is the spec it was parsed from.
	Name() string
	// Seen records that a lookup asked for k (hit or miss).
	Seen(k Key)
	// Admit says whether the missed chunk k, at index pos of its request's chunks (-1 when
	// the caller does not know it), is stored. victim is the chunk the cache would evict to
	// make room for it, nil while the cache has room.
	Admit(k Key, pos int, victim *Key) bool
	// NeedsPosition says the policy decides by a chunk's position in its request, which a
	// caller that sees chunks one at a time (a cache node) cannot give.
	NeedsPosition() bool
}

// Specs.
const (
	All       = "all"
	SecondHit = "second-hit"
	TinyLFU   = "tinylfu"
	Depth     = "prefix-depth"
)

// Check refuses a malformed spec: all, second-hit[:W], tinylfu[:W] or prefix-depth:N (W a
// window in chunks, N chunks).
func Check(spec string) error {
	_, err := New(spec, 1)
	return err
}

// New builds the policy of spec for a cache that keeps target chunks; nil for all.
// second-hit stores a chunk on its second miss within a window of W misses (default:
// target), remembered by a Bloom filter (the doorkeeper) cleared every W; tinylfu stores a
// chunk when a count-min sketch of lookups (aged every W lookups, default 10 × target)
// says it is asked for more often than the chunk it would evict; prefix-depth:N stores
// only a request's first N chunks.
func New(spec string, target int64) (Policy, error) {
	name, arg, hasArg := strings.Cut(spec, ":")
	n := int64(0)
	if hasArg {
		v, err := strconv.ParseInt(arg, 10, 64)
		if err != nil || v < 1 || v > 1<<40 {
			return nil, fmt.Errorf("%w %q: %q is not a positive count", ErrSpec, spec, arg)
		}
		n = v
	}
	target = max(target, 1)
	switch {
	case name == All && !hasArg:
		return nil, nil
	case name == SecondHit:
		if n == 0 {
			n = target
		}
		return &secondHit{spec: spec, window: n, f: bloom.NewWithEstimates(uint(min(n, 1<<30)), 0.01)}, nil
	case name == TinyLFU:
		if n == 0 {
			n = 10 * target
		}
		return &tinyLFU{spec: spec, s: newSketch(n)}, nil
	case name == Depth && hasArg:
		return depth{spec: spec, n: int(min(n, 1<<30))}, nil
	}
	return nil, fmt.Errorf("%w %q is not all, second-hit[:W], tinylfu[:W] or prefix-depth:N", ErrSpec, spec)
}

func keyBytes(b *[12]byte, k Key) []byte {
	binary.LittleEndian.PutUint64(b[:8], k.Hash)
	binary.LittleEndian.PutUint32(b[8:], uint32(k.Group))
	return b[:]
}

type secondHit struct {
	spec   string
	window int64
	added  int64
	f      *bloom.BloomFilter
	buf    [12]byte
}

func (s *secondHit) Name() string        { return s.spec }
func (s *secondHit) Seen(Key)            {}
func (s *secondHit) NeedsPosition() bool { return false }
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

func (t *tinyLFU) Name() string        { return t.spec }
func (t *tinyLFU) Seen(k Key)          { t.s.add(k) }
func (t *tinyLFU) NeedsPosition() bool { return false }
func (t *tinyLFU) Admit(k Key, _ int, victim *Key) bool {
	return victim == nil || t.s.estimate(k) > t.s.estimate(*victim)
}

type depth struct {
	spec string
	n    int
}

func (d depth) Name() string                      { return d.spec }
func (d depth) Seen(Key)                          {}
func (d depth) NeedsPosition() bool               { return true }
func (d depth) Admit(_ Key, pos int, _ *Key) bool { return pos >= 0 && pos < d.n }

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

// mix is splitmix64's finaliser.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func (s *sketch) slot(k Key, i int) uint64 {
	return mix(mix(k.Hash^uint64(k.Group)<<40)^(uint64(i)+1)) & s.mask
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
