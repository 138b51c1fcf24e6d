package reports

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/rbctl/rbctl/workloads"
)

// TraceRun is what a run of a request trace (workloads.Op.Tokens set) measured beyond the
// chunk hit ratio: prompt tokens and trace blocks looked up and hit, the requests by the
// share of their chunks hit, and the misses the admission policy did not store.
type TraceRun struct {
	TokensRequested int64   `json:"tokens_requested"`
	TokensSaved     int64   `json:"tokens_saved"` // prefill tokens served from the cache
	TokenHitRatio   float64 `json:"token_hit_ratio"`
	BlocksRequested int64   `json:"blocks_requested"`
	BlocksHit       int64   `json:"blocks_hit"`
	BlockHitRatio   float64 `json:"block_hit_ratio"`
	// PrefixHits counts requests by the share of their chunks hit, in the buckets
	// PrefixBuckets names.
	PrefixHits    []int64  `json:"prefix_hits"`
	PrefixBuckets []string `json:"prefix_buckets"`
	// AdmissionRefused is the missed chunks the admission policy did not store.
	AdmissionRefused int64 `json:"admission_refused"`
}

func traceRunOf(c workloads.Counters) *TraceRun {
	if c.TokensRequested == 0 {
		return nil
	}
	t := &TraceRun{TokensRequested: c.TokensRequested, TokensSaved: c.TokensHit, BlocksRequested: c.BlocksRequested,
		BlocksHit: c.BlocksHit, PrefixHits: c.PrefixHits[:], PrefixBuckets: workloads.PrefixBuckets[:], AdmissionRefused: c.AdmissionRefused}
	t.TokenHitRatio = float64(c.TokensHit) / float64(c.TokensRequested)
	if c.BlocksRequested > 0 {
		t.BlockHitRatio = float64(c.BlocksHit) / float64(c.BlocksRequested)
	}
	return t
}

// FlashPerToken is the flash bytes a run wrote per prefill token it saved: the device's
// media bytes when it measured them (FDP statistics), else the model's; source says which.
// ok is false without a WAF or without a token saved.
func (r *Run) FlashPerToken() (v float64, source string, ok bool) {
	w := r.DeviceWAF
	if w == nil || w.MediaBytes == 0 {
		w = r.HostWAF
	}
	if r.Trace == nil || r.Trace.TokensSaved == 0 || w == nil || w.MediaBytes == 0 {
		return 0, "", false
	}
	return float64(w.MediaBytes) / float64(r.Trace.TokensSaved), w.Source, true
}

// traceNote says what the trace table's flash bytes are and how its prefix-hit column reads.
func traceNote(r *Report) string {
	src := "the FTL model's media bytes (host bytes × modelled WAF)"
	for _, run := range shown(r) {
		if _, s, ok := run.FlashPerToken(); ok && s != SourceModelled {
			src = "the device's media bytes (" + s + ")"
		}
	}
	return "trace table: hit % of blocks and prompt tokens (the first table's hit % is of chunks); Mtok saved = prefill tokens served from the cache (millions); flash = " + src +
		"; flash KiB/tok = flash bytes written per prefill token saved; prefix hits = requests that hit " + strings.Join(workloads.PrefixBuckets[:], ", ") +
		" of their chunks (leading hits only, as LMCache looks up)"
}

// traceLine states the trace's own figures: of the replayed window when --requests cut it,
// and how its requests split into tenants.
func traceLine(r *Report) string {
	t := r.Trace
	reqs := fmt.Sprintf("%d requests", t.Requests)
	if t.FileRequests > 0 {
		reqs = fmt.Sprintf("the first %d of the file's %d requests", t.Requests, t.FileRequests)
	}
	line := fmt.Sprintf("trace: %s, %d block references (%d distinct), %d prompt tokens over %.0f s; ceiling (a cache that never evicts): "+
		"%.2f %% of %d-token chunks, %.2f %% of blocks, %.2f %% of tokens", reqs, t.BlockRefs, t.DistinctBlocks, t.Tokens,
		float64(t.DurationMs)/1e3, 100*t.CeilingRatio(), t.ChunkTokens, 100*float64(t.CeilingBlocks)/float64(max(t.BlockRefs, 1)),
		100*float64(t.CeilingTokens)/float64(max(t.Tokens, 1)))
	if k := t.Tenants; k.Tenants > 0 {
		line += fmt.Sprintf("; %s", TenantLine(t))
	}
	return line
}

// TenantLine says how a trace's requests split into tenants: how many, the largest one's
// and the largest tenth's share of block references, the median tenant and the tenants of
// one request.
func TenantLine(t *workloads.TraceStats) string {
	k := t.Tenants
	return fmt.Sprintf("%d tenant(s) (salt by %s): the largest has %.2f %% of block references, the largest tenth %.1f %%; the median tenant %d request(s), %d tenant(s) of one request",
		k.Tenants, cmp.Or(t.SaltBy, "root"), 100*k.LargestShare, 100*k.Top10Share, k.MedianRequests, k.Singletons)
}

// perTrace returns the trace table: per run, its hit ratios, the prefill tokens it saved,
// the bytes it wrote (host, and flash through the WAF), flash bytes per token saved and
// the requests by prefix hit share.
func perTrace(r *Report) ([]string, [][]string) {
	if r.Trace == nil {
		return nil, nil
	}
	var rows [][]string
	h := []string{"policy"}
	if r.Sweep != "" {
		h = append(h, r.Sweep)
	}
	h = append(h, "admission", "blk hit %", "tok hit %", "Mtok saved", "host GiB", "flash GiB", "flash KiB/tok", "prefix hits")
	for _, run := range shown(r) {
		t := run.Trace
		if t == nil {
			continue
		}
		row := []string{run.Policy}
		if r.Sweep != "" {
			row = append(row, sweepCell(r, run.Param))
		}
		host, media, per := "-", "-", "-"
		if run.NoModel != "" {
			media, per = noModel, noModel
		}
		if w := run.HostWAF; w != nil {
			host, media = GiB(int64(w.HostBytes)), GiB(int64(w.MediaBytes))
		}
		if run.HostBytes != nil { // measured at the device: shown with or without a model
			host = GiB(*run.HostBytes)
		}
		if w := run.DeviceWAF; w != nil && w.MediaBytes > 0 {
			media = GiB(int64(w.MediaBytes))
		}
		if v, _, ok := run.FlashPerToken(); ok {
			per = f2(v / 1024)
		}
		var dist []string
		for _, n := range t.PrefixHits {
			dist = append(dist, strconv.FormatInt(n, 10))
		}
		row = append(row, cmp.Or(run.Admission, workloads.AdmitAll), f2(100*t.BlockHitRatio), f2(100*t.TokenHitRatio),
			f2(float64(t.TokensSaved)/1e6), host, media, per, strings.Join(dist, " "))
		rows = append(rows, row)
	}
	return h, rows
}

// sweepCell shows a sweep value: sizes with their unit (a 2 MiB RU as "2.0 MiB", not 0.00
// GiB), the rest as numbers.
func sweepCell(r *Report, v float64) string {
	if r.Sweep == "ru" || r.Sweep == "size" {
		return Size(int64(v))
	}
	return f2(v)
}
