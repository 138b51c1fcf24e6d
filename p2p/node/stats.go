package node

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/engine/sharded"
)

// counters are the node's cumulative counts; names in Stats are documented in docs/p2p.md.
type counters struct {
	gets, localHits, peerHits, misses       atomic.Int64
	puts, putBytes, putFull, deletes        atomic.Int64
	peerLookups, peerEmpty, peerBackoff     atomic.Int64
	peerTimeouts, peerRefused, peerChecksum atomic.Int64
	peerAbandoned                           atomic.Int64 // fetch steps cut short by their caller's context
	peerErrors, peerChunks, peerBytes       atomic.Int64
	replicas, replicaBytes, replicaFailed   atomic.Int64
	unlockFailed, flightWaits               atomic.Int64
	authFailed, authDenied, ctlRefused      atomic.Int64
}

// AddStats adds a source of counters to Stats (and so to remote stats and /metrics): a
// front end's (p2p/resp: resp_*). Its names must not clash with the node's; a name
// NAME/LABEL is exported to Prometheus as NAME_total{reason="LABEL"}.
func (n *Node) AddStats(f func() map[string]int64) {
	n.extraMu.Lock()
	n.extraStats = append(n.extraStats, f)
	n.extraMu.Unlock()
}

// CountAuthFailure counts a failed authentication a front end saw (auth_failed, with the
// control plane's own).
func (n *Node) CountAuthFailure() { n.c.authFailed.Add(1) }

// cacheStats adds the cache's own figures: slots and checkpoints in all, and per device as
// dev<i>_<name> when the cache has several.
func (n *Node) cacheStats(m map[string]int64) {
	add := func(prefix string, u engine.Usage, s engine.Stats) {
		m[prefix+"slots_total"], m[prefix+"slots_used"] = u.SlotsTotal, u.SlotsUsed
		m[prefix+"engine_puts"], m[prefix+"engine_put_failed"] = s.Puts, s.PutFailed
		m[prefix+"checkpoints"], m[prefix+"checkpoints_forced"] = s.Checkpoints, s.CheckpointsForced
		m[prefix+"checkpoint_errors"], m[prefix+"dirty_ops"] = s.CheckpointErrors, s.DirtyOps
		m[prefix+"deallocated_slots"], m[prefix+"deallocate_errors"] = s.DeallocatedSlots, s.DeallocateErrors
	}
	us, ss := n.cache.UsageByShard(), n.cache.StatsByShard()
	sum := sharded.SumStats(ss)
	add("", sharded.SumUsage(us), sum)
	n.healthStats(m, sum)
	m["devices"] = int64(len(us))
	n.ringStats(m)
	if len(us) > 1 {
		for i := range us {
			add(fmt.Sprintf("dev%d_", i), us[i], ss[i])
		}
	}
}

// ringStats adds where the devices' io_uring batches spent their time (blockdev.RingTiming,
// summed over the devices that have rings; absent when none has): ring_batches, and
// ring_queued_us, ring_run_us and ring_wake_us, the time from a batch's start until the
// ring's thread took it, until its last completion was reaped, and until its caller woke.
func (n *Node) ringStats(m map[string]int64) {
	var t blockdev.RingTiming
	rings := false
	for i := range n.cache.Len() {
		if d, ok := n.cache.Shard(i).Device().(blockdev.RingTimed); ok {
			if x, ok := d.RingTiming(); ok {
				t, rings = t.Plus(x), true
			}
		}
	}
	if rings {
		m["ring_batches"] = t.Batches
		m["ring_queued_us"], m["ring_run_us"], m["ring_wake_us"] = t.QueuedNs/1e3, t.RunNs/1e3, t.WakeNs/1e3
	}
}

// IOEngines names the I/O engines of the node's devices (devices.EngineOf), distinct, in
// device order, comma-separated: "aio", or "uring,aio" for a node over a block device and a
// file.
func (n *Node) IOEngines() string {
	var names []string
	for i := range n.cache.Len() {
		e := cmp.Or(devices.EngineOf(n.cache.Shard(i).Device()), "other")
		if !slices.Contains(names, e) {
			names = append(names, e)
		}
	}
	return strings.Join(names, ",")
}

// latency is a concurrent histogram of durations in microseconds.
type latency struct {
	mu   sync.Mutex
	h    *hdrhistogram.Histogram
	hist interface{ Observe(float64) } // the Prometheus histogram of the same durations
}

func newLatency() *latency { return &latency{h: hdrhistogram.New(1, 60e6, 3)} }

func (l *latency) record(d time.Duration) {
	l.mu.Lock()
	l.h.RecordValue(max(1, d.Microseconds()))
	l.mu.Unlock()
	if l.hist != nil {
		l.hist.Observe(d.Seconds())
	}
}

// quantiles returns count, p50 and p99 in microseconds.
func (l *latency) quantiles() (n int64, p50, p99 float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h.TotalCount(), float64(l.h.ValueAtQuantile(50)), float64(l.h.ValueAtQuantile(99))
}

// Stats is a snapshot of a node's counters (names as in docs/p2p.md) and latencies.
type Stats struct {
	Node     string
	Counters map[string]int64
	// LatencyUS holds p50/p99 in microseconds of peer fetches (lookup, transfer, verify,
	// per batch) and of local loads (per batch): peer_fetch_p50, local_load_p99, ...
	LatencyUS map[string]float64
}

// Stats returns the counters now.
func (n *Node) Stats() Stats {
	c := &n.c
	dp := n.data.Stats()
	m := map[string]int64{
		"gets": c.gets.Load(), "local_hits": c.localHits.Load(), "peer_hits": c.peerHits.Load(), "misses": c.misses.Load(),
		"puts": c.puts.Load(), "put_bytes": c.putBytes.Load(), "put_full": c.putFull.Load(), "deletes": c.deletes.Load(),
		"peer_lookups": c.peerLookups.Load(), "peer_lookup_empty": c.peerEmpty.Load(), "peer_backoff_skips": c.peerBackoff.Load(),
		"peer_timeouts": c.peerTimeouts.Load(), "peer_fetches_abandoned": c.peerAbandoned.Load(), "peer_refused": c.peerRefused.Load(), "peer_checksum_errors": c.peerChecksum.Load(),
		"peer_errors": c.peerErrors.Load(), "peer_chunks_in": c.peerChunks.Load(), "peer_bytes_in": c.peerBytes.Load(),
		"replicas_stored": c.replicas.Load(), "replica_bytes": c.replicaBytes.Load(), "replicas_not_stored": c.replicaFailed.Load(),
		"unlock_failed":  c.unlockFailed.Load(),
		"leases_granted": n.leases.granted.Load(), "leases_released": n.leases.released.Load(),
		"leases_expired": n.leases.expired.Load(), "leases_active": int64(n.leases.active()),
		"served_chunks": dp.Chunks, "served_bytes": dp.Bytes, "served_busy": dp.Busy, "served_failed": dp.Failed,
		"data_conns": dp.Conns, "data_conns_refused": dp.ConnsRefused, "data_bad_frames": dp.BadFrames,
		"data_lookups": dp.Lookups, "data_lookups_refused": dp.LookupsRefused, "leases_granted_data": n.leases.grantedData.Load(),
		"max_payload_bytes": int64(n.maxChunk), // a setting, not a count: what Put accepts
	}
	m["evicted"], m["evicted_replicas"], m["evict_pinned_skips"] = n.evict.stats()
	m["single_flight_waits"] = c.flightWaits.Load()
	m["admission_declined"] = n.admit.declinedCount()
	m["auth_failed"], m["auth_denied"], m["leases_refused"] = c.authFailed.Load(), c.authDenied.Load(), n.leases.refused.Load()
	m["control_conns_refused"], m["data_conns_unproven"] = c.ctlRefused.Load(), dp.Unproven
	n.cacheStats(m)
	n.tlsStats(m, dp)
	n.extraMu.Lock()
	for _, f := range n.extraStats {
		maps.Copy(m, f())
	}
	n.extraMu.Unlock()
	if ds, ok := n.opts.Directory.(interface{ DirectoryStats() map[string]int64 }); ok {
		maps.Copy(m, ds.DirectoryStats()) // membership: members, member/NAME/state, ...
	}
	lat := map[string]float64{}
	for name, l := range map[string]*latency{"peer_fetch": n.peerLat, "local_load": n.localLat} {
		cnt, p50, p99 := l.quantiles()
		if cnt > 0 {
			lat[name+"_p50"], lat[name+"_p99"] = p50, p99
		}
	}
	return Stats{Node: n.opts.Name, Counters: m, LatencyUS: lat}
}
