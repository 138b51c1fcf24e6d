package node

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/engine/sharded"
	"github.com/rbctl/rbctl/p2p"
	"github.com/rbctl/rbctl/p2p/auth"
	"github.com/rbctl/rbctl/p2p/cluster"
	"github.com/rbctl/rbctl/p2p/secure"
	"github.com/rbctl/rbctl/placement"
	"github.com/rbctl/rbctl/workloads/l2trace"
)

// Config is a node: what a user sets, validated once when the node is built (Start, New or
// NewSharded). Zero fields take the defaults documented on each. The fields after
// "What Start opens" are Start's alone: New and NewSharded serve a cache the caller opened,
// with the loaded forms (TLS, Tokens, PeerToken, Recorder) the caller set.
type Config struct {
	Name string // node name reported in stats and to peers (default: the control address)
	// Recorder, when set, is told of every chunk operation the node answers (serve
	// --record, record.go); the node does not close it.
	Recorder *l2trace.Recorder
	// Advertise is the HOST:PORT peers dial for the control plane (the data plane: the same
	// host at its bound port); "" advertises the bound addresses, an unspecified host
	// (0.0.0.0, ::) replaced by the outbound interface's address (advertise.go).
	Advertise string

	// Directory says which peers may hold a key; nil serves the local cache only (no peer
	// fetch on a miss).
	Directory p2p.Directory

	LeaseTTL      time.Duration // how long this node asks peers to keep a lease (default 10 s)
	MaxLeaseTTL   time.Duration // cap on the leases this node grants (default 60 s)
	LookupTimeout time.Duration // one peer LookupAndLock call (default 2 s)
	FetchTimeout  time.Duration // one data-plane transfer of a lease's chunks (default 10 s)
	UnlockTimeout time.Duration // one Unlock call, fire-and-forget (default 2 s)
	CallTimeout   time.Duration // deadline the server applies to a client call that has none (default 30 s)
	MaxCandidates int           // peers tried per miss, most likely first (default 2)
	MaxBatch      int           // keys per call (default 256, at most dataplane.MaxBatch)
	MaxListKeys   int           // entries per List (default 10000)

	// BackoffBase and BackoffMax bound the wait before a failed peer is tried again
	// (doubling from base, default 100 ms and 5 s).
	BackoffBase, BackoffMax time.Duration
	// DataIdle: pooled data-plane connections idle longer than this are closed (default 30 s).
	DataIdle time.Duration
	// NoDataLookups: this node's data plane does not take lookup requests (a fetch in one
	// data-plane round trip, datalookup.go), so its peers take leases on the control plane
	// as nodes before it did (tests, and comparing the two).
	NoDataLookups bool

	// SeparateReplicas writes chunks stored after a peer fetch with ReplicaHandle instead of
	// the engine policy's choice (false, the default: a replica is placed like the tenant's
	// own writes). The node records replicas either way (List's replica field, stats).
	SeparateReplicas bool
	ReplicaHandle    placement.Handle
	// FetchOnly: chunks fetched from a peer are returned but not stored locally, so a
	// prefix the cluster holds is written once in the cluster, at the cost of a transfer on
	// every use (false, the default: fetched chunks are stored as replicas).
	FetchOnly bool

	// Admission is the admission policy's spec (package admission: all, second-hit[:W],
	// tinylfu[:W]; "" = all): which writes of chunks this node does not hold, puts and
	// replicas, are stored. A declined put is answered as declined (PutResult.Declined).
	Admission string

	// Eviction is how a full cache makes room for a put or a replica: EvictNone (the zero
	// value: the write is refused), EvictLRU, EvictFIFO or EvictRegion (evict.go).
	Eviction Eviction
	// RegionSlots is the size of an EvictRegion region in slots (a reclaim unit's bytes over
	// the slot's); required for EvictRegion.
	RegionSlots int
	// Deallocate is which of the devices Start opens deallocate every slot a delete or an
	// eviction frees before the slot is written again (engine.Config.DeallocateOnDelete),
	// so the drive stops keeping data that is dead: DeallocateNone (the zero value),
	// DeallocateDevices or DeallocateAll (dealloc.go). Counted as deallocated_slots and
	// deallocate_errors.
	Deallocate Deallocation

	// Data-plane budget: concurrent connections, bytes of chunk buffers in flight, and how
	// long a transfer waits for a buffer before it is refused as busy (dataplane.ServerConfig).
	DataMaxConns         int
	DataMaxInflightBytes int64
	DataBusyWait         time.Duration

	// Access control (auth.go): Tokens, when set, is what every gRPC call must present
	// (auth.MetadataKey) and what it may do; PeerToken is the token this node presents to
	// its peers (a token with the peer right in their files). Limits (limits.go): the
	// fields below bound what one client can hold; zero takes the documented default.
	Tokens    *auth.Tokens
	PeerToken string
	Limits    Limits

	// TamperData (tests only) changes the bytes of chunks this node serves after their
	// checksum was taken: a corrupting peer.
	TamperData func(index uint32, payload []byte)

	// MetricsListen, when set, is the HOST:PORT where Serve answers GET /metrics in the
	// Prometheus text format (metrics.go): the Stats counters, checkpoint age, latency
	// histograms.
	MetricsListen string
	// TLS, when set, runs both planes with mutual TLS (tls.go, p2p/secure); nil: plain TCP.
	TLS *secure.Material

	Logger *slog.Logger // default: discard

	// What Start opens, listens on and loads (start.go).

	// Devices are the cache's devices, one shard each, in the order they were formatted
	// (devices.Open's spellings: a file, a block device, /dev/ngXnY, emu:..., mem:SIZE).
	Devices []string
	// Open is how each device opens (cache.OpenOptions: device options, key namespace,
	// placement spec); Start adds periodic checkpoints every CheckpointInterval.
	Open cache.OpenOptions
	// ShardBy routes a key to one of several devices (sharded.RouteHash, the zero value, or
	// RouteKVRank); AllowMisrouted serves devices whose keys the route sends elsewhere (one
	// shard of a larger cache alone, or devices out of format order).
	ShardBy        sharded.Route
	AllowMisrouted bool
	// CheckpointInterval: the index is checkpointed this often while it changes, idle or
	// not, so a put acknowledged more than twice this (plus one checkpoint) before a crash
	// survives it (default 10 s).
	CheckpointInterval time.Duration
	// RegionBytes is an EvictRegion region (default 16 MiB: give the device's reclaim unit);
	// Start sets RegionSlots from it.
	RegionBytes int64
	// Listen is the control plane's HOST:PORT (port 0: any); DataListen the data plane's
	// (default: Listen's host, any port).
	Listen, DataListen string
	// Peers, when given, are fixed peers (StaticPeers); else the node joins Cluster.
	Peers []string
	// Cluster is the gossip membership joined when Peers is empty (p2p/cluster): alone when
	// Cluster.Cluster is "none", or "" without Seeds; Name defaults to one kept across
	// restarts (cluster.PersistentName, one per device list).
	Cluster cluster.Config
	// TLSFiles are the node's certificate, key and CA, all three or none; Start loads them
	// into TLS and reloads them when they change (every TLSPoll) or on ReloadTLS.
	TLSFiles secure.Files
	// AuthFile is the token file (auth.Load) read into Tokens; PeerTokenFile the file
	// whose first line is PeerToken; GossipKeyFile the gossip encryption keys
	// (cluster.ParseKeys), one base64 key a line, the first used to send.
	AuthFile, PeerTokenFile, GossipKeyFile string
	// RESP, when set, serves the node to Redis-protocol clients (resp.go).
	RESP *RESPConfig
	// Record, when set, records every chunk operation the node answers into a file
	// (l2trace; Record.Path); Start opens the Recorder, Close closes it.
	Record *l2trace.Options
	// Version names the software in INFO and in recordings' headers.
	Version string
}

func (o *Config) defaults() error {
	set := func(p *time.Duration, v time.Duration) {
		if *p <= 0 {
			*p = v
		}
	}
	set(&o.LeaseTTL, 10*time.Second)
	set(&o.MaxLeaseTTL, time.Minute)
	set(&o.LookupTimeout, 2*time.Second)
	set(&o.FetchTimeout, 10*time.Second)
	set(&o.UnlockTimeout, 2*time.Second)
	set(&o.CallTimeout, 30*time.Second)
	set(&o.BackoffBase, 100*time.Millisecond)
	set(&o.BackoffMax, 5*time.Second)
	set(&o.DataIdle, 30*time.Second)
	if o.MaxCandidates <= 0 {
		o.MaxCandidates = 2
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
	if o.MaxBatch > 256 {
		return fmt.Errorf("node: max batch %d above the data plane's 256", o.MaxBatch)
	}
	if o.MaxListKeys <= 0 {
		o.MaxListKeys = 10000
	}
	if o.SeparateReplicas && o.ReplicaHandle < placement.None {
		return fmt.Errorf("node: replica handle %d is neither a handle nor none", o.ReplicaHandle)
	}
	if o.BackoffMax < o.BackoffBase {
		o.BackoffMax = o.BackoffBase
	}
	if _, err := ParseEviction(string(o.Eviction)); err != nil {
		return err
	}
	if _, err := ParseDeallocation(string(o.Deallocate)); err != nil {
		return err
	}
	if o.Eviction == EvictRegion && o.RegionSlots < 1 {
		return fmt.Errorf("node: region eviction with regions of %d slots", o.RegionSlots)
	}
	if err := o.Limits.defaults(o.DataMaxConns); err != nil {
		return err
	}
	if o.Logger == nil {
		o.Logger = discard()
	}
	return nil
}

// discard is the logger of a node given none.
func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
