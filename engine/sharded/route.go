package sharded

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"github.com/rbctl/rbctl/engine"
)

// Route chooses the shard of a key.
type Route string

const (
	// RouteHash spreads keys by their slot identity (engine.Key.Identity: BLAKE2b-64 of the
	// encoded key in the object namespace, the chunk hash in legacy), mixed by the splitmix64
	// finaliser and scaled to the shard count: shard = ⌊mix(identity) × N / 2⁶⁴⌋. The mix
	// keeps the shard choice independent of the bits each engine's index hashes on. Stable
	// across processes and runs; it depends on N, so a cache is always opened over the same
	// devices in the same order it was formatted with.
	RouteHash Route = "hash"
	// RouteKVRank sends a key to shard kv_rank mod N, as LMCache's per_tp_device_paths gives
	// each tensor-parallel worker its own device. The rank is the object key's kv_rank field
	// or the legacy key's worker_id field; a key with no readable rank is routed by hash.
	RouteKVRank Route = "kv-rank"
)

// Routes lists the routes ParseRoute accepts.
var Routes = []Route{RouteHash, RouteKVRank}

// ParseRoute reads a route name ("" is RouteHash).
func ParseRoute(s string) (Route, error) {
	switch Route(s) {
	case RouteHash, "":
		return RouteHash, nil
	case RouteKVRank:
		return RouteKVRank, nil
	}
	return "", fmt.Errorf("unknown shard route %q (hash or kv-rank)", s)
}

// ShardOf returns the shard of k among n shards under route r (0 when n <= 1): under
// RouteKVRank, the key's rank mod n (Cache routes by its rank map instead when it has one,
// Options.Ranks).
func ShardOf(r Route, k engine.Key, n int) int {
	if n <= 1 {
		return 0
	}
	if r == RouteKVRank {
		if rank, ok := Rank(k); ok {
			return int(rank % uint64(n))
		}
	}
	return shardOfIdentity(k.Identity(), n)
}

// shardOfIdentity is hash routing's shard, of n > 1, for a key of identity id.
func shardOfIdentity(id uint64, n int) int {
	hi, _ := bits.Mul64(mix(id), uint64(n))
	return int(hi)
}

// Rank returns the worker a key belongs to: the kv_rank of an object key (any of LMCache's
// shapes, engine.KeyShape; up to 2^63-1), the worker_id of a legacy key
// (model@world_size@worker_id@hash@dtype...).
func Rank(k engine.Key) (uint64, bool) {
	if r, ok := k.KVRank(); ok {
		return r, true
	}
	if k.Namespace() != engine.NamespaceLegacy {
		return 0, false
	}
	f := strings.SplitN(k.String(), "@", 4)
	if len(f) < 3 {
		return 0, false
	}
	v, err := strconv.ParseUint(f[2], 10, 63)
	return v, err == nil
}

// mix is splitmix64's finaliser.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
