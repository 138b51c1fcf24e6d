package clusterbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rbctl/rbctl/workloads"
	"github.com/rbctl/rbctl/workloads/l2trace"
)

// conversations writes a trace of n requests: conv conversations, each turn resending the
// conversation so far plus two new blocks, on one shared system prompt (block 0).
func conversations(t *testing.T, n, conv int) string {
	var b strings.Builder
	turns := make([][]uint64, conv)
	next := uint64(1)
	for i := 0; i < n; i++ {
		c := i % conv
		if turns[c] == nil {
			turns[c] = []uint64{0}
		}
		turns[c] = append(turns[c], next, next+1)
		next += 2
		ids := make([]string, len(turns[c]))
		for j, id := range turns[c] {
			ids[j] = fmt.Sprint(id)
		}
		fmt.Fprintf(&b, `{"timestamp": %d, "input_length": %d, "hash_ids": [%s]}`+"\n", i, 512*len(ids), strings.Join(ids, ", "))
	}
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A trace replays over the nodes: round-robin scatters each conversation, so without peers
// its history is computed again on every node and sharing fetches it; session routing keeps
// a conversation on one node, so it hits locally without peers.
func TestTraceRoutes(t *testing.T) {
	path := conversations(t, 60, 5) // 5 conversations over 3 nodes: round-robin moves each one
	computed := map[string]int64{}
	for _, route := range []Route{RoundRobin, Session} {
		o := small(t)
		o.Workload, o.Route, o.Modes, o.ChunkTokens, o.Requests = "mooncake:"+path, route, []Mode{Off, Shared}, 512, 0
		rs, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			tot := r.Total
			if r.Requests != 60 || r.Trace == nil || r.Trace.Requests != 60 || tot.WrongChunks != 0 || r.Route != route {
				t.Fatalf("%s %s: %d requests, trace %+v, %d wrong", route, r.Mode, r.Requests, r.Trace, tot.WrongChunks)
			}
			if got := tot.LocalHits + tot.PeerHits + tot.Computed + tot.Recomputed; got != tot.Chunks || tot.Chunks != r.Trace.BlockRefs {
				t.Errorf("%s %s: hits+computed = %d, chunks %d, trace blocks %d", route, r.Mode, got, tot.Chunks, r.Trace.BlockRefs)
			}
			computed[string(route)+"/"+string(r.Mode)] = tot.Computed
		}
		if route == RoundRobin && (rs[1].Total.PeerHits == 0 || rs[1].Total.Computed >= rs[0].Total.Computed) {
			t.Errorf("round-robin: shared %d peer hits, computed %d (off %d)", rs[1].Total.PeerHits, rs[1].Total.Computed, rs[0].Total.Computed)
		}
	}
	// Everything fits: a block is computed once in the cluster when a conversation stays on
	// its node or peers share, more often when round-robin moves it without peers.
	for _, k := range []string{"session/off", "session/shared", "round-robin/shared"} {
		if computed[k] != 121 { // block 0 and two new blocks per request
			t.Errorf("%s computed %d blocks, the trace has 121", k, computed[k])
		}
	}
	if computed["session/off"] >= computed["round-robin/off"] {
		t.Errorf("session routing computed %d without peers, round-robin %d", computed["session/off"], computed["round-robin/off"])
	}
	t.Logf("computed: %v", computed)
	o := small(t)
	o.Workload, o.ChunkTokens = "mooncake:"+path, 300
	if _, err := Run(context.Background(), o); err == nil {
		t.Error("300-token chunks accepted")
	}
	o.ChunkTokens, o.Route = 256, "sticky"
	if _, err := Run(context.Background(), o); err == nil {
		t.Error("route sticky accepted")
	}
}

// A node's recording replays over the cluster: each get a one-chunk request routed by its
// tenant; with room for everything each distinct chunk is computed once per tenant's node.
func TestRecordingReplays(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.jsonl")
	rec, err := l2trace.New(l2trace.Options{Path: path}, l2trace.Header{Node: "n0", Capacity: l2trace.Capacity{Slots: 64, SlotBytes: 1 << 20}, Eviction: "lru"})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_764_900_000, 0)
	held := map[string]bool{}
	for i := range 60 {
		chunk, salt := fmt.Sprintf("%016x", i%10), fmt.Sprintf("t%d", i%10%4) // 10 chunks of 4 tenants
		x := l2trace.Record{Time: t0.Add(time.Duration(i) * time.Millisecond), Op: l2trace.OpGet, Salt: salt, Model: "m", Chunk: chunk, Hit: held[chunk]}
		rec.Record(x)
		if !x.Hit {
			held[chunk] = true
			x.Op, x.Hit, x.Size = l2trace.OpSet, true, 65536
			rec.Record(x)
		}
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	o := small(t)
	o.Workload, o.Route, o.Modes, o.Requests = "l2trace:"+path, Session, []Mode{Off}, 0
	rs, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	tot := r.Total
	if r.Requests != 60 || r.Recorded == nil || r.Recorded.Gets != 60 || tot.Chunks != 60 || tot.Computed != 10 || tot.LocalHits != 50 || tot.WrongChunks != 0 {
		t.Fatalf("%d requests, recorded %+v, totals %+v", r.Requests, r.Recorded, tot)
	}
}

// Given no size of its own (Options.Fit, as cluster-bench without --device-size), a
// recording's replay gives every node the recording node's slots and admission: a node of
// 8 slots that sees 20 chunks twice computes all 40, a node of its default device (about
// 1,900 slots) 20; the admission policy is the header's.
func TestRecordingSizesTheNodes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.jsonl")
	rec, err := l2trace.New(l2trace.Options{Path: path},
		l2trace.Header{Node: "n0", Capacity: l2trace.Capacity{Slots: 8, SlotBytes: 1 << 20}, Eviction: "fifo", Admission: "all"})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_764_900_000, 0)
	for i := range 40 {
		rec.Record(l2trace.Record{Time: t0.Add(time.Duration(i) * time.Millisecond), Op: l2trace.OpGet, Salt: "t", Model: "m", Chunk: fmt.Sprintf("%016x", i%20)})
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	for _, fit := range []bool{false, true} {
		o := small(t)
		o.Workload, o.Route, o.Modes, o.Requests = "l2trace:"+path, Session, []Mode{Off}, 0
		o.Fit = workloads.Fit{Size: fit, Eviction: fit, Admission: fit}
		rs, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		r, want := rs[0], int64(20)
		if fit {
			want = 40
		}
		if r.Requests != 40 || r.Total.Computed != want || r.Total.WrongChunks != 0 {
			t.Errorf("fit %v: %d requests, computed %d (want %d), %d wrong", fit, r.Requests, r.Total.Computed, want, r.Total.WrongChunks)
		}
		if fit != (len(r.Notes) == 3) || fit && !strings.Contains(strings.Join(r.Notes, "; "), "8 slots") {
			t.Errorf("fit %v: notes %q", fit, r.Notes)
		}
	}
}
