package workloads

import (
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/rbctl/rbctl/placement"
)

// What a Driver run measures: per-phase latency, running totals and the result.

// Phase names the operations whose latency the Driver records.
type Phase int

const (
	PhaseRequest Phase = iota // one whole request (lookup, load, unlock, store)
	PhaseLookup
	PhaseLoad
	PhaseStore
	PhaseDelete
	NumPhases
)

var phaseNames = [...]string{"request", "lookup", "load", "store", "delete"}

func (p Phase) String() string { return phaseNames[p] }

// Counters are the driver's running totals.
type Counters struct {
	Ops, Requests         int64
	ChunksRequested       int64 // chunks looked up (requests and gets)
	ChunksHit             int64
	ChunksLoaded          int64
	BytesRead             int64
	ChunksStored          int64
	BytesWritten          int64
	StoreFailed           int64
	StoreSkipped          int64 // chunks of prompts longer than half the cache, not stored
	Deleted               int64 // by KindDelete ops
	Evicted               int64 // by the eviction policy
	Expired               int64 // by tenant TTLs
	Errors                int64
	TenantRequests        []int64
	TenantBytesWritten    []int64
	TenantChunksHit       []int64
	TenantChunksRequested []int64
	TenantEvicted         []int64 // Evicted by tenant
	// Trace requests (Op.Tokens set): prompt tokens and blocks looked up and hit, and the
	// requests by the share of their chunks hit (PrefixBuckets).
	TokensRequested, TokensHit int64
	BlocksRequested, BlocksHit int64
	PrefixHits                 [len(PrefixBuckets)]int64
	// AdmissionRefused counts missed chunks the admission policy did not store (with the
	// ones after them in their request).
	AdmissionRefused int64
}

// PrefixBuckets names Counters.PrefixHits: requests that hit none of their chunks, less
// than a quarter, a quarter to a half, a half to three quarters, more but not all, all.
var PrefixBuckets = [...]string{"0", "<25%", "25-50%", "50-75%", "75-<100%", "100%"}

// countRequest adds a trace request of n chunks with a leading hits of them cached.
func (c *Counters) countRequest(op *Op, n, hits int) {
	if op.ChunkTokens <= 0 || n == 0 {
		return
	}
	c.TokensRequested += int64(op.Tokens)
	c.TokensHit += int64(min(hits*op.ChunkTokens, op.Tokens))
	if bc := op.BlockChunks; bc > 0 {
		c.BlocksRequested += int64((n + bc - 1) / bc)
		if hits == n {
			c.BlocksHit += int64((n + bc - 1) / bc)
		} else {
			c.BlocksHit += int64(hits / bc)
		}
	}
	b := 0
	switch {
	case hits == n:
		b = 5
	case hits > 0:
		b = 1 + min(4*hits/n, 3)
	}
	c.PrefixHits[b]++
}

func (c *Counters) clone() Counters {
	d := *c
	d.TenantRequests = append([]int64(nil), c.TenantRequests...)
	d.TenantBytesWritten = append([]int64(nil), c.TenantBytesWritten...)
	d.TenantChunksHit = append([]int64(nil), c.TenantChunksHit...)
	d.TenantChunksRequested = append([]int64(nil), c.TenantChunksRequested...)
	d.TenantEvicted = append([]int64(nil), c.TenantEvicted...)
	return d
}

// Sub returns c − b.
func (c Counters) Sub(b Counters) Counters {
	d := c.clone()
	d.Ops -= b.Ops
	d.Requests -= b.Requests
	d.ChunksRequested -= b.ChunksRequested
	d.ChunksHit -= b.ChunksHit
	d.ChunksLoaded -= b.ChunksLoaded
	d.BytesRead -= b.BytesRead
	d.ChunksStored -= b.ChunksStored
	d.BytesWritten -= b.BytesWritten
	d.StoreFailed -= b.StoreFailed
	d.StoreSkipped -= b.StoreSkipped
	d.Deleted -= b.Deleted
	d.Evicted -= b.Evicted
	d.Expired -= b.Expired
	d.Errors -= b.Errors
	d.TokensRequested -= b.TokensRequested
	d.TokensHit -= b.TokensHit
	d.BlocksRequested -= b.BlocksRequested
	d.BlocksHit -= b.BlocksHit
	d.AdmissionRefused -= b.AdmissionRefused
	for i := range d.PrefixHits {
		d.PrefixHits[i] -= b.PrefixHits[i]
	}
	for i := range d.TenantRequests {
		if i < len(b.TenantRequests) {
			d.TenantRequests[i] -= b.TenantRequests[i]
			d.TenantBytesWritten[i] -= b.TenantBytesWritten[i]
			d.TenantChunksHit[i] -= b.TenantChunksHit[i]
			d.TenantChunksRequested[i] -= b.TenantChunksRequested[i]
		}
		if i < len(b.TenantEvicted) && i < len(d.TenantEvicted) {
			d.TenantEvicted[i] -= b.TenantEvicted[i]
		}
	}
	return d
}

// HitRatio is chunks hit over chunks requested.
func (c Counters) HitRatio() float64 {
	if c.ChunksRequested == 0 {
		return 0
	}
	return float64(c.ChunksHit) / float64(c.ChunksRequested)
}

// Result is what Run measured over the window after warm-up.
type Result struct {
	Counters Counters      // measured window
	Total    Counters      // whole run, warm-up included
	Elapsed  time.Duration // measured window, wall clock
	Latency  [NumPhases]*hdrhistogram.Histogram
	Salts    []string
	// Budgets is the tenants' slot budgets the run kept (nil: none); TenantHeld the slots
	// each tenant held when it ended.
	Budgets    *placement.Allocation
	TenantHeld []int64
	// WarmupTimedOut: the warm-up ended on WarmupTimeout, before WarmupBytes were stored.
	WarmupTimedOut bool
	// Stalled: the run stopped after DriverConfig.StallOps ops without a store.
	Stalled bool
	// Interrupted: the caller's context was cancelled before the workload ended; the
	// figures cover what ran until then. Warmed says whether the measured window had begun.
	Interrupted bool
	Warmed      bool
	// Cut: Duration ended the run before the workload did (a trace not replayed whole).
	Cut bool
	// Queue is the queue depth of a run with arrival times (queue.go); nil otherwise.
	Queue *QueueStats
}

// NewHistogram returns the latency histogram the driver uses: 1 µs resolution up to 100 s,
// 3 significant digits, values in nanoseconds.
func NewHistogram() *hdrhistogram.Histogram { return hdrhistogram.New(1000, 100e9, 3) }
