package workloads

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// chains is a trace of requests with these hash ids, full blocks, one ms apart.
func chains(t *testing.T, saltBy string, reqs ...[]uint64) *Mooncake {
	t.Helper()
	var b strings.Builder
	for i, ids := range reqs {
		var s []string
		for _, id := range ids {
			s = append(s, fmt.Sprint(id))
		}
		fmt.Fprintf(&b, `{"timestamp": %d, "input_length": %d, "hash_ids": [%s]}`+"\n", i, 512*len(ids), strings.Join(s, ", "))
	}
	sb, err := ParseSaltBy(saltBy)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := ReadMooncake(strings.NewReader(b.String()), sb)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func saltsOf(tr *Mooncake) []string {
	var s []string
	for _, ti := range tr.tenant {
		s = append(s, tr.salts[ti])
	}
	return s
}

// One system prompt (block 0) that three conversations start from, then a second prompt
// (7, 8) that three more start from.
var twoPrompts = [][]uint64{{0, 1, 2}, {0, 1, 2, 3}, {0, 4}, {0, 4, 5}, {0, 6}, {7, 8, 9}, {7, 8, 10}, {7, 8, 11}, {7, 8, 11, 12}}

func TestSaltRules(t *testing.T) {
	for _, tc := range []struct {
		rule string
		want []string
	}{
		{"root", []string{"r0", "r0", "r0", "r0", "r0", "r7", "r7", "r7", "r7"}},
		{"none", []string{"", "", "", "", "", "", "", "", ""}},
		// The first two blocks: the second prompt's conversations are one tenant.
		{"prefix:2", []string{"p1", "p1", "p4", "p4", "p6", "p8", "p8", "p8", "p8"}},
		{"prefix:1", []string{"p0", "p0", "p0", "p0", "p0", "p7", "p7", "p7", "p7"}},
		// A request shorter than N blocks is named by its last.
		{"prefix:3", []string{"p2", "p2", "p4", "p5", "p6", "p9", "p10", "p11", "p11"}},
		// Blocks 0 and 8 have three continuations each: each conversation after either is
		// a group, however deep its prompt; a conversation's turns stay together.
		{"group:3", []string{"g1", "g1", "g4", "g4", "g6", "g9", "g10", "g11", "g11"}},
		// No block has four continuations: every request is its root's.
		{"group:4", []string{"g0", "g0", "g0", "g0", "g0", "g7", "g7", "g7", "g7"}},
	} {
		tr := chains(t, tc.rule, twoPrompts...)
		if got := saltsOf(tr); !slices.Equal(got, tc.want) {
			t.Errorf("%s: salts %q, want %q", tc.rule, got, tc.want)
		}
		if tr.Stats.SaltBy != tc.rule || tr.Stats.Tenants.Tenants != len(tr.Salts()) {
			t.Errorf("%s: stats say %q, %d tenants of %d salts", tc.rule, tr.Stats.SaltBy, tr.Stats.Tenants.Tenants, len(tr.Salts()))
		}
	}
}

// TestSaltCeilingPerTenant: a salt is part of a chunk's identity, so a block shared across
// tenants is a miss for each tenant's first request; the ceiling counts that.
func TestSaltCeilingPerTenant(t *testing.T) {
	reqs := twoPrompts[:5]
	// root: every repeated block hits: 0,1,2 (2nd) + 0 (3rd) + 0,4 (4th) + 0 (5th).
	if got := chains(t, "root", reqs...).Stats.CeilingBlocks; got != 7 {
		t.Errorf("root ceiling %d blocks, want 7", got)
	}
	// prefix:2: block 0 misses once per tenant (p1, p4, p6): 0,1,2 + 0,4.
	tr := chains(t, "prefix:2", reqs...)
	if got := tr.Stats.CeilingBlocks; got != 5 {
		t.Errorf("prefix:2 ceiling %d blocks, want 5", got)
	}
	st := tr.Chunked(256)
	if st.CeilingChunks != 2*5 {
		t.Errorf("prefix:2 ceiling %d chunks, want 10", st.CeilingChunks)
	}
	sk := tr.Stats.Tenants
	// Tenants p1 (7 refs), p4 (5), p6 (2) of 14; one singleton; median 2 requests.
	want := TenantSkew{Tenants: 3, LargestShare: 7.0 / 14, Top10Share: 7.0 / 14, Singletons: 1, MedianRequests: 2}
	if sk != want {
		t.Errorf("skew %+v, want %+v", sk, want)
	}
}

// TestTraceWindow: the first n requests are a trace of their own: figures, tenants and
// ceiling of those only, with the file's request count beside them.
func TestTraceWindow(t *testing.T) {
	tr := chains(t, "group:3", twoPrompts...)
	w := tr.Window(3)
	s := w.Stats
	// {0,1,2}, {0,1,2,3}, {0,4}: block 0 has only two continuations in these three, so
	// group:3 finds no shared prompt and the window is one tenant, g0: 0,1,2 + 0 hit.
	if s.Requests != 3 || s.BlockRefs != 9 || s.DistinctBlocks != 5 || s.CeilingBlocks != 4 || s.FileRequests != 9 || s.DurationMs != 2 {
		t.Errorf("window stats %+v", s)
	}
	if got := saltsOf(w); !slices.Equal(got, []string{"g0", "g0", "g0"}) {
		t.Errorf("window salts %q", got)
	}
	var op Op
	n := 0
	for g := w.Replay(512, 1, 1); g.Next(&op); n++ {
	}
	if n != 3 {
		t.Errorf("window replays %d requests", n)
	}
	if tr.Window(9) != tr || tr.Window(0) != tr {
		t.Error("a window of the whole trace is not the trace")
	}
}

func TestParseSaltBy(t *testing.T) {
	for _, s := range []string{"none", "root", "hash:8", "prefix:2", "group", "group:4"} {
		sb, err := ParseSaltBy(s)
		if err != nil || sb.String() != s {
			t.Errorf("%s: %v, %v", s, sb, err)
		}
	}
	for _, s := range []string{"", "roots", "root:2", "hash", "hash:0", "prefix:0", "prefix:x", "group:1", "group:", "none:1"} {
		if _, err := ParseSaltBy(s); !errors.Is(err, ErrSpec) {
			t.Errorf("%q: %v, want ErrSpec", s, err)
		}
	}
}

// TestSpecRequestsWindow: --requests on a trace is the window the report describes.
func TestSpecRequestsWindow(t *testing.T) {
	var b strings.Builder
	for i, ids := range twoPrompts {
		var s []string
		for _, id := range ids {
			s = append(s, fmt.Sprint(id))
		}
		fmt.Fprintf(&b, `{"timestamp": %d, "input_length": %d, "hash_ids": [%s]}`+"\n", i, 512*len(ids), strings.Join(s, ", "))
	}
	path := filepath.Join(t.TempDir(), "t.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := Spec{Kind: "mooncake:" + path, Model: "tiny", ChunkTokens: 256, Requests: 3, SaltBy: "prefix:2"}.Build()
	if err != nil {
		t.Fatal(err)
	}
	st := src.Trace
	// {0,1,2}, {0,1,2,3}, {0,4}: tenants p1, p1, p4; 3 of 9 requests; blocks 0,1,2 hit.
	if st.Requests != 3 || st.FileRequests != 9 || st.CeilingBlocks != 3 || st.Tenants.Tenants != 2 || len(src.Salts) != 2 ||
		!strings.Contains(src.Description, "the first 3 of 9 requests") {
		t.Fatalf("window %+v, salts %v, %s", st, src.Salts, src.Description)
	}
	if w := src.TraceWindow(2); w.Requests != 2 || w.CeilingBlocks != 3 {
		t.Errorf("window of 2: %+v", w)
	}
}
