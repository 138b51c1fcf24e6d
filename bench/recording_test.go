package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/rbctl/rbctl/workloads"
	"github.com/rbctl/rbctl/workloads/l2trace"
)

// TestRunRecordingGivesNodeHits: bench replays a node's recording into a device larger than
// the node, keeping the node's slots as its target (no --util given), and hits where the
// node did: an LRU node of 60 chunks of 64 KiB serving GET, then SET on a miss.
func TestRunRecordingGivesNodeHits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.jsonl")
	rec, err := l2trace.New(l2trace.Options{Path: path}, l2trace.Header{Node: "n0",
		Capacity: l2trace.Capacity{Slots: 60, SlotBytes: 4096 + 64<<10}, Eviction: "lru", Admission: "all"})
	if err != nil {
		t.Fatal(err)
	}
	var order []uint64
	var gets, hits int64
	t0 := time.Unix(1_764_900_000, 0)
	for i := range 1500 {
		k := uint64(i*i*7+i) % 97 % uint64(30+i%70) // skewed toward small keys
		at := t0.Add(time.Duration(i) * time.Millisecond)
		x := l2trace.Record{Time: at, Op: l2trace.OpGet, Salt: fmt.Sprint("t", k%3), Model: "tiny", Chunk: fmt.Sprintf("%x", k)}
		for j, o := range order {
			if o == k {
				x.Hit, order = true, append(order[:j], order[j+1:]...)
				break
			}
		}
		gets++
		if x.Hit {
			hits++
		} else if len(order) == 60 {
			order = order[1:]
		}
		order = append(order, k)
		rec.Record(x)
		if !x.Hit {
			x.Op, x.Hit, x.Size = l2trace.OpSet, true, 64<<10
			rec.Record(x)
		}
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	o := fixedOptions()
	o.Path, o.Policies = "mem:64M", []string{"none"}
	o.Workload = workloads.Spec{Kind: "l2trace:" + path, Model: "tiny", ChunkTokens: 256, Util: 0.9, Workers: 1}
	o.Fit = workloads.Fit{Size: true, Eviction: true, Admission: true}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Runs[0]
	if r.Failed() || r.HitRatio != float64(hits)/float64(gets) || hits == 0 || hits == gets {
		t.Fatalf("hit ratio %v, the node's %d/%d (%s)", r.HitRatio, hits, gets, r.Error)
	}
}
