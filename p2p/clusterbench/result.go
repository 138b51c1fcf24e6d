package clusterbench

import (
	"fmt"
	"io"
	"strconv"

	"github.com/rbctl/rbctl/p2p/node"
	"github.com/rbctl/rbctl/reports"
	"github.com/rbctl/rbctl/workloads"
)

// WAFSource labels the device WAF: the emulated SSD's FTL model, not a drive.
const WAFSource = "emulator-model"

// NodeResult is one node's figures for one mode (or the total over nodes).
type NodeResult struct {
	Name       string `json:"name"`
	Requests   int64  `json:"requests"`
	Chunks     int64  `json:"chunks"`     // chunks asked for
	LocalHits  int64  `json:"local_hits"` // leading-prefix hits in the node's own cache
	PeerHits   int64  `json:"peer_hits"`  // leading-prefix hits fetched from a peer
	Computed   int64  `json:"computed"`   // chunks missed everywhere, computed and put
	Recomputed int64  `json:"recomputed"` // hits after the first miss (recomputed, not stored again)
	NotStored  int64  `json:"not_stored"` // computed chunks the cache refused for room
	// Declined: writes (puts of computed chunks, replicas of fetched ones) the node's
	// admission policy did not store.
	Declined    int64 `json:"admission_declined"`
	Evicted     int64 `json:"evicted"`           // keys the node evicted (LRU) to make room
	Deallocated int64 `json:"deallocated_slots"` // evicted slots deallocated (Options.Deallocate)
	WrongChunks int64 `json:"wrong_chunks"`      // payloads that differed from the computed bytes (must be 0)

	PeerBytesIn  int64 `json:"peer_bytes_in"`   // bytes fetched from peers
	ServedBytes  int64 `json:"served_bytes"`    // bytes served to peers
	ReplicaBytes int64 `json:"replica_bytes"`   // fetched bytes stored locally
	PeerTimeouts int64 `json:"peer_timeouts"`   // peer steps that timed out (each a miss)
	PeerErrors   int64 `json:"peer_errors"`     // other peer failures (each a miss)
	Checksum     int64 `json:"checksum_errors"` // fetched chunks refused for a checksum mismatch
	PeerLookups  int64 `json:"peer_lookups"`    // lookup-and-lock calls to peers
	EmptyLookups int64 `json:"empty_lookups"`   // ... that found nothing: a directory's false positives
	// GossipBytesOut: membership and digest traffic this node sent (gossip directory only).
	GossipBytesOut int64 `json:"gossip_bytes_out"`

	// Latency of one batch in microseconds; nil when none was measured.
	PeerFetchP50 *float64 `json:"peer_fetch_p50_us"`
	PeerFetchP99 *float64 `json:"peer_fetch_p99_us"`
	LocalLoadP50 *float64 `json:"local_load_p50_us"`
	LocalLoadP99 *float64 `json:"local_load_p99_us"`

	// Device writes from the emulated SSD's FDP statistics log: host bytes written (HBMW)
	// and media bytes written (MBMW, the emulator's FTL model); DeviceWAF = media / host,
	// labelled WAFSource.
	HostBytes  uint64   `json:"host_bytes_written"`
	MediaBytes uint64   `json:"media_bytes_written"`
	DeviceWAF  *float64 `json:"device_waf_model"`
}

// Result is one mode's run.
type Result struct {
	Mode        Mode    `json:"mode"`
	Gossip      bool    `json:"gossip_directory"` // keys located by p2p/cluster digests, not a static list
	Requests    int     `json:"requests"`
	Seconds     float64 `json:"seconds"`
	Interrupted bool    `json:"interrupted"`
	WAFSource   string  `json:"device_waf_source"`
	Route       Route   `json:"route"`
	Admission   string  `json:"admission"` // the nodes' admission policy (node.Config.Admission)
	// Deallocate is the nodes' deallocation of evicted slots (node.Config.Deallocate).
	Deallocate node.Deallocation `json:"deallocate"`
	TLS        bool              `json:"tls"` // nodes talked mutual TLS on both planes
	// CPUSeconds is the process's CPU time during the requests (user + system; nodes,
	// emulated SSDs and driver share the process).
	CPUSeconds float64 `json:"process_cpu_seconds"`
	// LoadStart and LoadEnd are the machine's load average (1, 5 and 15 minutes, as
	// /proc/loadavg gives them) when the requests began and ended; empty when not read.
	LoadStart string `json:"load_start,omitempty"`
	LoadEnd   string `json:"load_end,omitempty"`
	Workload  string `json:"workload,omitempty"` // mooncake:FILE; empty for the built-in tenants
	// Recorded is the replayed recording's account of itself (l2trace:); nil otherwise.
	Recorded *workloads.Recorded `json:"recorded,omitempty"`
	// Notes say what a recording's replay took from the recording node (Options.Fit).
	Notes []string `json:"notes,omitempty"`
	// Trace is the replayed part of the trace (its first Requests requests).
	Trace *workloads.TraceStats `json:"trace,omitempty"`
	Nodes []NodeResult          `json:"nodes"`
	Total NodeResult            `json:"total"`
	// DriveLife: the projection against Options.Drive over every node's device (a
	// projection, reports.DriveNote); Drive is the rating.
	DriveLife *reports.DriveLife `json:"drive_life,omitempty"`
	Drive     *reports.Drive     `json:"drive,omitempty"`
}

// projectDrive sets r's drive life from its totals: the devices' host and media bytes over
// the requests' wall time, prefill tokens saved = leading hits × chunk tokens (a trace).
func (r *Result) projectDrive(o Options) {
	if o.Drive == nil {
		return
	}
	d := *o.Drive
	d.WithCapacity(o.DeviceBytes * int64(o.Nodes))
	var rate float64
	if r.Seconds > 0 {
		rate = float64(r.Total.HostBytes) / r.Seconds
	}
	var tokens int64
	if o.Workload != "" {
		tokens = (r.Total.LocalHits + r.Total.PeerHits) * int64(o.ChunkTokens)
	}
	if l, ok := d.Project(string(r.Mode), r.Total.HostBytes, r.Total.MediaBytes, WAFSource, rate, "measured", tokens); ok {
		r.DriveLife, r.Drive = &l, &d
	}
}

func (m *NodeResult) fromNode(s node.Stats) {
	c := s.Counters
	m.PeerBytesIn, m.ServedBytes, m.ReplicaBytes = c["peer_bytes_in"], c["served_bytes"], c["replica_bytes"]
	m.Evicted, m.Declined, m.Deallocated = c["evicted"], c["admission_declined"], c["deallocated_slots"]
	m.PeerTimeouts, m.Checksum = c["peer_timeouts"], c["peer_checksum_errors"]
	m.PeerErrors = c["peer_errors"] + c["peer_refused"]
	m.PeerLookups, m.EmptyLookups = c["peer_lookups"], c["peer_lookup_empty"]
	get := func(k string) *float64 {
		if v, ok := s.LatencyUS[k]; ok {
			return &v
		}
		return nil
	}
	m.PeerFetchP50, m.PeerFetchP99 = get("peer_fetch_p50"), get("peer_fetch_p99")
	m.LocalLoadP50, m.LocalLoadP99 = get("local_load_p50"), get("local_load_p99")
}

func (m *NodeResult) waf() {
	if m.HostBytes > 0 {
		w := float64(m.MediaBytes) / float64(m.HostBytes)
		m.DeviceWAF = &w
	}
}

// total sums the nodes (latency percentiles stay per node: they do not add).
func (r *Result) total() {
	r.WAFSource = WAFSource
	t := NodeResult{Name: "total"}
	for i := range r.Nodes {
		n := &r.Nodes[i]
		n.waf()
		t.Requests += n.Requests
		t.Chunks += n.Chunks
		t.LocalHits += n.LocalHits
		t.PeerHits += n.PeerHits
		t.Computed += n.Computed
		t.Recomputed += n.Recomputed
		t.NotStored += n.NotStored
		t.Declined += n.Declined
		t.Evicted += n.Evicted
		t.Deallocated += n.Deallocated
		t.WrongChunks += n.WrongChunks
		t.PeerBytesIn += n.PeerBytesIn
		t.ServedBytes += n.ServedBytes
		t.ReplicaBytes += n.ReplicaBytes
		t.PeerTimeouts += n.PeerTimeouts
		t.PeerErrors += n.PeerErrors
		t.Checksum += n.Checksum
		t.PeerLookups += n.PeerLookups
		t.EmptyLookups += n.EmptyLookups
		t.GossipBytesOut += n.GossipBytesOut
		t.HostBytes += n.HostBytes
		t.MediaBytes += n.MediaBytes
	}
	t.waf()
	r.Total = t
}

// WriteText prints one table per mode (per node and total) and the comparison of every mode
// against the first.
func WriteText(w io.Writer, rs []Result) error {
	for _, r := range rs {
		dir := map[bool]string{true: ", gossip directory"}[r.Gossip] + map[bool]string{true: ", TLS"}[r.TLS]
		if r.Trace != nil {
			dir += fmt.Sprintf(", %s (%d requests, %d block references, ceiling %.1f%% of blocks, %d tenants by %s)", r.Workload, r.Trace.Requests,
				r.Trace.BlockRefs, 100*float64(r.Trace.CeilingBlocks)/float64(max(r.Trace.BlockRefs, 1)), r.Trace.Tenants.Tenants, r.Trace.SaltBy)
		}
		if rd := r.Recorded; rd != nil {
			dir += fmt.Sprintf(", %s (%d records: %d gets and %d peer fetches replayed as one-chunk requests)", r.Workload, rd.Records, rd.Gets, rd.Fetches)
		}
		if r.Deallocate == "none" {
			dir += ", evicted slots not deallocated"
		}
		if r.Admission != "" && r.Admission != "all" {
			dir += fmt.Sprintf(", admission %s (%d writes declined)", r.Admission, r.Total.Declined)
		}
		fmt.Fprintf(w, "mode %s%s, %s routing: %d requests in %.1f s%s\n", r.Mode, dir, r.Route, r.Requests, r.Seconds, map[bool]string{true: " (interrupted: partial)"}[r.Interrupted])
		if r.LoadStart != "" && r.LoadEnd != "" {
			fmt.Fprintf(w, "  load average (1, 5, 15 min) %s → %s\n", r.LoadStart, r.LoadEnd)
		}
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  %s\n", n)
		}
		t := reports.NewTable(w)
		t.Header([]string{"node", "requests", "local hits", "peer hits", "computed", "peer MiB in", "peer fetch p50/p99 us", "local load p50/p99 us", "host MiB", "dev WAF (model)", "wrong"})
		for _, n := range append(append([]NodeResult{}, r.Nodes...), r.Total) {
			t.Append([]string{n.Name, strconv.FormatInt(n.Requests, 10), ratio(n.LocalHits, n.Chunks), ratio(n.PeerHits, n.Chunks), strconv.FormatInt(n.Computed, 10),
				mib(uint64(n.PeerBytesIn)), pair(n.PeerFetchP50, n.PeerFetchP99), pair(n.LocalLoadP50, n.LocalLoadP99),
				mib(n.HostBytes), opt(n.DeviceWAF), strconv.FormatInt(n.WrongChunks, 10)})
		}
		if err := t.Render(); err != nil {
			return err
		}
		if r.DriveLife != nil {
			if err := reports.WriteWrapped(w, r.DriveLife.Line(r.Drive)); err != nil {
				return err
			}
		}
		if r.Total.PeerLookups > 0 {
			line := fmt.Sprintf("peer lookups %d, %d of them empty (%.1f%%)", r.Total.PeerLookups, r.Total.EmptyLookups,
				100*float64(r.Total.EmptyLookups)/float64(r.Total.PeerLookups))
			if r.Gossip && r.Seconds > 0 {
				line += fmt.Sprintf("; gossip sent %.0f B/s per node", float64(r.Total.GossipBytesOut)/r.Seconds/float64(len(r.Nodes)))
			}
			if err := reports.WriteWrapped(w, line); err != nil {
				return err
			}
		}
	}
	if len(rs) > 1 && rs[0].Total.HostBytes > 0 {
		base := rs[0]
		for _, r := range rs[1:] {
			if r.Mode == base.Mode || r.TLS != base.TLS {
				continue // over TLS against plain TCP: writeTLSCost compares those
			}
			line := fmt.Sprintf("%s against %s: %.1f%% of the host bytes written, %.1f%% of the chunks computed, device WAF (model) %s vs %s",
				r.Mode, base.Mode, 100*float64(r.Total.HostBytes)/float64(base.Total.HostBytes),
				100*float64(r.Total.Computed)/float64(max(base.Total.Computed, 1)), opt(r.Total.DeviceWAF), opt(base.Total.DeviceWAF))
			if err := reports.WriteWrapped(w, line); err != nil {
				return err
			}
		}
	}
	if err := writeTLSCost(w, rs); err != nil {
		return err
	}
	return reports.WriteWrapped(w, "host MiB: bytes the nodes wrote, from the emulated SSDs' FDP statistics log (HBMW); dev WAF (model): media bytes / host bytes from the emulated SSD's FDP statistics log (its FTL model, not a drive); "+
		"hits are the leading prefix of each request's chunks, as LMCache uses them; latencies are per batch (one request's keys)")
}

func ratio(a, b int64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%d (%.1f%%)", a, 100*float64(a)/float64(b))
}

func mib(b uint64) string { return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) }

func pair(a, b *float64) string {
	if a == nil || b == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f / %.0f", *a, *b)
}

func opt(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', 3, 64)
}
