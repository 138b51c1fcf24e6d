package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/workloads"
)

// writeTrace writes a Mooncake trace of n requests to a file: conversations that grow by
// newBlocks blocks a turn (one in three requests opens a conversation on one of four
// shared system prompts) and returns its path.
func writeTrace(t testing.TB, n, newBlocks int) string {
	r := rand.New(rand.NewPCG(uint64(n), 3))
	var b strings.Builder
	next := uint64(16)
	var convs [][]uint64
	for i := 0; i < n; i++ {
		var ids []uint64
		c := -1
		if len(convs) > 0 && r.IntN(3) > 0 {
			c = r.IntN(len(convs))
			ids = append(ids, convs[c]...)
		} else {
			ids = append(ids, uint64(r.IntN(4)))
		}
		for j := 1 + r.IntN(newBlocks); j > 0; j-- {
			ids = append(ids, next)
			next++
		}
		if c >= 0 {
			convs[c] = ids
		} else {
			convs = append(convs, ids)
		}
		if len(convs) > 512 {
			convs = convs[1:]
		}
		parts := make([]string, len(ids))
		for j, id := range ids {
			parts[j] = fmt.Sprint(id)
		}
		fmt.Fprintf(&b, `{"timestamp": %d, "input_length": %d, "output_length": 1, "hash_ids": [%s]}`+"\n", i*10, len(ids)*512, strings.Join(parts, ", "))
	}
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// simulate runs a trace at three cache sizes and two admission policies: every run covers
// the whole trace, no run beats the ceiling, the largest cache reaches it, and second-hit
// writes less than all at each size.
func TestRunTrace(t *testing.T) {
	o := smallOptions()
	o.Workload = workloads.Spec{Kind: "mooncake:" + writeTrace(t, 600, 6), Model: "tiny", ChunkTokens: 256, Util: 0.9, Workers: 1}
	o.Sweep = &Sweep{Name: "size", Values: []float64{1 << 30, 2 << 30, 64 << 30}}
	o.Admissions = []string{"all", "second-hit"}
	o.Policies = []string{"none", "hotness"}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	tr := rep.Trace
	if tr == nil || tr.Requests != 600 || tr.ChunkTokens != 256 || len(rep.Runs) != 12 {
		t.Fatalf("trace %+v, %d runs", tr, len(rep.Runs))
	}
	host := map[string]uint64{}
	for _, run := range rep.Runs {
		name := fmt.Sprintf("%s@%g[%s]", run.Policy, run.Param, run.Admission)
		if run.Failed() || run.Trace == nil || run.HostWAF == nil {
			t.Fatalf("%s: %+v", name, run)
		}
		if run.Requests != tr.Requests || run.Trace.TokensRequested != tr.Tokens {
			t.Errorf("%s: %d requests, %d tokens; the trace has %d, %d", name, run.Requests, run.Trace.TokensRequested, tr.Requests, tr.Tokens)
		}
		if run.HitRatio > tr.CeilingRatio()+1e-12 {
			t.Errorf("%s: hit ratio %.4f above the ceiling %.4f", name, run.HitRatio, tr.CeilingRatio())
		}
		if run.Param == 64<<30 && run.Admission == "all" && run.Trace.TokensSaved != tr.CeilingTokens {
			t.Errorf("%s: a cache larger than the trace saved %d tokens, the ceiling is %d", name, run.Trace.TokensSaved, tr.CeilingTokens)
		}
		if _, _, ok := run.FlashPerToken(); !ok {
			t.Errorf("%s: no flash bytes per token saved", name)
		}
		var hr int
		for _, p := range run.Timeline {
			if p.HitRatio != nil {
				hr++
			}
		}
		if hr < 16 {
			t.Errorf("%s: %d hit-ratio points", name, hr)
		}
		host[name] = run.HostWAF.HostBytes
	}
	for _, size := range o.Sweep.Values {
		all, second := host[fmt.Sprintf("none@%g[all]", size)], host[fmt.Sprintf("none@%g[second-hit]", size)]
		if second >= all {
			t.Errorf("size %g: second-hit wrote %d host bytes, all %d", size, second, all)
		}
	}
}

// BenchmarkSimulateTrace runs a trace the size of Mooncake's conversation trace (12,031
// requests) with Llama-3-8B chunks (about 11 TiB of distinct KV) over a 960 GiB drive,
// one placement policy per iteration.
func BenchmarkSimulateTrace(b *testing.B) {
	path := writeTrace(b, 12031, 29)
	o := Options{Workload: workloads.Spec{Kind: "mooncake:" + path, Model: "llama3-8b", ChunkTokens: 256, Util: 0.9, Workers: 1},
		DeviceSize: 960 << 30, OP: 0.07, Handles: 8, Policies: []string{"cache-salt"}, Deallocate: true, CheckpointOps: 2000,
		MemAvailable: func() (int64, error) { return 1 << 40, nil }}
	src, err := o.Workload.Build()
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d requests, %d distinct blocks = %.1f TiB of KV", src.Trace.Requests, src.Trace.DistinctBlocks,
		float64(src.Trace.DistinctBlocks)*512*128*1024/(1<<40))
	for b.Loop() {
		rep, err := Run(context.Background(), o)
		if err != nil || rep.Runs[0].Failed() {
			b.Fatal(err, rep.Runs[0].Error)
		}
	}
	b.ReportMetric(float64(12031*b.N)/b.Elapsed().Seconds(), "requests/s")
}
