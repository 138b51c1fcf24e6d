package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
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

// lruPrefixHits is a plain LRU prefix cache of capacity chunks, read straight from the trace
// file: a request hits its leading cached chunks (making them recent), stores its other
// chunks (at most half the cache), and the least recently used chunks not just stored go
// beyond capacity. Chunk j of block id (256-token chunks) is "id/j"; a block's last chunk
// is the one its tokens reach.
func lruPrefixHits(t *testing.T, path string, capacity int) (hits, refs int64) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]int64{}
	clock := int64(0)
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r struct {
			InputLength int      `json:"input_length"`
			HashIDs     []uint64 `json:"hash_ids"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		var chunks []string
		for i, id := range r.HashIDs {
			for j := 0; j < 2 && i*512+j*256 < r.InputLength; j++ {
				chunks = append(chunks, fmt.Sprintf("%d/%d", id, j))
			}
		}
		refs += int64(len(chunks))
		h := 0
		for h < len(chunks) && last[chunks[h]] > 0 {
			clock++
			last[chunks[h]] = clock
			h++
		}
		hits += int64(h)
		fresh := map[string]bool{}
		for _, c := range chunks[h:] {
			if len(fresh) >= max(1, capacity/2) {
				break
			}
			if last[c] == 0 {
				fresh[c] = true
				last[c] = -1
			}
		}
		for len(last) > capacity {
			oldest, at := "", int64(-1)
			for c, ts := range last {
				if !fresh[c] && (at < 0 || ts < at) {
					oldest, at = c, ts
				}
			}
			delete(last, oldest)
		}
		for _, c := range chunks[h:] {
			if fresh[c] {
				clock++
				last[c] = clock
			}
		}
	}
	return hits, refs
}

// simulate's hit count on a trace is exactly that of a plain LRU of its target size, worked
// out from the file by the test itself.
func TestRunTraceLRUExact(t *testing.T) {
	path := writeTrace(t, 300, 4)
	for _, size := range []int64{256 << 20, 1 << 30} {
		o := smallOptions()
		o.DeviceSize, o.Policies = size, []string{"none"}
		o.Workload = workloads.Spec{Kind: "mooncake:" + path, Model: "tiny", ChunkTokens: 256, Util: 0.9, Workers: 1}
		rep, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		run := rep.Runs[0]
		target := workloads.TargetSlots(0.9, rep.Workload.Slots)
		hits, refs := lruPrefixHits(t, path, int(target))
		if rep.Trace.ChunkRefs != refs {
			t.Fatalf("simulate saw %d chunk references, the file has %d", rep.Trace.ChunkRefs, refs)
		}
		if got := int64(math.Round(run.HitRatio * float64(refs))); got != hits || run.Evicted == 0 {
			t.Errorf("%d MiB (%d chunks kept): simulate hit %d of %d chunks (%d evicted), plain LRU %d", size>>20, target, got, refs, run.Evicted, hits)
		}
		t.Logf("%d MiB: %d chunks kept, hit %d of %d", size>>20, target, hits, refs)
	}
}
