package resp

import (
	"context"
	"strconv"

	"github.com/rbctl/rbctl/engine"
)

// Node is the cache node a NodeStore serves. p2p/node's Node gives itself through this
// (its RESP front end, p2p/node/resp.go), so that this package stays below the node.
type Node interface {
	// Get returns k's payload from the node's cache, loaded into a buffer from alloc (nil:
	// its own), else from a peer (kept as a replica); found is false on a miss. ctx bounds
	// the peer fetch.
	Get(ctx context.Context, k engine.Key, alloc func(size int) []byte) (val []byte, found bool, err error)
	// Put stores val under k: stored is whether k is held afterwards (stored now or
	// already), declined that the node's admission policy chose not to store it.
	Put(k engine.Key, val []byte) (stored, declined bool, err error)
	Exists(k engine.Key) bool
	Delete(k engine.Key) bool
	// Full says whether the device k is routed to has no free slot.
	Full(k engine.Key) bool
	// Entries calls fn for every key the node holds until it returns false.
	Entries(fn func(engine.Key) bool)
	Usage() engine.Usage
	MaxPayload() int
	// Info is the node's own INFO fields (name, eviction and admission counters, health).
	Info() map[string]string
}

// NodeStore is a Store over a cache node (rbctl serve --resp): keys as EngineStore takes
// them (LMCache's native-connector spelling, stored under the raw-block key of the same
// ObjectKey, any other spelling as a generic key), a GET that misses here is fetched from a
// peer (and kept as a replica), a SET into a full node evicts by the node's policy, one the
// node does not keep (declined by admission, full with eviction none, an I/O error, ...) is
// a Dropped error the dispatcher answers +OK (a later GET misses), and every operation
// counts in the node's stats and metrics.
type NodeStore struct {
	N   Node
	Ctx context.Context // bounds peer fetches (the node's serving context)
}

var (
	_ Store       = NodeStore{}
	_ ValueLoader = NodeStore{}
)

// Key parses a client's key once per request (parseKey).
func (s NodeStore) Key(raw []byte) Key { return parseKey(raw) }

func (s NodeStore) Get(k Key) ([]byte, bool, error) { return s.GetInto(k, nil) }

// GetInto is Get with a local hit loaded into a buffer from alloc (ValueLoader): an O_DIRECT
// read straight into the dispatcher's pooled, registered buffer, no copy.
func (s NodeStore) GetInto(k Key, alloc func(size int) []byte) ([]byte, bool, error) {
	if k.Err != nil {
		return nil, false, k.Err
	}
	return s.N.Get(s.Ctx, k.Engine, alloc)
}

func (s NodeStore) Set(k Key, v []byte) error {
	if k.Err != nil {
		return k.Err
	}
	key := k.Engine
	if len(v) == 0 {
		return drop(DropEmpty, "an empty value cannot be stored (a slot holds 1 byte or more)")
	}
	declined := false
	err := putOrPresent(func() (bool, error) {
		stored, dec, err := s.N.Put(key, v)
		declined = dec
		return stored || dec, err
	}, func() bool { return s.N.Exists(key) }, func() bool { return s.N.Full(key) })
	if declined {
		// Declined by the node's admission policy: OK, as a cache that evicts answers a SET
		// whose value it drops later (LMCache's connector fails a whole batch on -ERR).
		return drop(DropDeclined, "the node's admission policy declined the write")
	}
	return err
}

func (s NodeStore) Exists(k Key) (bool, error) {
	if k.Err != nil {
		return false, k.Err
	}
	return s.N.Exists(k.Engine), nil
}

func (s NodeStore) Delete(k Key) (bool, error) {
	if k.Err != nil {
		return false, k.Err
	}
	return s.N.Delete(k.Engine), nil
}

func (s NodeStore) Len() int64 { return s.N.Usage().SlotsUsed }

// Scan is EngineStore's walk over the node's keys (all its devices).
func (s NodeStore) Scan(cursor uint64, count, maxBytes int) ([]string, uint64) {
	return scanKeys(s.N.Entries, cursor, count, maxBytes)
}

func (s NodeStore) MaxValue() int64 { return int64(s.N.MaxPayload()) }

func (s NodeStore) Info() map[string]string {
	u := s.N.Usage()
	m := map[string]string{
		"rbctl_slots_total": strconv.FormatInt(u.SlotsTotal, 10),
		"rbctl_slots_used":  strconv.FormatInt(u.SlotsUsed, 10),
	}
	for k, v := range s.N.Info() {
		m[k] = v
	}
	return m
}

// NodeLimits are the bounds of a node's RESP requests, from its largest payload P
// (docs/resp.md, "Bounds"): a value up to P is kept; one up to MaxBulk (Redis's 512 MiB) is
// read and discarded (the SET answered +OK, dropped as too large); a longer one is a
// protocol error. A request keeps at most 4 × P + 1 MiB (SET, a few MSET pairs, MGET's
// keys), at most 1 GiB.
func NodeLimits(p int64) Limits {
	keep := max(p, 64<<10) // keys up to 64 KiB (a native key's bound) are never discarded
	return Limits{MaxKeep: keep, MaxRequest: min(4*keep+(1<<20), 1<<30)}
}
