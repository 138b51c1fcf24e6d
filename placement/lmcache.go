package placement

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"golang.org/x/text/cases"
)

// LMCache's two FDP data-placement policies (its MP raw_block adapter,
// fdp_data_placement_policy = cache_salt_prefix | cache_salt_rank), with its semantics:
//
//   - A salt's bucket is the text before its first ':' under Python's str.casefold, full
//     Unicode case folding ("RAG:app1", "rag:app2" and "rag:" share bucket "rag";
//     "Straße:" and "STRASSE:" share "strasse"). A salt without ':' or with an empty
//     prefix (":x", "") has no bucket and its writes carry no directive (None).
//   - cache_salt_prefix: each bucket gets the next unused handle of the pool in first-seen
//     order and keeps it; once the pool is used up, new buckets store with no directive.
//   - cache_salt_rank: the same buckets, split further by the key's local rank (kv_rank &
//     0xFF; LMCache packs kv_rank as ws<<24 | gr<<16 | lws<<8 | lr). Each new (bucket,
//     local rank) pair takes the next unused handle of the one shared pool, in first-seen
//     order, and a bucket holds at most as many handles as the node has GPUs (LMCache's
//     adapter counts torch's visible devices; NodeGPUs here, or gpus=N). With 0 GPUs no
//     write is placed. A further rank of a full bucket, and any new pair once the pool is
//     used up, stores with no directive.
//
// The pool is the list of handles the policy may give out, in order: LMCache's
// fdp_placement_ids after the device mapped them to handle indices (package lmcache does
// that from the device's RUH status), or handles 0..n-1 when Parse builds it from a bare
// spec. Assignments live in memory; a new process assigns afresh (as LMCache does).

// SaltBucket returns the FDP bucket of a cache salt: the text before the first ':' folded
// as Python's str.casefold folds it (full Unicode case folding: "ß" and "ẞ" give "ss",
// the Kelvin sign "k", final sigma "σ"), and false when the salt has no ':' or an empty
// prefix.
func SaltBucket(salt string) (string, bool) {
	i := strings.IndexByte(salt, ':')
	if i <= 0 {
		return "", false
	}
	return foldCase(salt[:i]), true
}

// folder is Unicode full case folding (stateless: safe for concurrent use).
var folder = cases.Fold()

// foldCase is str.casefold: x/text's full case folding, except that Cherokee capitals
// (U+13A0..U+13F5) stay as they are — CaseFolding.txt folds Cherokee to the capitals, which
// casefold follows and x/text does not (checked over every code point against Python 3.11:
// these 86 are the only difference). ASCII already folded returns s without allocating.
func foldCase(s string) string {
	folded := true
	cherokee := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			folded = false
			cherokee = cherokee || strings.ContainsFunc(s[i:], func(r rune) bool { return r >= 0x13A0 && r <= 0x13F5 })
			break
		}
		if 'A' <= c && c <= 'Z' {
			folded = false
		}
	}
	if folded {
		return s
	}
	if !cherokee {
		return folder.String(s)
	}
	var b strings.Builder
	for _, r := range s {
		if r >= 0x13A0 && r <= 0x13F5 {
			b.WriteRune(r)
		} else {
			b.WriteString(folder.String(string(r)))
		}
	}
	return b.String()
}

// LocalRank is the local rank packed in the low byte of an LMCache kv_rank.
func LocalRank(kvRank uint64) int { return int(kvRank & 0xFF) }

// LocalWorldSize is the local world size packed in bits 8..15 of an LMCache kv_rank.
func LocalWorldSize(kvRank uint64) int { return int(kvRank >> 8 & 0xFF) }

// PackKVRank packs world size, global rank, local world size and local rank the way LMCache
// does: ws<<24 | gr<<16 | lws<<8 | lr, without masking (a world of 256 or more carries into
// bit 32 and up, as in LMCache).
func PackKVRank(worldSize, globalRank, localWorldSize, localRank uint32) uint64 {
	return uint64(worldSize)<<24 | uint64(globalRank)<<16 | uint64(localWorldSize)<<8 | uint64(localRank)
}

// MaxLocalRanks bounds cache_salt_rank's ranks=N (a local rank is one byte).
const MaxLocalRanks = 256

// saltBuckets is the state both LMCache policies share: the pool and what was given out.
type saltBuckets struct {
	pool      []Handle
	ranks     int  // cache_salt_rank: handles per bucket, the node's GPU count (0: none placed)
	perRank   bool // cache_salt_rank rather than cache_salt_prefix
	canonical bool // pool is 0..len-1 (Name omits it)

	snap      atomic.Pointer[map[bucketRank]Handle] // immutable; copied on each assignment
	mu        sync.Mutex                            // serialises assignment
	perBucket map[string]int                        // handles given to each bucket, under mu
	fallbacks atomic.Uint64                         // writes of a bucket that got no handle
}

type bucketRank struct {
	bucket string
	rank   int // -1 under cache_salt_prefix
}

// NewCacheSaltPrefix returns LMCache's cache_salt_prefix over the pool (handles handed out
// in that order). An empty pool places everything with no directive.
func NewCacheSaltPrefix(pool []Handle) Policy { return newSaltBuckets(pool, false, 0) }

// NewCacheSaltLocalRank returns LMCache's cache_salt_rank over the pool with at most gpus
// handles per bucket: LMCache's quota is the node's visible GPU count (NodeGPUs), and with
// 0 GPUs it places nothing.
func NewCacheSaltLocalRank(pool []Handle, gpus int) Policy {
	return newSaltBuckets(pool, true, min(max(gpus, 0), MaxLocalRanks))
}

func newSaltBuckets(pool []Handle, perRank bool, ranks int) *saltBuckets {
	p := &saltBuckets{pool: append([]Handle(nil), pool...), perRank: perRank, ranks: ranks, perBucket: map[string]int{}}
	p.canonical = true
	for i, h := range p.pool {
		if h != Handle(i) {
			p.canonical = false
		}
	}
	p.snap.Store(&map[bucketRank]Handle{})
	return p
}

func (p *saltBuckets) Name() string {
	var b strings.Builder
	if p.perRank {
		b.WriteString("cache_salt_rank:gpus=" + strconv.Itoa(p.ranks))
	} else {
		b.WriteString("cache_salt_prefix")
	}
	if !p.canonical {
		b.WriteString(":handles=")
		for i, h := range p.pool {
			if i > 0 {
				b.WriteByte('/')
			}
			b.WriteString(strconv.Itoa(int(h)))
		}
	}
	return b.String()
}

func (p *saltBuckets) Place(w Write) Handle {
	bucket, ok := SaltBucket(w.CacheSalt)
	if !ok {
		return None
	}
	k := bucketRank{bucket: bucket, rank: -1}
	if p.perRank {
		k.rank = LocalRank(w.KVRank)
	}
	if h, ok := (*p.snap.Load())[k]; ok {
		return h
	}
	return p.assign(k)
}

// assign gives k the next pool handle if the pool and k's bucket have room.
func (p *saltBuckets) assign(k bucketRank) Handle {
	p.mu.Lock()
	defer p.mu.Unlock()
	snap := *p.snap.Load()
	if h, ok := snap[k]; ok {
		return h
	}
	if len(snap) >= len(p.pool) {
		p.fallbacks.Add(1)
		return None
	}
	if p.perRank {
		if p.perBucket[k.bucket] >= p.ranks {
			p.fallbacks.Add(1)
			return None
		}
	}
	h := p.pool[len(snap)]
	next := make(map[bucketRank]Handle, len(snap)+1)
	for kk, v := range snap {
		next[kk] = v
	}
	next[k] = h
	p.perBucket[k.bucket]++
	p.snap.Store(&next)
	return h
}

// Fallbacks counts the writes that had a bucket but got no handle (pool used up, or the
// bucket already holds its local-rank quota); LMCache reports the same count.
func (p *saltBuckets) Fallbacks() uint64 { return p.fallbacks.Load() }

// HandleLabels names the bucket (and local rank) each handle was given.
func (p *saltBuckets) HandleLabels() map[int]string {
	out := map[int]string{}
	for k, h := range *p.snap.Load() {
		if k.rank < 0 {
			out[int(h)] = "bucket " + k.bucket
		} else {
			out[int(h)] = "bucket " + k.bucket + " rank " + strconv.Itoa(k.rank)
		}
	}
	return out
}

// parseSaltBuckets reads the options of cache_salt_prefix / cache_salt_rank
// (":gpus=N" or its older name ":ranks=N", ":handles=H/H/...", in any order) for a policy
// with n data handles. cache_salt_rank without gpus= takes the node's count (NodeGPUs).
func parseSaltBuckets(raw string, perRank bool, n int) (Policy, error) {
	name := "cache_salt_prefix"
	if perRank {
		name = "cache_salt_rank"
	}
	rest := raw[len(name):]
	var pool []Handle
	ranks, seenRanks, seenHandles := 0, false, false
	for rest != "" {
		if rest[0] != ':' {
			return nil, fmt.Errorf("%w: %q: want %s[:gpus=N][:handles=H/H/...]", ErrSpec, raw, name)
		}
		opt := rest[1:]
		if i := strings.IndexByte(opt, ':'); i >= 0 {
			opt, rest = opt[:i], opt[i:]
		} else {
			rest = ""
		}
		key, val, _ := strings.Cut(opt, "=")
		switch strings.ToLower(key) {
		case "gpus", "ranks":
			if !perRank {
				return nil, fmt.Errorf("%w: %q: gpus= belongs to cache_salt_rank", ErrSpec, raw)
			}
			if seenRanks {
				return nil, fmt.Errorf("%w: %q: gpus= (ranks=) given twice", ErrSpec, raw)
			}
			seenRanks = true
			r, err := strconv.Atoi(val)
			if err != nil || r < 0 || r > MaxLocalRanks {
				return nil, fmt.Errorf("%w: %q: gpus must be the node's GPU count, 0..%d (the handles a bucket may hold)", ErrSpec, raw, MaxLocalRanks)
			}
			ranks = r
		case "handles":
			if seenHandles {
				return nil, fmt.Errorf("%w: %q: handles= given twice", ErrSpec, raw)
			}
			seenHandles = true
			var err error
			if pool, err = parseHandleList(raw, val, n); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%w: %q: unknown option %q; want gpus=N or handles=H/H/...", ErrSpec, raw, key)
		}
	}
	if !seenHandles {
		pool = make([]Handle, n)
		for i := range pool {
			pool[i] = Handle(i)
		}
	}
	if perRank {
		if !seenRanks {
			var err error
			if ranks, err = NodeGPUs(); err != nil {
				return nil, err
			}
		}
		return NewCacheSaltLocalRank(pool, ranks), nil
	}
	return NewCacheSaltPrefix(pool), nil
}

// parseHandleList reads "H/H/..." — distinct handles below n, in pool order.
func parseHandleList(raw, val string, n int) ([]Handle, error) {
	seen := map[int]bool{}
	var pool []Handle
	for _, it := range strings.Split(val, "/") {
		h, err := strconv.Atoi(it)
		if err != nil || h < 0 {
			return nil, fmt.Errorf("%w: %q: handle %q is not an integer >= 0", ErrSpec, raw, it)
		}
		if h >= n {
			return nil, fmt.Errorf("%w: %q: handle %d, but the policy has %d data handles (0..%d)", ErrSpec, raw, h, n, n-1)
		}
		if seen[h] {
			return nil, fmt.Errorf("%w: %q: handle %d listed twice", ErrSpec, raw, h)
		}
		seen[h] = true
		pool = append(pool, Handle(h))
	}
	return pool, nil
}
