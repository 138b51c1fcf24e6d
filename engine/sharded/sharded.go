// Package sharded is one raw-block cache over several devices: an engine.Engine per device
// (each with its own rings, worker pools, checkpoint thread and metadata), keys routed to a
// device by hash or by kv_rank (route.go), batched calls split per shard, run on the shards
// concurrently and reassembled in the caller's order. An error on one shard fails only the
// keys routed to it and is reported as a *ShardError naming the shard; the other shards'
// results stand. One device is a cache of one shard with no overhead beyond the routing.
package sharded

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
)

// Cache is an open cache over one engine per device. Safe for concurrent use.
type Cache struct {
	shards    []*engine.Engine
	route     Route
	observe   func(Event)
	rankShard map[uint64]int // Options.Ranks: rank → shard; nil routes rank mod N
	ranks     []uint64
}

// Config configures a Cache.
type Config struct {
	Route Route // default RouteHash
	// Config, when set, returns the engine config of shard i from the shared one (the device
	// path each checkpoint records, a placement policy per device, a metadata size per device).
	Config func(shard int, cfg engine.Config) engine.Config
	// Observe, when set, is called after each shard's part of every batched call, on the
	// goroutine that ran it (bench measures each device from these).
	Observe func(Event)
	// Ranks, with RouteKVRank, is the rank each shard serves, in shard order (LMCache's
	// per_tp_device_paths: {"0": c.img, "2": d.img} is shards [c.img, d.img] with Ranks
	// [0, 2]): a key goes to the shard of its rank (Rank), and a key whose rank no shard
	// serves fails with ErrNoShard, as LMCache has no device for that worker. Ranks are
	// distinct, one per shard. Without Ranks a key goes to shard rank mod N.
	Ranks []uint64
	// AllowMisrouted lets Open go on when a shard holds keys the route sends elsewhere
	// (devices given in another order or number than at format); inspection only.
	AllowMisrouted bool
}

// Op names the batched call an Event reports.
type Op uint8

const (
	OpPut      Op = iota + 1 // PutMany / PutManyMeta
	OpLoad                   // LoadManyInto
	OpExists                 // ExistsMany
	OpMetadata               // MetadataPrefix
	OpDelete                 // DeleteMany
	OpUnlock                 // UnlockMany
)

var opNames = [...]string{"", "put", "load", "exists", "metadata", "delete", "unlock"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Event is one shard's part of a batched call.
type Event struct {
	Shard    int
	Op       Op
	Keys     int           // keys routed to the shard
	OK       int           // of them: stored (put: newly written or already there), loaded, hit, deleted
	Bytes    int64         // payload bytes written (put) or read (load)
	End      time.Time     // when the shard's part returned
	Duration time.Duration // how long it took
	Err      error         // the shard engine's error (device errors), nil when none
}

// ErrMisrouted: a shard holds keys the route sends to another shard.
var ErrMisrouted = errors.New("keys on the wrong shard")

// ErrNoShard: a key's rank has no shard (Options.Ranks lists no device for it).
var ErrNoShard = errors.New("no device for the key's rank")

// ShardError is an error of one shard; match with errors.As (a batched call's error may
// join several).
type ShardError struct {
	Shard  int
	Device string
	Err    error
}

func (e *ShardError) Error() string {
	if e.Device == "" {
		return fmt.Sprintf("shard %d: %v", e.Shard, e.Err)
	}
	return fmt.Sprintf("shard %d (%s): %v", e.Shard, e.Device, e.Err)
}

func (e *ShardError) Unwrap() error { return e.Err }

// FailedShards returns the shards err names (ascending, each once).
func FailedShards(err error) []int {
	seen := map[int]bool{}
	var walk func(error)
	walk = func(err error) {
		switch x := err.(type) {
		case nil:
		case *ShardError:
			seen[x.Shard] = true
		case interface{ Unwrap() []error }:
			for _, e := range x.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(x.Unwrap())
		}
	}
	walk(err)
	var out []int
	for i := 0; len(out) < len(seen); i++ {
		if seen[i] {
			out = append(out, i)
		}
	}
	return out
}

// New adopts open engines as the shards of one cache, in order; Close closes them.
func New(engines []*engine.Engine, opts Config) (*Cache, error) {
	if len(engines) == 0 {
		return nil, fmt.Errorf("%w: no shard", engine.ErrConfig)
	}
	for i, e := range engines {
		if e == nil {
			return nil, fmt.Errorf("%w: shard %d has no engine", engine.ErrConfig, i)
		}
	}
	r, err := ParseRoute(string(opts.Route))
	if err != nil {
		return nil, err
	}
	c := &Cache{shards: engines, route: r, observe: opts.Observe}
	if opts.Ranks != nil {
		if err := checkRanks(opts, len(engines)); err != nil {
			return nil, err
		}
		c.ranks = append([]uint64(nil), opts.Ranks...)
		c.rankShard = make(map[uint64]int, len(opts.Ranks))
		for i, r := range opts.Ranks {
			c.rankShard[r] = i
		}
	}
	return c, nil
}

// checkRanks validates Options.Ranks for n shards.
func checkRanks(opts Config, n int) error {
	if opts.Ranks == nil {
		return nil
	}
	if r, _ := ParseRoute(string(opts.Route)); r != RouteKVRank {
		return fmt.Errorf("%w: shard ranks need the kv-rank route, not %s", engine.ErrConfig, r)
	}
	if len(opts.Ranks) != n {
		return fmt.Errorf("%w: %d shard ranks for %d devices; give one rank per device", engine.ErrConfig, len(opts.Ranks), n)
	}
	seen := map[uint64]bool{}
	for _, r := range opts.Ranks {
		if seen[r] {
			return fmt.Errorf("%w: rank %d served by two devices", engine.ErrConfig, r)
		}
		seen[r] = true
	}
	return nil
}

// Format formats every device in parallel (engine.Format with the shard's config) and
// returns the cache. It takes the devices: on error every one of them is closed (the
// formatted shards' engines too) and the error joins a *ShardError per failed device.
func Format(devs []blockdev.Device, cfg engine.Config, opts Config) (*Cache, error) {
	return build(devs, cfg, opts, engine.Format)
}

// Open recovers every device in parallel (engine.Open with the shard's config; Recovery
// has one report per device). Ownership of the devices is as for Format. Unless
// opts.AllowMisrouted, a shard holding keys the route sends to another shard fails with
// ErrMisrouted: the devices were given in another order or number than at format.
func Open(devs []blockdev.Device, cfg engine.Config, opts Config) (*Cache, error) {
	c, err := build(devs, cfg, opts, engine.Open)
	if err != nil || opts.AllowMisrouted || (c.Len() == 1 && c.rankShard == nil) {
		return c, err
	}
	if err := c.checkRoutes(); err != nil {
		c.CloseNoCheckpoint()
		return nil, err
	}
	return c, nil
}

func build(devs []blockdev.Device, cfg engine.Config, opts Config, mk func(blockdev.Device, engine.Config) (*engine.Engine, error)) (*Cache, error) {
	if len(devs) == 0 {
		return nil, fmt.Errorf("%w: no device", engine.ErrConfig)
	}
	if _, err := ParseRoute(string(opts.Route)); err != nil {
		closeAll(devs)
		return nil, err
	}
	if err := checkRanks(opts, len(devs)); err != nil {
		closeAll(devs)
		return nil, err
	}
	engs := make([]*engine.Engine, len(devs))
	errs := make([]error, len(devs))
	var wg sync.WaitGroup
	for i, d := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cfg
			if opts.Config != nil {
				c = opts.Config(i, cfg)
			}
			if d == nil {
				errs[i] = &ShardError{Shard: i, Err: fmt.Errorf("%w: nil device", engine.ErrConfig)}
				return
			}
			e, err := mk(d, c)
			if err != nil {
				errs[i] = &ShardError{Shard: i, Device: d.Info().Path, Err: err}
				return
			}
			engs[i] = e
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for i, e := range engs {
			if e != nil {
				e.Close()
			} else if devs[i] != nil {
				devs[i].Close()
			}
		}
		return nil, err
	}
	return New(engs, opts)
}

func closeAll(devs []blockdev.Device) {
	for _, d := range devs {
		if d != nil {
			d.Close()
		}
	}
}

// CheckRoutes fails with ErrMisrouted when a shard holds keys the route sends elsewhere
// (Open runs it; a caller that adopted engines with New runs it itself). On a cache of one
// device it tells, under hash routing, a device that looks like one shard of a larger
// cache: at least ShardEvidence keys, all of which hash routing over some N in 2..8
// sends to the same shard (chance for the keys of a cache of its own: under N·N^−K). Hash
// routing needs only the keys' identities (walked without spelling a key), and the lone
// device's walk stops once its keys have gone to two shards for every N: at 4M keys it
// spelled every key, 0.8 s of a restart, for a verdict the first few keys settle.
func (c *Cache) CheckRoutes() error {
	if len(c.shards) > 1 {
		return c.checkRoutes()
	}
	if c.route != RouteHash {
		return nil
	}
	e := c.shards[0]
	type seen struct {
		shard int
		mixed bool
	}
	var by [9]seen
	keys := 0
	e.Identities(func(id uint64) bool {
		all := true
		for n := 2; n < len(by); n++ {
			s := shardOfIdentity(id, n)
			if keys == 0 {
				by[n].shard = s
			} else if s != by[n].shard {
				by[n].mixed = true
			}
			all = all && by[n].mixed
		}
		keys++
		return !all // mixed for every N: no key can change the verdict
	})
	if keys < ShardEvidence {
		return nil
	}
	for n := 2; n < len(by); n++ {
		if !by[n].mixed {
			return c.shardErr(0, fmt.Errorf("%w: all %d keys are the ones hash routing over %d devices sends to shard %d: "+
				"this device is one shard of a larger cache; open it with the others, in format order", ErrMisrouted, keys, n, by[n].shard))
		}
	}
	return nil
}

// ShardEvidence is how many keys CheckRoutes needs before it calls a lone device a shard.
const ShardEvidence = 16

// checkRoutes fails when a shard holds a key the route sends elsewhere. It walks every
// shard's entries once, the shards in parallel (engine.Entries reads an index a chunk at a
// time, so memory stays small however many keys there are).
func (c *Cache) checkRoutes() error {
	errs := make([]error, len(c.shards))
	var wg sync.WaitGroup
	for i, e := range c.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bad, to := 0, -1
			if c.rankShard == nil && c.route == RouteHash {
				e.Identities(func(id uint64) bool {
					if s := shardOfIdentity(id, len(c.shards)); s != i {
						bad++
						to = s
					}
					return true
				})
			} else {
				e.Entries(func(k engine.Key, _ engine.EntryMeta) bool {
					if s, ok := c.shardOf(k); !ok || s != i {
						bad++
						to = s
					}
					return true
				})
			}
			if bad > 0 {
				errs[i] = c.shardErr(i, fmt.Errorf("%w: %d keys route to other shards (shard %d, ...) under %s routing over %d devices; "+
					"give the devices in the order and number they were formatted with", ErrMisrouted, bad, to, c.route, len(c.shards)))
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Len is the number of shards.
func (c *Cache) Len() int { return len(c.shards) }

// Shard returns shard i's engine (its async task API, its layout and config).
func (c *Cache) Shard(i int) *engine.Engine { return c.shards[i] }

// Route returns the routing in use.
func (c *Cache) Route() Route { return c.route }

// ShardOf returns the shard k is routed to, -1 when its rank has no shard (Options.Ranks).
func (c *Cache) ShardOf(k engine.Key) int {
	s, ok := c.shardOf(k)
	if !ok {
		return -1
	}
	return s
}

// Ranks returns the rank each shard serves (Options.Ranks), nil when keys go to rank mod N.
func (c *Cache) Ranks() []uint64 { return append([]uint64(nil), c.ranks...) }

// shardOf routes k: through the rank map when there is one (false when the key's rank has
// no shard, or the key has no rank), else ShardOf.
func (c *Cache) shardOf(k engine.Key) (int, bool) {
	if c.rankShard == nil {
		return ShardOf(c.route, k, len(c.shards)), true
	}
	r, ok := Rank(k)
	if !ok {
		return -1, false
	}
	s, ok := c.rankShard[r]
	if !ok {
		return -1, false
	}
	return s, true
}

// noShard is the error of keys whose rank has no shard.
func (c *Cache) noShard(keys []engine.Key, idx []int) error {
	if len(idx) == 0 {
		return nil
	}
	k := keys[idx[0]]
	r, ok := Rank(k)
	what := "has no rank"
	if ok {
		what = fmt.Sprintf("has rank %d", r)
	}
	return fmt.Errorf("%w: %d keys (the first, %q, %s); the devices serve ranks %v", ErrNoShard, len(idx), k.String(), what, c.ranks)
}

// Slots is the total slot count of every shard.
func (c *Cache) Slots() int64 {
	var n int64
	for _, e := range c.shards {
		n += e.Layout().MaxSlots
	}
	return n
}

func (c *Cache) shardErr(i int, err error) error {
	if err == nil {
		return nil
	}
	return &ShardError{Shard: i, Device: c.shards[i].Device().Info().Path, Err: err}
}

// Close closes every shard in parallel (final checkpoints, devices).
func (c *Cache) Close() error { return c.onEach((*engine.Engine).Close) }

// CloseNoCheckpoint closes every shard like a crash after its last checkpoint.
func (c *Cache) CloseNoCheckpoint() error { return c.onEach((*engine.Engine).CloseNoCheckpoint) }

// CheckpointNow checkpoints every shard in parallel.
func (c *Cache) CheckpointNow() error { return c.onEach((*engine.Engine).CheckpointNow) }

// RegisterMemory registers the caller's buffers with every shard's device
// (engine.Engine.RegisterMemory); a shard's failure is a *ShardError.
func (c *Cache) RegisterMemory(bufs [][]byte) error {
	return c.onEach(func(e *engine.Engine) error { return e.RegisterMemory(bufs) })
}

// FlushDeallocates flushes every shard's queued deallocates.
func (c *Cache) FlushDeallocates() {
	c.onEach(func(e *engine.Engine) error { e.FlushDeallocates(); return nil })
}

// onEach runs f on every shard in parallel and joins their errors as ShardErrors.
func (c *Cache) onEach(f func(*engine.Engine) error) error {
	errs := make([]error, len(c.shards))
	var wg sync.WaitGroup
	for i, e := range c.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.shardErr(i, f(e))
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Recovery returns each shard's recovery report (what Open found on each device).
func (c *Cache) Recovery() []engine.RecoveryReport {
	out := make([]engine.RecoveryReport, len(c.shards))
	for i, e := range c.shards {
		out[i] = e.Stats().Recovery
	}
	return out
}
