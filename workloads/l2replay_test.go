package workloads

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/rbctl/rbctl/workloads/l2trace"
)

// lruNode is a cache node of known capacity as a client uses it: GET, and on a miss SET.
// It records what it serves as a node would.
type lruNode struct {
	cap   int
	order []string // most recent last
	in    map[string]bool
}

func (n *lruNode) touch(k string) {
	for i, x := range n.order {
		if x == k {
			n.order = append(n.order[:i], n.order[i+1:]...)
			break
		}
	}
	n.order = append(n.order, k)
}

// synthRecording writes a recording of ops GET-miss-then-SET requests over keys Zipf keys
// (θ 0.9) spread over three tenants against an LRU node of capacity chunks, and returns
// the gets that hit.
func synthRecording(t *testing.T, path string, capacity, keys, ops int) (hits int64) {
	t.Helper()
	rec, err := l2trace.New(l2trace.Options{Path: path, MaxBytes: 64 << 10}, l2trace.Header{Node: "synthetic",
		Capacity: l2trace.Capacity{Slots: int64(capacity), SlotBytes: 4096 + 65536}, Eviction: "lru", Admission: "all"})
	if err != nil {
		t.Fatal(err)
	}
	n := &lruNode{cap: capacity, in: map[string]bool{}}
	z, r := NewZipf(uint64(keys), 0.9), newRand(11)
	t0 := time.Unix(1_764_900_000, 0)
	for i := range ops {
		k := z.Next(r)
		salt := fmt.Sprintf("tenant-%d", k%3)
		chunk := fmt.Sprintf("%016x", mix(k))
		at := t0.Add(time.Duration(i) * time.Millisecond)
		hit := n.in[chunk]
		get := l2trace.Record{Time: at, Op: l2trace.OpGet, Proto: "resp", Client: "127.0.0.1:40000", Salt: salt, Model: "tiny",
			Chunk: chunk, Hit: hit, Latency: 30 * time.Microsecond}
		if hit {
			hits++
			get.Size = 65536
			n.touch(chunk)
		}
		if !rec.Record(get) {
			t.Fatal("dropped")
		}
		if hit {
			continue
		}
		if len(n.order) == n.cap {
			delete(n.in, n.order[0])
			n.order = n.order[1:]
		}
		n.in[chunk] = true
		n.touch(chunk)
		set := get
		set.Op, set.Time, set.Size, set.Hit = l2trace.OpSet, at.Add(100*time.Microsecond), 65536, true
		if !rec.Record(set) {
			t.Fatal("dropped")
		}
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	return hits
}

// TestL2ReplayGivesRecordedHits: a recording of an LRU node replayed into a cache of the
// recording's capacity and eviction hits exactly where the node did.
func TestL2ReplayGivesRecordedHits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.jsonl")
	const capacity, ops = 300, 20000
	want := synthRecording(t, path, capacity, 2000, ops)
	if want == 0 || want == ops {
		t.Fatalf("the recording hit %d of %d: nothing to compare", want, ops)
	}
	src, err := Spec{Kind: "l2trace:" + path, Model: "tiny", ChunkTokens: 256, Util: 1}.Build()
	if err != nil {
		t.Fatal(err)
	}
	rd := src.Recorded
	if rd == nil || rd.Capacity.Slots != capacity || rd.Eviction != "lru" || rd.Gets != ops || rd.GetHits != want || len(rd.Files) < 2 || len(src.Salts) != 3 {
		t.Fatalf("recorded %+v, salts %v", rd, src.Salts)
	}
	g, _ := src.New()
	d, err := NewDriver(DriverConfig{Eviction: Eviction(rd.Eviction), TargetUtil: 1}, g, newMapBackend(rd.Capacity.Slots))
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := res.Total
	if c.ChunksRequested != ops || c.ChunksHit != want || c.ChunksStored != ops-want {
		t.Fatalf("replay: %d gets, %d hits, %d stored; recorded %d gets, %d hits", c.ChunksRequested, c.ChunksHit, c.ChunksStored, ops, want)
	}
	// Replayed as misses (a get that misses stores), the same: this client set every miss.
	g = &l2Gen{r: mustL2(t, path, L2Misses)}
	d, _ = NewDriver(DriverConfig{Eviction: LRU, TargetUtil: 1}, g, newMapBackend(capacity))
	res, _ = d.Run(context.Background())
	if c := res.Total; c.ChunksRequested != ops || c.ChunksHit != want || c.Requests != ops {
		t.Fatalf("misses replay: %d gets, %d hits, %d requests", c.ChunksRequested, c.ChunksHit, c.Requests)
	}
	// A smaller cache hits less: the replay is not reading the recorded outcomes back.
	g, _ = src.New()
	d, _ = NewDriver(DriverConfig{Eviction: LRU, TargetUtil: 1}, g, newMapBackend(capacity/2))
	res, _ = d.Run(context.Background())
	if res.Total.ChunksHit >= want {
		t.Fatalf("half the cache hit %d, the whole %d", res.Total.ChunksHit, want)
	}
	t.Logf("%d of %d gets hit at the node and in the replay", want, ops)
}

func mustL2(t *testing.T, path, mode string) *l2Replay {
	t.Helper()
	r, _, err := readL2(path, mode)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
