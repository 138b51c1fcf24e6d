// Package node is an rbctl cache node: one raw-block engine served to local clients (put,
// get, lookup-and-lock, unlock, delete, list, stats) and to peers (lookup-and-lock, unlock)
// over a gRPC control plane, with chunk bytes moved over a separate TCP data plane
// (p2p/dataplane). On a local miss a get asks the peers its p2p.Directory names, pulls the
// locked chunks, verifies their checksums, stores them locally and answers; any failure on
// the way (timeout, dead peer, refused connection, checksum mismatch) is a counted miss,
// never an error to the caller and never wrong bytes. Protocol and state machines:
// docs/p2p.md.
package node

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/engine/sharded"
	"github.com/rbctl/rbctl/p2p"
	"github.com/rbctl/rbctl/p2p/dataplane"
	"github.com/rbctl/rbctl/p2p/p2ppb"
	"github.com/rbctl/rbctl/placement"
)

// Node serves one cache: one engine, or a sharded cache over several devices. The cache
// stays the caller's: Close releases what the node holds (leases, connections) but does
// not close the cache.
type Node struct {
	cache    *sharded.Cache
	opts     Config
	maxChunk int // the smallest largest payload of the shards
	evict    *evictor
	admit    *admitter // nil: every write is stored
	health   ckptHealth
	flights  *flights
	batches  atomic.Uint64 // numbers the recorded calls of several chunks (NextBatch)

	leases   *leaseTable
	peers    *peerPool
	replicas *replicas
	data     *dataplane.Server
	grpc     *grpc.Server

	c                 counters
	peerLat, localLat *latency
	metrics           *metrics
	extraMu           sync.Mutex
	extraStats        []func() map[string]int64 // AddStats

	// What a node Start built also owns (start.go): its context, the TLS reload trigger,
	// the RESP address, what Close stops before the planes (front ends, metrics) and what
	// it closes after them (the cluster membership, the cache, the recording).
	cancel      func()
	reload      chan<- os.Signal
	respAddr    string
	metricsAddr string // the bound /metrics listener (Config.MetricsListen), "" without one
	stops       []func()
	after       []func() error

	mu       sync.Mutex
	ctlAddr  string
	dataAddr string
	closed   bool
	wg       sync.WaitGroup

	// seeding is closed once the eviction order holds every key found at start, when Serve
	// seeds it in the background (nil: seeded before serving, or nothing to seed).
	seeding atomic.Pointer[chan struct{}]
}

// New builds a node over an open engine; Serve serves it. (Start opens the devices, builds
// and serves a node in one call.)
func New(eng *engine.Engine, opts Config) (*Node, error) {
	c, err := sharded.New([]*engine.Engine{eng}, sharded.Config{})
	if err != nil {
		return nil, err
	}
	return NewSharded(c, opts)
}

// NewSharded builds a node over an open cache of one or more shards; Serve serves it. It
// uses the fields of cfg that say how the node behaves and ignores those Start alone uses
// (Devices, Listen, ... : config.go).
func NewSharded(c *sharded.Cache, opts Config) (*Node, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	maxChunk := 0
	for i := range c.Len() {
		e := c.Shard(i)
		if opts.SeparateReplicas {
			if h := e.Device().Info().Handles; opts.ReplicaHandle != placement.None && int(opts.ReplicaHandle) >= h {
				return nil, fmt.Errorf("node: replica handle %d, device %d has %d placement handles", opts.ReplicaHandle, i, h)
			}
		}
		if m := e.Layout().PayloadBytes(); i == 0 || int(m) < maxChunk {
			maxChunk = int(m)
		}
	}
	var err error
	n := &Node{
		cache: c, opts: opts, maxChunk: maxChunk,
		leases: newLeaseTable(c, &opts.Limits), peers: newPeerPool(&opts), replicas: newReplicas(),
		peerLat: newLatency(), localLat: newLatency(), flights: newFlights(),
	}
	if opts.Eviction != EvictNone {
		n.evict = newEvictor(c.Len(), opts.Eviction, opts.RegionSlots)
	}
	if n.admit, err = newAdmitter(opts.Admission, c.Usage().SlotsTotal); err != nil {
		return nil, err
	}
	n.watchCheckpoints()
	n.metrics = newMetrics(n)
	n.peerLat.hist, n.localLat.hist = n.metrics.peerHist, n.metrics.locHist
	n.data, err = dataplane.NewServer(n, dataplane.ServerConfig{
		MaxChunk: n.maxChunk, MaxConns: opts.DataMaxConns, MaxInflightBytes: opts.DataMaxInflightBytes,
		BusyWait: opts.DataBusyWait, Tamper: opts.TamperData, TLS: opts.dataServerTLS(), Trusted: n.trusted, Reserved: opts.Limits.DataReserved,
		ProveTimeout: opts.Limits.DataProveTimeout, StrangersPerIP: opts.Limits.DataStrangersPerIP,
		NoLookups: opts.NoDataLookups,
	})
	if err != nil {
		return nil, err
	}
	n.grpc = grpc.NewServer(opts.grpcServerOptions(append(opts.Limits.serverOptions(),
		grpc.MaxRecvMsgSize(n.msgBytes()), grpc.MaxSendMsgSize(n.msgBytes()),
		grpc.MaxConcurrentStreams(256),
		grpc.ChainUnaryInterceptor(n.deadline, n.authorize))...)...)
	p2ppb.RegisterCacheServer(n.grpc, &cacheAPI{n: n})
	p2ppb.RegisterPeerServer(n.grpc, &peerAPI{n: n})
	return n, nil
}

// msgBytes bounds one control-plane message: a batch of 16 full chunks plus framing, at
// least 4 MiB, at most 1 GiB.
func (n *Node) msgBytes() int { return min(max(16*n.maxChunk+(1<<20), 4<<20), 1<<30) }

// maxGetKeys is how many payloads fit one Get answer.
func (n *Node) maxGetKeys() int {
	return max(1, min(n.opts.MaxBatch, (n.msgBytes()-(1<<20))/n.maxChunk))
}

// deadline gives every call without a deadline the node's default one.
func (n *Node) deadline(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, n.opts.CallTimeout)
		defer cancel()
	}
	return h(ctx, req)
}

// Serve serves the control plane on control and the data plane on data, and announces the
// local keys to the directory.
func (n *Node) Serve(control, data net.Listener) {
	n.mu.Lock()
	n.ctlAddr, n.dataAddr = advertise(control.Addr().String(), data.Addr().String(), n.opts.Advertise)
	if n.opts.Name == "" {
		n.opts.Name = n.ctlAddr
	}
	n.mu.Unlock()
	// The directory learns every key's identity before the node serves (its counts must see
	// a key's admission before any eviction of it), from a walk that spells no key; the
	// eviction order is seeded while the node serves (seedInBackground). At 4M keys a walk
	// spelling every key took 0.8 s and the seeding 3 s of a restart.
	if d := n.opts.Directory; d != nil {
		n.announce(d)
	}
	if n.evict != nil {
		n.seedInBackground()
	}
	n.wg.Go(func() { n.grpc.Serve(n.limitControl(control)) })
	n.wg.Go(n.metrics.poll)
	n.wg.Go(func() { n.data.Serve(data) })
}

// announce tells the directory every key's identity; at once when it takes many (8 B a key
// held for the call).
func (n *Node) announce(d p2p.Directory) {
	m, ok := d.(p2p.ManyAdmitter)
	if !ok {
		n.cache.Identities(func(id uint64) bool {
			d.Admitted(id)
			return true
		})
		return
	}
	var held int64
	for s := range n.cache.Len() {
		held += n.cache.Shard(s).Usage().SlotsUsed
	}
	ids := make([]uint64, 0, held)
	n.cache.Identities(func(id uint64) bool {
		ids = append(ids, id)
		return true
	})
	m.AdmittedMany(ids)
}

// seedInBackground puts every key found at start into the eviction order while the node
// already serves (at 4M keys the seeding took 3 s of a restart), in the order the keys
// were stored (engine.InStoreOrder): the least recently stored is the next evicted, as
// before the restart (its hits are not known). lru and fifo add each key behind the ones
// before it, newest first; region mode puts each key's region in front, oldest first, so
// that a salt's open region is its newest. Meanwhile a hit or a store puts its key in
// front, and the seeding, which adds keys at the back, skips a key the order already
// holds; a key deleted before the seeding reaches it is added all the same
// and dropped by the first eviction that finds it gone (makeRoom, evictRegions). A write
// that must evict waits for the seeding to finish (makeRoom), so that it evicts from the
// whole order; the others do not wait.
func (n *Node) seedInBackground() {
	done := make(chan struct{})
	n.seeding.Store(&done)
	for s := range n.cache.Len() {
		n.evict.reserve(s, int(n.cache.Shard(s).Usage().SlotsUsed))
	}
	n.wg.Go(func() {
		defer func() { close(done); n.seeding.Store(nil) }()
		start := time.Now()
		seen := 0
		defer func() {
			if l := n.opts.Logger; l != nil && !n.isClosed() {
				l.Info("eviction order seeded", "eviction", string(n.evict.mode), "keys", seen, "took", time.Since(start).Round(time.Millisecond))
			}
		}()
		for s := range n.cache.Len() {
			if n.isClosed() {
				return
			}
			eng := n.cache.Shard(s)
			spell := n.evict.mode == EvictRegion || !identityIsSum(eng.Config().Namespace)
			eng.InStoreOrder(n.evict.mode != EvictRegion, spell, func(id uint64, k engine.Key) bool {
				if spell {
					n.evict.seed(s, k)
				} else {
					n.evict.seedSum(s, id, id)
				}
				seen++
				return seen%4096 != 0 || !n.isClosed()
			})
		}
	})
}

// WaitSeeded returns once the eviction order holds every key found at start (at once for a
// node without one); the node serves meanwhile.
func (n *Node) WaitSeeded() {
	if p := n.seeding.Load(); p != nil {
		<-*p
	}
}

// Peer is how other nodes reach this one.
func (n *Node) Peer() p2p.Peer {
	n.mu.Lock()
	defer n.mu.Unlock()
	return p2p.Peer{Name: n.opts.Name, Control: n.ctlAddr, Data: n.dataAddr}
}

func (n *Node) isClosed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed
}

// Close stops both planes at once (connections dropped), releases every lease and closes
// the connections to peers. A node built by New or NewSharded leaves its cache open; one
// Start built first stops its RESP front end and metrics listener, and afterwards leaves
// the cluster, closes the cache with its final checkpoint and finishes the recording
// (the first error is returned).
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	n.mu.Unlock()
	for i := len(n.stops) - 1; i >= 0; i-- {
		n.stops[i]()
	}
	close(n.metrics.stop)
	n.unwatchCheckpoints()
	n.grpc.Stop()
	n.data.Close()
	n.wg.Wait()
	n.leases.close()
	n.peers.close()
	var err error
	for _, f := range n.after {
		if e := f(); err == nil {
			err = e
		}
	}
	if n.cancel != nil {
		n.cancel()
	}
	return err
}

// PutResult is Put's outcome: Results and Stored as engine.PutMany's, and Declined the
// indices of keys the node's admission policy chose not to store (neither stored nor
// present: a later Get misses, as after an eviction).
type PutResult struct {
	engine.PutResult
	Declined []int
}

// Put stores payloads under keys, those the admission policy (Config.Admission) admits;
// Results and Stored as engine.PutMany. With eviction a full cache first drops its least
// recently used unpinned keys.
func (n *Node) Put(keys []engine.Key, payloads [][]byte) (PutResult, error) {
	keep, declined := n.admitWrites(keys)
	ks, ps := keys, payloads
	if len(declined) > 0 {
		ks, ps = pick(keys, keep), pick(payloads, keep)
	}
	r, err := n.putMany(ks, ps, engine.PutOptions{})
	res := PutResult{PutResult: engine.PutResult{Results: make([]bool, len(keys))}, Declined: declined}
	for j, ok := range r.Results {
		res.Results[keep[j]] = ok
		if !ok {
			n.c.putFull.Add(1)
		}
	}
	for _, j := range r.Stored {
		i := keep[j]
		res.Stored = append(res.Stored, i)
		n.c.putBytes.Add(int64(len(payloads[i])))
		n.admitted(keys[i])
	}
	n.touchHeld(ks, r)
	n.c.puts.Add(int64(len(res.Stored)))
	return res, err
}

// touchHeld makes the keys r found already held (answered stored, not written) the most
// recent in the eviction order: such a write keeps the stored chunk and is a use of it, as
// a hit is. Left where it was, a key written again just after an earlier run last used it
// was the first a full cache evicted, and a GET right after its SET missed (a bench run
// repeating an earlier run's keys). Nothing is done, and nothing allocated, when every key
// answered stored was written.
func (n *Node) touchHeld(ks []engine.Key, r engine.PutResult) {
	if n.evict == nil {
		return
	}
	ok := 0
	for _, v := range r.Results {
		if v {
			ok++
		}
	}
	if ok == len(r.Stored) {
		return
	}
	written := make(map[int]bool, len(r.Stored))
	for _, j := range r.Stored {
		written[j] = true
	}
	for j, v := range r.Results {
		if v && !written[j] {
			n.evict.touch(n.cache.ShardOf(ks[j]), ks[j])
		}
	}
}

// pick returns v's elements at idx, in order.
func pick[T any](v []T, idx []int) []T {
	out := make([]T, len(idx))
	for j, i := range idx {
		out[j] = v[i]
	}
	return out
}

// admitted records a key this node stored: the directory tells the others, the eviction
// order takes it as the most recent.
func (n *Node) admitted(k engine.Key) {
	if d := n.opts.Directory; d != nil {
		d.Admitted(k.Identity())
	}
	n.evict.touch(n.cache.ShardOf(k), k)
}

// dropped records a key that left the cache (deleted or evicted).
func (n *Node) dropped(k engine.Key) {
	n.evict.forget(n.cache.ShardOf(k), k)
	n.evicted(k)
}

// Source says where a Get found a chunk.
type Source int

const (
	Miss  Source = iota // neither here nor at a peer
	Local               // this node's cache
	Peer                // fetched from a peer (and stored here)
)

// Result is one key's outcome of Get.
type Result struct {
	Source  Source
	Payload []byte
	Peer    string // the peer's name (Source == Peer)
}

// Get returns each key's payload: from the local cache, else (unless localOnly or no
// Directory) from a peer. A miss is a Result, not an error; the error is a local device
// error only.
func (n *Node) Get(ctx context.Context, keys []engine.Key, localOnly bool) ([]Result, error) {
	return n.GetWith(ctx, keys, localOnly, nil)
}

// GetWith is Get with the local hits and the chunks fetched from peers loaded into buffers
// from alloc (engine.LoadMany's: it may return a longer, aligned buffer, which the payload
// is cut from; nil: make, and the node's payload pool for fetched chunks). A RESP GET lends
// its pooled, registered value buffer this way (resp.go), so a value fetched from a peer
// takes no memory beyond it.
func (n *Node) GetWith(ctx context.Context, keys []engine.Key, localOnly bool, alloc func(size int) []byte) ([]Result, error) {
	n.c.gets.Add(int64(len(keys)))
	n.seen(keys)
	out := make([]Result, len(keys))
	var missing []int
	// One engine call pins each hit, loads it into a buffer of its size and unpins it.
	start := time.Now()
	bufs, err := n.cache.LoadMany(keys, alloc)
	hits := 0
	for i := range keys {
		if bufs[i] != nil {
			hits++
			out[i] = Result{Source: Local, Payload: bufs[i]}
			n.c.localHits.Add(1)
			n.evict.touch(n.cache.ShardOf(keys[i]), keys[i])
		} else {
			missing = append(missing, i)
		}
	}
	if hits > 0 { // a batch with nothing to load is not a load
		n.localLat.record(time.Since(start))
	}
	if len(missing) > 0 && !localOnly && n.opts.Directory != nil && ctx.Err() == nil && !n.isClosed() {
		n.fetchShared(ctx, keys, missing, out, chunkAlloc{caller: alloc, pool: n.peers.bufs})
	}
	for _, r := range out {
		if r.Source == Miss {
			n.c.misses.Add(1)
		}
	}
	return out, err
}

// nonNil gives LoadManyInto an empty buffer for keys that missed the lookup (it skips them).
func nonNil(bufs [][]byte) [][]byte {
	out := make([][]byte, len(bufs))
	for i, b := range bufs {
		if b == nil {
			b = []byte{}
		}
		out[i] = b
	}
	return out
}

// Delete removes keys (force: even pinned ones).
func (n *Node) Delete(keys []engine.Key, force bool) []bool {
	del := n.cache.DeleteMany(keys, force)
	for i, ok := range del {
		if ok {
			n.c.deletes.Add(1)
			n.dropped(keys[i])
		}
	}
	return del
}

// Entry is one listed key.
type Entry struct {
	Key     engine.Key
	Meta    engine.EntryMeta
	Replica bool
}

// List returns up to max entries sorted by key ("" salt: all), and whether more exist.
func (n *Node) List(salt string, max int) ([]Entry, bool) {
	if max <= 0 || max > n.opts.MaxListKeys {
		max = n.opts.MaxListKeys
	}
	var all []Entry
	n.cache.Entries(func(_ int, k engine.Key, m engine.EntryMeta) bool {
		if salt == "" || k.CacheSalt() == salt {
			all = append(all, Entry{Key: k, Meta: m, Replica: n.replicas.is(k.Identity())})
		}
		return true
	})
	sort.Slice(all, func(i, j int) bool { return all[i].Key.String() < all[j].Key.String() })
	if len(all) > max {
		return all[:max], true
	}
	return all, false
}

// ReadChunk serves the data plane from the lease table (dataplane.Source).
func (n *Node) ReadChunk(id uint64, index uint32, buf []byte) ([]byte, uint32, dataplane.Status) {
	l, ok := n.leases.get(id)
	if !ok {
		return nil, 0, dataplane.StatusNoLease
	}
	if int(index) >= len(l.hits) {
		return nil, 0, dataplane.StatusBadIndex
	}
	m := l.hits[index]
	if m.Size > len(buf) {
		return nil, 0, dataplane.StatusReadErr
	}
	p := buf[:m.Size]
	// A payload with a stored CRC goes out unchecked with that CRC, which the receiver
	// checks (dataplane.Conn.ReceiveAll): one pass over the bytes end to end instead of
	// one here and one there, and a payload corrupted on this device or on the wire is
	// refused all the same. Without a stored CRC the engine checks what it can and the
	// CRC sent is that of the bytes read.
	got, err := n.cache.LoadManyIntoWith(l.keys[index:index+1], [][]byte{p}, engine.LoadOptions{Unchecked: m.HasChecksum})
	if err != nil || !got[0] {
		return nil, 0, dataplane.StatusReadErr
	}
	crc := m.Checksum
	if !m.HasChecksum {
		crc = dataplane.Checksum(p)
	}
	return p, crc, dataplane.StatusOK
}

// Exists says which keys this node holds (locally; no peer is asked).
// A client's lookup: the admission policy counts it.
func (n *Node) Exists(keys []engine.Key) []bool {
	n.seen(keys)
	return n.cache.ExistsMany(keys, false)
}

// Usage is the cache's slot usage over all its devices.
func (n *Node) Usage() engine.Usage { return n.cache.Usage() }

// Full says whether the device k is routed to has no free slot.
func (n *Node) Full(k engine.Key) bool {
	u := n.cache.UsageByShard()[n.cache.ShardOf(k)]
	return u.SlotsUsed >= u.SlotsTotal
}

// Logger is the node's logger (Config.Logger).
func (n *Node) Logger() *slog.Logger { return n.opts.Logger }

// MaxPayload is the largest payload Put takes (the smallest of the shards').
func (n *Node) MaxPayload() int { return n.maxChunk }

// Entries calls fn for every key the node holds until it returns false (engine.Entries'
// semantics under concurrent writes).
func (n *Node) Entries(fn func(k engine.Key) bool) {
	n.cache.Entries(func(_ int, k engine.Key, _ engine.EntryMeta) bool { return fn(k) })
}
