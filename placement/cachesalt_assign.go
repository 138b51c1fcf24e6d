package placement

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// snapSalts is how many salts live in the copy-on-write map read on the fast path; salts
// beyond it live in a sync.Map.
const snapSalts = 256

// MaxAssignedSalts bounds how many salts cache-salt remembers; salts first seen after that
// many are placed by hash (the cache-salt:hash mapping) and not remembered.
const MaxAssignedSalts = 1 << 16

// handleLoad is one handle's running byte count, padded to a cache line so concurrent
// writers on different handles do not share one.
type handleLoad struct {
	bytes atomic.Uint64
	_     [56]byte
}

// cacheSaltAssign gives every salt a handle the first time it is seen and keeps it:
//
//   - while some handle has no salt yet, the new salt takes the lowest such handle, so the
//     first n distinct salts get handles 0..n-1 in first-seen order — no two share a handle;
//   - after that a new salt joins the handle with the fewest bytes written so far (ties: the
//     lowest index), i.e. the least-loaded stream;
//   - after MaxAssignedSalts salts, new salts are hashed as in cache-salt:hash.
//
// The empty salt is a salt like any other (untagged traffic gets its own handle while
// handles last). The fast path is a lookup in an immutable map behind an atomic pointer
// (copied on each of the first 256 assignments; later salts go to a sync.Map) and one
// atomic add; a new salt takes a mutex once. Deterministic for a given order of first
// appearances; the assignment lives in memory and starts afresh in a new process.
type cacheSaltAssign struct {
	n        int
	snap     atomic.Pointer[map[string]int] // first snapSalts salts → handle, immutable
	salts    sync.Map                       // later salts: string → int handle
	load     []handleLoad
	mu       sync.Mutex // serialises assignment
	owners   []int      // salts assigned per handle, under mu
	assigned int        // salts remembered, under mu
	pins     string     // canonical pin list ("" = none), part of Name
}

// NewCacheSalt returns the first-seen assignment variant, the default cache-salt: collision
// free while there are at most n distinct salts. n is capped at 65,536 (NVMe placement
// handles are 16-bit).
func NewCacheSalt(n int) Policy {
	n = min(max(n, 1), 1<<16)
	p := &cacheSaltAssign{n: n, load: make([]handleLoad, n), owners: make([]int, n)}
	p.snap.Store(&map[string]int{})
	return p
}

// NewCacheSaltPinned is cache-salt with some salts given their handle up front: a pinned
// salt always goes to its handle (in every process and after every restart), the handles
// pinned count as taken, and salts not pinned are assigned first-seen over the others as in
// NewCacheSalt. Several salts may share a pinned handle. Every handle must be below n.
func NewCacheSaltPinned(n int, pins map[string]int) (Policy, error) {
	p := NewCacheSalt(n).(*cacheSaltAssign)
	if len(pins) == 0 {
		return p, nil
	}
	if len(pins) > snapSalts {
		return nil, fmt.Errorf("%w: %d pinned salts, at most %d", ErrSpec, len(pins), snapSalts)
	}
	var names []string
	for salt, h := range pins {
		if h < 0 || h >= p.n {
			return nil, fmt.Errorf("%w: cache-salt:pin: salt %q on handle %d, want 0..%d", ErrSpec, salt, h, p.n-1)
		}
		names = append(names, salt)
	}
	sort.Slice(names, func(i, j int) bool {
		if pins[names[i]] != pins[names[j]] {
			return pins[names[i]] < pins[names[j]]
		}
		return names[i] < names[j]
	})
	for i, salt := range names {
		p.record(*p.snap.Load(), salt, pins[salt]) // ≤ 256 pins: copying the snapshot each time is cheap
		names[i] = salt + "=" + strconv.Itoa(pins[salt])
	}
	p.pins = strings.Join(names, "/")
	return p, nil
}

// parsePins reads "SALT=H/SALT=H/..." (the last '=' of an item separates salt and handle).
func parsePins(arg string) (map[string]int, error) {
	pins := map[string]int{}
	for _, it := range strings.Split(arg, "/") {
		i := strings.LastIndexByte(it, '=')
		if i < 0 {
			return nil, fmt.Errorf("%w: cache-salt:pin item %q: want SALT=HANDLE, as in cache-salt:pin=chat=0/rag=1", ErrSpec, it)
		}
		h, err := strconv.Atoi(it[i+1:])
		if err != nil || h < 0 {
			return nil, fmt.Errorf("%w: cache-salt:pin item %q: the handle must be an integer >= 0", ErrSpec, it)
		}
		if _, dup := pins[it[:i]]; dup {
			return nil, fmt.Errorf("%w: cache-salt:pin: salt %q pinned twice", ErrSpec, it[:i])
		}
		pins[it[:i]] = h
	}
	return pins, nil
}

func (p *cacheSaltAssign) Name() string {
	if p.pins != "" {
		return "cache-salt:pin=" + p.pins
	}
	return "cache-salt"
}

func (p *cacheSaltAssign) Place(w Write) Handle {
	h, ok := (*p.snap.Load())[w.CacheSalt]
	if !ok {
		h = p.lookupSlow(w.CacheSalt)
	}
	p.load[h].bytes.Add(uint64(max(w.Size, 1)))
	return Handle(h)
}

// lookupSlow finds a salt outside the snapshot, assigning it if it is new.
func (p *cacheSaltAssign) lookupSlow(salt string) int {
	if v, ok := p.salts.Load(salt); ok {
		return v.(int)
	}
	return p.assign(salt)
}

// assign picks and records the handle of a salt not seen before.
func (p *cacheSaltAssign) assign(salt string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	snap := *p.snap.Load()
	if h, ok := snap[salt]; ok { // another goroutine assigned it meanwhile
		return h
	}
	if v, ok := p.salts.Load(salt); ok {
		return v.(int)
	}
	if p.assigned >= MaxAssignedSalts {
		return int((saltHash(salt) >> 32) * uint64(p.n) >> 32)
	}
	h := -1
	for i, c := range p.owners {
		if c == 0 {
			h = i
			break
		}
	}
	if h < 0 {
		h = 0
		for i := 1; i < p.n; i++ {
			if p.load[i].bytes.Load() < p.load[h].bytes.Load() {
				h = i
			}
		}
	}
	p.record(snap, salt, h)
	return h
}

// record stores salt → h; the caller holds mu and passes the current snapshot.
func (p *cacheSaltAssign) record(snap map[string]int, salt string, h int) {
	p.owners[h]++
	p.assigned++
	if len(snap) < snapSalts {
		next := make(map[string]int, len(snap)+1)
		for k, v := range snap {
			next[k] = v
		}
		next[salt] = h
		p.snap.Store(&next)
	} else {
		p.salts.Store(salt, h)
	}
}

// Assignment returns the handle each remembered salt was given (a copy; for reports and
// tests).
func (p *cacheSaltAssign) Assignment() map[string]int {
	out := map[string]int{}
	for k, v := range *p.snap.Load() {
		out[k] = v
	}
	p.salts.Range(func(k, v any) bool {
		out[k.(string)] = v.(int)
		return true
	})
	return out
}
