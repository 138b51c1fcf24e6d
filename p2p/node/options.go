package node

import (
	"context"
	"fmt"
	"github.com/rbctl/rbctl/workloads/l2trace"
	"io"
	"log/slog"
	"time"

	"github.com/rbctl/rbctl/p2p"
	"github.com/rbctl/rbctl/p2p/auth"
	"github.com/rbctl/rbctl/p2p/secure"
	"github.com/rbctl/rbctl/placement"
)

// Options configure a node. Zero fields take the defaults documented on each.
type Options struct {
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
	// JoinDirectory, when set, is how Serve builds the Directory once its listeners are
	// bound (e.g. joining a p2p/cluster with the addresses peers must use); Serve closes
	// the returned Closer (leaving the cluster) after the node has closed.
	JoinDirectory func(ctx context.Context, self p2p.Peer) (p2p.Directory, io.Closer, error)

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
	// FrontEnds serve the node to other protocols' clients (rbctl serve --resp: Redis);
	// Serve starts each once the node runs and stops it before the node closes.
	FrontEnds []FrontEnd

	// TLS, when set, runs both planes with mutual TLS (tls.go, p2p/secure); nil: plain TCP.
	TLS *secure.Material

	Logger *slog.Logger // default: discard

	replicas *replicas // set by PlacementHook
}

func (o *Options) defaults() error {
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
	if o.Eviction == EvictRegion && o.RegionSlots < 1 {
		return fmt.Errorf("node: region eviction with regions of %d slots", o.RegionSlots)
	}
	if err := o.Limits.defaults(o.DataMaxConns); err != nil {
		return err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}

// FrontEnd starts serving n to another protocol's clients and returns how to stop it.
type FrontEnd func(ctx context.Context, n *Node) (stop func(), err error)
