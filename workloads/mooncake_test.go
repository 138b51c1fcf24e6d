package workloads

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

const tinyTrace = `{"timestamp": 0, "input_length": 1100, "output_length": 6, "hash_ids": [0, 1, 2]}
{"timestamp": 5, "input_length": 700, "output_length": 4, "hash_ids": [3, 4]}

{"timestamp": 9, "input_length": 1536, "output_length": 1, "hash_ids": [0, 1, 5], "extra": "ignored"}
{"timestamp": 12, "input_length": 2000, "output_length": 1, "hash_ids": [0, 1, 5, 18446744073709551615]}
`

func readTiny(t *testing.T, salt string) *Mooncake {
	t.Helper()
	sb, err := ParseSaltBy(salt)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := ReadMooncake(strings.NewReader(tinyTrace), sb)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// The figures of a small trace, worked by hand: 4 requests, 12 block references, 7
// distinct blocks; a cache that never evicts hits 0, 1, 0 | 0, 0 | 1, 1, 0 | 1, 1, 1, 0 =
// 5 blocks, 512 × 5 tokens.
func TestMooncakeStats(t *testing.T) {
	tr := readTiny(t, "none")
	want := TraceStats{Requests: 4, BlockRefs: 12, DistinctBlocks: 7, CeilingBlocks: 5, Tokens: 1100 + 700 + 1536 + 2000, DurationMs: 12,
		SaltBy: "none", Tenants: TenantSkew{Tenants: 1, LargestShare: 1, Top10Share: 1, MedianRequests: 4}}
	if tr.Stats != want {
		t.Fatalf("stats %+v, want %+v", tr.Stats, want)
	}
	// In 256-token chunks block 2 ends request 1 after 76 tokens (chunk 0 only); request 3
	// hits blocks 0 and 1 (4 chunks), request 4 blocks 0, 1, 5 (6 chunks).
	want.ChunkTokens, want.ChunkRefs, want.CeilingChunks, want.CeilingTokens = 256, 22, 10, 10*256
	if got := tr.Chunked(256); got != want {
		t.Fatalf("chunked stats %+v, want %+v", got, want)
	}
	if got := readTiny(t, "root").Salts(); fmt.Sprint(got) != "[r0 r3]" {
		t.Errorf("salts by root %q", got)
	}
	if got := readTiny(t, "hash:1").Salts(); fmt.Sprint(got) != "[h0]" {
		t.Errorf("salts by hash:1 %q", got)
	}
}

// A 512-token block is 512/chunk-tokens chunks; the last block only as many as its tokens
// fill; equal blocks give equal keys.
func TestMooncakeChunks(t *testing.T) {
	tr := readTiny(t, "root")
	g := tr.Replay(256, 1000, 1)
	var op Op
	var lens []int
	var first [][]Key
	for g.Next(&op) {
		lens = append(lens, len(op.Keys))
		first = append(first, append([]Key(nil), op.Keys...))
		if op.Size != 1000 || op.ChunkTokens != 256 || op.BlockChunks != 2 {
			t.Fatalf("op %+v", op)
		}
	}
	// 1100 tokens: 5 chunks; 700: 3; 1536: 6; 2000: 8.
	if fmt.Sprint(lens) != "[5 3 6 8]" {
		t.Fatalf("chunks per request %v", lens)
	}
	if first[0][0] != first[2][0] || first[0][3] != first[2][3] || first[2][5] != first[3][5] || first[0][0] == first[0][1] {
		t.Errorf("chunk keys do not follow the blocks: %v", first)
	}
	if first[0][0].Tenant != first[3][0].Tenant || first[0][0].Tenant == first[1][0].Tenant {
		t.Errorf("salt by root: tenants %v", first)
	}
	g = tr.Replay(512, 1, 2)
	n := 0
	for g.Next(&op) {
		n++
	}
	if n != 8 || op.At <= 12e6 {
		t.Errorf("two loops: %d requests, last at %v", n, op.At)
	}
	for _, ct := range []int{0, 300, 1024} {
		if err := CheckChunkTokens(ct); !errors.Is(err, ErrSpec) {
			t.Errorf("chunk tokens %d: %v", ct, err)
		}
	}
}

// A malformed line is refused with its number, and nothing is returned.
func TestMooncakeMalformed(t *testing.T) {
	good := `{"timestamp": 0, "input_length": 10, "hash_ids": [1]}` + "\n"
	for _, bad := range []string{
		`{"timestamp": 0, "input_length": 10, "hash_ids": [1]`,
		`{"timestamp": 0, "input_length": 10}`,
		`{"timestamp": -1, "input_length": 10, "hash_ids": [1]}`,
		`{"timestamp": 0, "input_length": 0, "hash_ids": [1]}`,
		`{"timestamp": 0, "input_length": 10, "hash_ids": []}`,
		`{"timestamp": 0, "input_length": 10, "hash_ids": [-1]}`,
		`{"timestamp": 0, "input_length": 10, "hash_ids": [18446744073709551616]}`,
		`{"timestamp": 0, "input_length": 10, "hash_ids": ["a"]}`,
		`[1, 2]`,
	} {
		_, err := ReadMooncake(strings.NewReader(good+good+bad+"\n"+good), SaltBy{Rule: "none"})
		if !errors.Is(err, ErrTrace) || !strings.Contains(err.Error(), "line 3") {
			t.Errorf("%s: %v", bad, err)
		}
	}
	if _, err := ReadMooncake(strings.NewReader("\n\n"), SaltBy{Rule: "none"}); !errors.Is(err, ErrTrace) {
		t.Errorf("empty trace: %v", err)
	}
	defer func(n int) { MaxTraceLine = n }(MaxTraceLine)
	MaxTraceLine = 80
	long := `{"timestamp": 0, "input_length": 10, "hash_ids": [` + strings.Repeat("1, ", 40) + "1]}"
	_, err := ReadMooncake(strings.NewReader(good+long+"\n"), SaltBy{Rule: "none"})
	if !errors.Is(err, ErrTraceLine) || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("long line: %v", err)
	}
	// A last line without a newline is read.
	tr, err := ReadMooncake(strings.NewReader(good+strings.TrimSpace(good)), SaltBy{Rule: "none"})
	if err != nil || tr.Stats.Requests != 2 {
		t.Errorf("unterminated last line: %v", err)
	}
	for _, s := range []string{"", "hash", "hash:0", "hash:x", "salt"} {
		if _, err := ParseSaltBy(s); err == nil {
			t.Errorf("salt rule %q accepted", s)
		}
	}
}

// randomTrace writes a trace of n requests over conversations that extend their own
// prefix and share a few system prompts, as JSONL.
func randomTrace(n int, seed uint64) string {
	r := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	next := uint64(100)
	var convs [][]uint64
	for i := 0; i < n; i++ {
		var ids []uint64
		if len(convs) > 0 && r.IntN(3) > 0 {
			c := r.IntN(len(convs))
			ids = append(ids, convs[c]...)
			for j := r.IntN(3); j > 0; j-- {
				ids = append(ids, next)
				next++
			}
			convs[c] = ids
		} else {
			ids = append(ids, uint64(r.IntN(4))) // a shared system prompt
			for j := 1 + r.IntN(6); j > 0; j-- {
				ids = append(ids, next)
				next++
			}
			convs = append(convs, ids)
		}
		tokens := (len(ids)-1)*512 + 1 + r.IntN(512)
		parts := make([]string, len(ids))
		for j, id := range ids {
			parts[j] = fmt.Sprint(id)
		}
		fmt.Fprintf(&b, `{"timestamp": %d, "input_length": %d, "output_length": 1, "hash_ids": [%s]}`+"\n", i, tokens, strings.Join(parts, ", "))
	}
	return b.String()
}

// plainLRU is a second, direct model of the Driver's LRU prefix cache: a map from chunk
// to last use; a request hits its leading cached chunks (refreshing them), then stores the
// missed ones (at most half the cache) and evicts the least recently used others down to
// capacity.
func plainLRU(g Generator, capacity int) (hits, tokens int64) {
	last := map[Key]int64{}
	clock := int64(0)
	var op Op
	for g.Next(&op) {
		h := 0
		for h < len(op.Keys) {
			if _, ok := last[op.Keys[h]]; !ok {
				break
			}
			h++
		}
		hits += int64(h)
		tokens += int64(min(h*op.ChunkTokens, op.Tokens))
		for _, k := range op.Keys[:h] {
			clock++
			last[k] = clock
		}
		var stored []Key
		isNew := map[Key]bool{}
		for _, k := range op.Keys[h:] {
			if len(stored) >= max(1, capacity/2) {
				break
			}
			if _, ok := last[k]; !ok {
				stored = append(stored, k)
				isNew[k] = true
				last[k] = 0
			}
		}
		for len(last) > capacity {
			var oldest Key
			best := int64(-1)
			for k, t := range last {
				if !isNew[k] && (best < 0 || t < best) {
					oldest, best = k, t
				}
			}
			delete(last, oldest)
		}
		for _, k := range stored {
			clock++
			last[k] = clock
		}
	}
	return hits, tokens
}

// The Driver's prefix hits on a trace equal those of the plain LRU model, exactly, at
// several cache sizes and chunk sizes.
func TestMooncakeLRUExact(t *testing.T) {
	tr, err := ReadMooncake(strings.NewReader(randomTrace(400, 7)), SaltBy{Rule: "root"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ct := range []int{512, 128} {
		for _, slots := range []int64{20, 150, 1000, 100000} {
			d, err := NewDriver(DriverConfig{TargetUtil: 1}, tr.Replay(ct, 64, 1), newMapBackend(slots))
			if err != nil {
				t.Fatal(err)
			}
			res, err := d.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			hits, tokens := plainLRU(tr.Replay(ct, 64, 1), int(slots))
			c := res.Counters
			if c.ChunksHit != hits || c.TokensHit != tokens {
				t.Errorf("%d slots, %d tokens/chunk: driver hit %d chunks / %d tokens, plain LRU %d / %d", slots, ct, c.ChunksHit, c.TokensHit, hits, tokens)
			}
			st := tr.Chunked(ct)
			if slots == 100000 && (c.ChunksHit != st.CeilingChunks || c.TokensHit != st.CeilingTokens || c.ChunksRequested != st.ChunkRefs) {
				t.Errorf("a cache that holds everything hit %d chunks / %d tokens of %d, the ceiling is %d / %d of %d", c.ChunksHit, c.TokensHit,
					c.ChunksRequested, st.CeilingChunks, st.CeilingTokens, st.ChunkRefs)
			}
			if slots == 100000 && ct == 512 && c.BlocksHit != st.CeilingBlocks {
				t.Errorf("a cache of whole blocks that holds everything hit %d blocks, the ceiling is %d", c.BlocksHit, st.CeilingBlocks)
			}
			if c.BlocksRequested != tr.Stats.BlockRefs || c.TokensRequested != tr.Stats.Tokens {
				t.Errorf("requested %d blocks / %d tokens, trace %d / %d", c.BlocksRequested, c.TokensRequested, tr.Stats.BlockRefs, tr.Stats.Tokens)
			}
			var reqs int64
			for _, n := range c.PrefixHits {
				reqs += n
			}
			if reqs != tr.Stats.Requests {
				t.Errorf("prefix-hit distribution %v sums to %d requests of %d", c.PrefixHits, reqs, tr.Stats.Requests)
			}
			t.Logf("%d slots, %d tokens/chunk: hit %.3f (ceiling %.3f)", slots, ct, c.HitRatio(), tr.Stats.CeilingRatio())
		}
	}
}

// The public synthetic trace has the figures its README states.
func TestMooncakeSyntheticTrace(t *testing.T) {
	path := "../../shared/data/mooncake/synthetic_trace.jsonl"
	f, err := os.Open(path)
	if err != nil {
		t.Skipf("the Mooncake synthetic trace is not beside the repository (%v)", err)
	}
	defer f.Close()
	tr, err := ReadMooncake(f, SaltBy{Rule: "root"})
	if err != nil {
		t.Fatal(err)
	}
	s := tr.Stats
	if s.Requests != 3993 || s.BlockRefs != 121877 || s.DistinctBlocks != 43924 || s.LengthMismatch != 0 {
		t.Fatalf("stats %+v", s)
	}
	// Hash ids are prefix hashes: every block seen before is seen with its whole prefix,
	// so the never-evicting cache hits every repeated reference.
	if s.CeilingBlocks != s.BlockRefs-s.DistinctBlocks {
		t.Errorf("ceiling %d blocks, repeated references %d", s.CeilingBlocks, s.BlockRefs-s.DistinctBlocks)
	}
	t.Logf("%+v, ceiling %.4f, %d salts", s, s.CeilingRatio(), len(tr.Salts()))
}

func FuzzReadMooncake(f *testing.F) {
	f.Add([]byte(tinyTrace))
	f.Add([]byte(`{"timestamp": 1e300, "input_length": 9223372036854775807, "hash_ids": [0]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := ReadMooncake(strings.NewReader(string(b)), SaltBy{Rule: "hash", N: 3})
		if err != nil {
			if !errors.Is(err, ErrTrace) {
				t.Fatalf("error not ErrTrace: %v", err)
			}
			return
		}
		g := tr.Replay(128, 1, 1)
		var op Op
		var n, refs int64
		for g.Next(&op) {
			n++
			if len(op.Keys) == 0 || len(op.Keys) > 4*int(tr.off[n]-tr.off[n-1]) {
				t.Fatalf("request %d: %d chunks", n, len(op.Keys))
			}
			refs += tr.off[n] - tr.off[n-1]
		}
		if n != tr.Stats.Requests || refs != tr.Stats.BlockRefs || tr.Stats.CeilingBlocks > refs-tr.Stats.DistinctBlocks {
			t.Fatalf("stats %+v for %d requests, %d refs", tr.Stats, n, refs)
		}
	})
}
