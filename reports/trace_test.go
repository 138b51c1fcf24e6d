package reports

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/workloads"
)

func traceReport() *Report {
	r := New("simulate")
	r.Trace = &workloads.TraceStats{Requests: 10, BlockRefs: 40, DistinctBlocks: 20, CeilingBlocks: 20, Tokens: 20000, ChunkTokens: 256,
		ChunkRefs: 80, CeilingChunks: 40, CeilingTokens: 10000}
	r.Sweep = "size"
	c := workloads.Counters{Requests: 10, ChunksRequested: 80, ChunksHit: 30, TokensRequested: 20000, TokensHit: 7680,
		BlocksRequested: 40, BlocksHit: 15, PrefixHits: [6]int64{4, 0, 1, 0, 3, 2}}
	run := FromResult("metadata-class+cache-salt:hash", &workloads.Result{Counters: c, Total: c}, false)
	run.Admission, run.Param = "prefix-depth:16", 256<<30
	run.HostWAF = &WAF{Value: 1.5, HostBytes: 1 << 30, MediaBytes: 3 << 29, Source: SourceModelled}
	r.Runs = []Run{run}
	return r
}

// The trace table gives tokens saved and flash bytes per prefill token saved from the run's
// figures, within the text width; a device's FDP figures win over the model's.
func TestTraceTable(t *testing.T) {
	r := traceReport()
	run := &r.Runs[0]
	if run.Trace == nil || run.Trace.TokensSaved != 7680 || run.Trace.BlockHitRatio != 15.0/40 {
		t.Fatalf("trace run %+v", run.Trace)
	}
	if v, src, ok := run.FlashPerToken(); !ok || v != float64(3<<29)/7680 || src != SourceModelled {
		t.Fatalf("flash per token %v %s %v", v, src, ok)
	}
	run.DeviceWAF = &WAF{Value: 2, HostBytes: 1 << 30, MediaBytes: 2 << 30, Source: SourceFDPStats}
	if v, src, _ := run.FlashPerToken(); v != float64(2<<30)/7680 || src != SourceFDPStats {
		t.Fatalf("with an FDP log: %v %s", v, src)
	}
	var b bytes.Buffer
	if err := Table(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"ceiling (a cache that never evicts): 50.00 % of 256-token chunks", "prefix-depth:16", "4 0 1 0 3 2",
		"273.07" /* 2 GiB / 7680 tokens in KiB */, "256.0 GiB", "the device's media bytes (fdp-stats)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if len(l) > TextWidth {
			t.Errorf("line of %d bytes: %s", len(l), l)
		}
	}
	b.Reset()
	if err := CSV(&b, r); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil || len(rows) != 2 {
		t.Fatalf("%v %v", err, rows)
	}
	col := map[string]string{}
	for i, h := range rows[0] {
		col[h] = rows[1][i]
	}
	if col["admission"] != "prefix-depth:16" || col["tokens_saved"] != "7680" || col["flash_bytes_per_token_saved"] == "" {
		t.Errorf("csv %v", col)
	}
}
