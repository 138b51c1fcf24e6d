package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/rbctl/rbctl/workloads"
	"github.com/rbctl/rbctl/workloads/l2trace"
)

// writeRecording records an LRU node of capacity chunks of 1 MiB serving GET, then SET on
// a miss, over keys keys drawn Zipf(0.9)-like from three tenants; it returns the gets and
// their hits.
func writeRecording(t *testing.T, path string, capacity, keys, ops int) (gets, hits int64) {
	t.Helper()
	rec, err := l2trace.New(l2trace.Options{Path: path}, l2trace.Header{Node: "n0",
		Capacity: l2trace.Capacity{Slots: int64(capacity), SlotBytes: 4096 + 1<<20}, Eviction: "lru", Admission: "all"})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	z := rand.NewZipf(rand.New(rand.NewPCG(7, 8)), 1.1, 4, uint64(keys-1))
	var order []string
	in := map[string]bool{}
	t0 := time.Unix(1_764_900_000, 0)
	for i := range ops {
		k := z.Uint64()
		chunk, salt := fmt.Sprintf("%016x", k*0x9e3779b97f4a7c15), fmt.Sprintf("t%d", k%3)
		at := t0.Add(time.Duration(i) * time.Millisecond)
		x := l2trace.Record{Time: at, Op: l2trace.OpGet, Salt: salt, Model: "tiny", Chunk: chunk, Hit: in[chunk], Client: fmt.Sprint(r.IntN(4))}
		gets++
		if x.Hit {
			hits++
			x.Size = 1 << 20
		}
		rec.Record(x)
		if x.Hit {
			for j, o := range order {
				if o == chunk {
					order = append(order[:j], order[j+1:]...)
					break
				}
			}
			order = append(order, chunk)
			continue
		}
		if len(order) == capacity {
			delete(in, order[0])
			order = order[1:]
		}
		in[chunk], order = true, append(order, chunk)
		x.Op, x.Size, x.Hit, x.Time = l2trace.OpSet, 1<<20, true, at.Add(time.Microsecond)
		rec.Record(x)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	return gets, hits
}

// TestSimulateRecordingGivesNodeHits: simulate replays a recording into the recording
// node's capacity and eviction when given no size flags, and hits where the node hit.
func TestSimulateRecordingGivesNodeHits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.jsonl")
	gets, hits := writeRecording(t, path, 500, 3000, 6000)
	o := Options{Workload: workloads.Spec{Kind: "l2trace:" + path, Model: "tiny", ChunkTokens: 256, Util: 0.9, Workers: 1},
		DeviceSize: 1 << 40, OP: 0.07, Handles: 4, Policies: []string{"none", "cache-salt"}, Deallocate: true, CheckpointOps: 2000,
		Fit: workloads.Fit{Size: true, Eviction: true, Admission: true}, MemAvailable: func() (int64, error) { return 1 << 40, nil }}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Workload.TargetUtil == 0.9 || rep.Workload.Eviction != "lru" {
		t.Fatalf("workload %+v: not the node's cache", rep.Workload)
	}
	for _, run := range rep.Runs {
		if run.Failed() || run.HitRatio != float64(hits)/float64(gets) {
			t.Errorf("%s: hit ratio %v, the node's %d/%d (%s)", run.Policy, run.HitRatio, hits, gets, run.Error)
		}
	}
	t.Logf("slots %d, target util %v; node hit %d of %d", rep.Workload.Slots, rep.Workload.TargetUtil, hits, gets)
}
