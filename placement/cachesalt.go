package placement

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// saltHash hashes s eight bytes at a time (multiply-xorshift mixing, murmur3's finaliser at
// the end) without allocating. Part of the placement contract: a salt's handle under
// cache-salt must not change between releases, so do not change this function.
func saltHash(s string) uint64 {
	const m = 0x9e3779b97f4a7c15
	h := uint64(len(s)) * m
	i := 0
	for ; i+8 <= len(s); i += 8 {
		k := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		h = (h ^ k*0xff51afd7ed558ccd) * m
		h ^= h >> 32
	}
	var k uint64
	for j := len(s) - 1; j >= i; j-- {
		k = k<<8 | uint64(s[j])
	}
	h = (h ^ k*0xff51afd7ed558ccd) * m
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// cacheSaltHash maps a salt to a handle by hash: one tenant's writes always land on the same
// handle, no state, the same handle in every process and release. Two salts collide with
// probability 1/n per pair (with 3 salts on 7 handles, 1 − 6·5/7² ≈ 39 %).
type cacheSaltHash struct{ n uint64 }

func (p cacheSaltHash) Place(w Write) Handle {
	if w.CacheSalt == "" {
		return 0 // untagged traffic shares the first handle
	}
	return Handle((saltHash(w.CacheSalt) >> 32) * p.n >> 32) // multiply-shift range reduction, no division
}
func (p cacheSaltHash) Name() string { return "cache-salt:hash" }

// NewCacheSaltHash returns the hash variant (cache-salt:hash): handle =
// ⌊(saltHash(salt)>>32)·n / 2³²⌋; an empty salt goes to handle 0.
func NewCacheSaltHash(n int) Policy { return cacheSaltHash{n: uint64(min(max(n, 1), 1<<31))} }

// rankEvery is how many writes pass between re-rankings of cache-salt:rank.
const rankEvery = 1024

// saltEntry is one salt's running byte count and current rank.
type saltEntry struct {
	bytes atomic.Uint64
	rank  atomic.Int32
}

// cacheSaltBytes gives the salts that wrote the most bytes dedicated handles: rank r < n-1
// gets handle r, every other salt (and the empty salt) shares handle n-1. Spec
// cache-salt:bytes; it was called cache-salt:rank, which Parse still accepts, but it is not
// LMCache's cache_salt_rank (NewCacheSaltLocalRank), which splits salt buckets by local
// rank. The fast path is
// lock-free (a sync.Map lookup and two atomics); re-ranking takes a mutex.
type cacheSaltBytes struct {
	n      int
	salts  sync.Map // string → *saltEntry
	writes atomic.Uint64
	mu     sync.Mutex // serialises rerank and salt insertion
	all    []string   // every salt seen, under mu
}

// NewCacheSaltBytes returns the by-bytes variant (cache-salt:bytes). Ranks are recomputed
// every 1024 writes and whenever a new salt appears, ties broken by salt text, so the
// result is deterministic for a given write order.
func NewCacheSaltBytes(n int) Policy { return &cacheSaltBytes{n: max(n, 1)} }

func (p *cacheSaltBytes) Name() string { return "cache-salt:bytes" }

func (p *cacheSaltBytes) Place(w Write) Handle {
	if w.CacheSalt == "" || p.n == 1 {
		return Handle(p.n - 1)
	}
	var e *saltEntry
	if v, ok := p.salts.Load(w.CacheSalt); ok {
		e = v.(*saltEntry)
		e.bytes.Add(uint64(max(w.Size, 1)))
		if p.writes.Add(1)%rankEvery == 0 {
			p.mu.Lock()
			p.rerank()
			p.mu.Unlock()
		}
	} else {
		p.mu.Lock()
		if v, ok := p.salts.Load(w.CacheSalt); ok { // another goroutine added it
			e = v.(*saltEntry)
		} else {
			e = &saltEntry{}
			p.salts.Store(w.CacheSalt, e)
			p.all = append(p.all, w.CacheSalt)
		}
		e.bytes.Add(uint64(max(w.Size, 1)))
		p.writes.Add(1)
		p.rerank()
		p.mu.Unlock()
	}
	if r := int(e.rank.Load()); r < p.n-1 {
		return Handle(r)
	}
	return Handle(p.n - 1)
}

// rerank sorts the salts by bytes written (descending, then by text); p.mu must be held.
func (p *cacheSaltBytes) rerank() {
	type sb struct {
		salt  string
		bytes uint64
		e     *saltEntry
	}
	list := make([]sb, len(p.all))
	for i, s := range p.all {
		v, _ := p.salts.Load(s)
		e := v.(*saltEntry)
		list[i] = sb{s, e.bytes.Load(), e}
	}
	slices.SortFunc(list, func(a, b sb) int {
		if a.bytes != b.bytes {
			if a.bytes > b.bytes {
				return -1
			}
			return 1
		}
		return strings.Compare(a.salt, b.salt)
	})
	for i, x := range list {
		x.e.rank.Store(int32(min(i, 1<<30)))
	}
}
