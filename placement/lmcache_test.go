package placement

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

const N = None // short for the tables below

func TestSaltBucket(t *testing.T) {
	cases := []struct {
		salt, bucket string
		ok           bool
	}{
		{"RAG:app1", "rag", true},
		{"rag:app2", "rag", true},
		{"rag:", "rag", true},
		{"rag:a:b", "rag", true},
		{"\u212aelvin:x", "kelvin", true},        // the Kelvin sign folds to k
		{"\u03c3\u03c2:x", "\u03c3\u03c3", true}, // final sigma folds to sigma
		{"KELVIN:y", "kelvin", true},
		{"ÄPFEL:1", "äpfel", true},
		{"nocolon", "", false},
		{":x", "", false},
		{"", "", false},
	}
	for _, tc := range cases {
		b, ok := SaltBucket(tc.salt)
		if b != tc.bucket || ok != tc.ok {
			t.Errorf("SaltBucket(%q) = %q, %v; want %q, %v", tc.salt, b, ok, tc.bucket, tc.ok)
		}
	}
}

func TestPackKVRank(t *testing.T) {
	r := PackKVRank(8, 5, 4, 1)
	if r != 0x08050401 || LocalRank(r) != 1 || LocalWorldSize(r) != 4 {
		t.Fatalf("PackKVRank(8,5,4,1) = %#x, local rank %d, local world %d", r, LocalRank(r), LocalWorldSize(r))
	}
}

// TestCacheSaltPrefixAssignments: buckets take the pool in first-seen order, case-folded,
// the suffix after ':' and the kv rank ignored; salts without a bucket and buckets beyond
// the pool carry no directive.
func TestCacheSaltPrefixAssignments(t *testing.T) {
	p := mustParse(t, "cache_salt_prefix:handles=2/0", 4) // pool: handle 2 first, then 0
	writes := []struct {
		salt string
		rank uint64
		want Handle
	}{
		{"RAG:app1", PackKVRank(2, 0, 2, 0), 2},
		{"rag:app2", PackKVRank(2, 1, 2, 1), 2},
		{"nocolon", 0, N},
		{"", 0, N},
		{":anon", 0, N},
		{"Chat:u1", 0, 0},
		{"agent:x", 0, N}, // pool used up
		{"rag:", 0, 2},
		{"CHAT:u2", PackKVRank(8, 7, 8, 7), 0},
		{"agent:y", 0, N},
	}
	for i, w := range writes {
		if got := p.Place(Write{CacheSalt: w.salt, KVRank: w.rank, Size: 100}); got != w.want {
			t.Errorf("write %d salt %q on %d, want %d", i, w.salt, got, w.want)
		}
	}
	if f := p.(*saltBuckets).Fallbacks(); f != 2 {
		t.Errorf("fallbacks %d, want 2 (agent twice)", f)
	}
	want := map[int]string{2: "bucket rag", 0: "bucket chat"}
	if got := Labels(p); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("labels %v, want %v", got, want)
	}
	// Metadata writes are not special without metadata-class: a checkpoint has no salt.
	if got := p.Place(Write{Metadata: true}); got != N {
		t.Errorf("metadata write on %d, want no directive", got)
	}
}

// TestCacheSaltRankTP: LMCache's cache_salt_rank for TP 1/2/4/8 keys. Salts are visited in
// order, each with every local rank 0..TP-1; the pool is 12 handles (1..12, as
// fdp_placement_ids [1..12] on a device whose handle i has PID i) and the per-bucket bound is
// the node's GPU count, here the TP size (one GPU per rank).
func TestCacheSaltRankTP(t *testing.T) {
	salts := []string{"rag:a", "chat:x", "RAG:b", "nosalt", "batch:z"}
	cases := []struct {
		tp   int
		want [][]Handle // per salt, per local rank
	}{
		{1, [][]Handle{{1}, {2}, {1}, {N}, {3}}},
		{2, [][]Handle{{1, 2}, {3, 4}, {1, 2}, {N, N}, {5, 6}}},
		{4, [][]Handle{{1, 2, 3, 4}, {5, 6, 7, 8}, {1, 2, 3, 4}, {N, N, N, N}, {9, 10, 11, 12}}},
		// 8 ranks: rag takes 1..8, chat gets the 4 handles left, batch none.
		{8, [][]Handle{{1, 2, 3, 4, 5, 6, 7, 8}, {9, 10, 11, 12, N, N, N, N}, {1, 2, 3, 4, 5, 6, 7, 8}, {N, N, N, N, N, N, N, N}, {N, N, N, N, N, N, N, N}}},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("TP%d", tc.tp), func(t *testing.T) {
			t.Setenv(GPUsEnv, fmt.Sprint(tc.tp))
			p := mustParse(t, "cache_salt_rank:handles=1/2/3/4/5/6/7/8/9/10/11/12", 13)
			perBucket := map[string]map[Handle]bool{}
			owner := map[Handle]string{}
			for si, salt := range salts {
				for lr := range tc.tp {
					// Global rank = local rank on one node; world = local world = TP.
					w := Write{CacheSalt: salt, KVRank: PackKVRank(uint32(tc.tp), uint32(lr), uint32(tc.tp), uint32(lr)), Size: 4096}
					got := p.Place(w)
					if got != tc.want[si][lr] {
						t.Errorf("salt %q local rank %d on %d, want %d", salt, lr, got, tc.want[si][lr])
					}
					if got == N {
						continue
					}
					b, _ := SaltBucket(salt)
					if perBucket[b] == nil {
						perBucket[b] = map[Handle]bool{}
					}
					perBucket[b][got] = true
					if o, ok := owner[got]; ok && o != fmt.Sprint(b, "/", lr) {
						t.Errorf("handle %d shared by %s and %s/%d", got, o, b, lr)
					}
					owner[got] = fmt.Sprint(b, "/", lr)
					// The same key again gets the same handle.
					if again := p.Place(w); again != got {
						t.Errorf("salt %q rank %d moved %d → %d", salt, lr, got, again)
					}
				}
			}
			for b, hs := range perBucket {
				if len(hs) > tc.tp {
					t.Errorf("bucket %s holds %d handles, more than %d local ranks", b, len(hs), tc.tp)
				}
			}
		})
	}
}

// TestCacheSaltRankQuota: ranks=N bounds the handles per bucket whatever the keys say; a
// key packing no local world size counts as one local rank.
func TestCacheSaltRankQuota(t *testing.T) {
	p := mustParse(t, "cache_salt_rank:ranks=2", 8)
	got := []Handle{}
	for lr := range 4 {
		got = append(got, p.Place(Write{CacheSalt: "rag:a", KVRank: PackKVRank(4, uint32(lr), 4, uint32(lr))}))
	}
	got = append(got, p.Place(Write{CacheSalt: "chat:a", KVRank: PackKVRank(4, 3, 4, 3)}))
	if want := []Handle{0, 1, N, N, 2}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ranks=2 placements %v, want %v", got, want)
	}

	// The quota is the node's GPU count, not what the keys pack: with 1 GPU a bucket holds
	// one handle whatever local world size its keys carry; with 0 GPUs nothing is placed
	// (LMCache's adapter with no visible CUDA device).
	t.Setenv(GPUsEnv, "1")
	q := mustParse(t, "cache_salt_rank", 8)
	got = []Handle{
		q.Place(Write{CacheSalt: "rag:a", KVRank: PackKVRank(8, 0, 8, 0)}),
		q.Place(Write{CacheSalt: "rag:a", KVRank: PackKVRank(8, 1, 8, 1)}), // bucket full at 1 GPU
		q.Place(Write{CacheSalt: "rag:b", KVRank: PackKVRank(8, 0, 8, 0)}), // same bucket, rank 0 has a handle
		q.Place(Write{CacheSalt: "x:y", KVRank: 3}),                        // a new bucket: local rank 3 takes the next handle
		// kv_rank of a 256-GPU world, past 32 bits: local rank 3 of bucket "big"
		q.Place(Write{CacheSalt: "big:y", KVRank: PackKVRank(256, 3, 8, 3)}),
	}
	if want := []Handle{0, N, 0, 1, 2}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("1 GPU: %v, want %v", got, want)
	}
	want := map[int]string{0: "bucket rag rank 0", 1: "bucket x rank 3", 2: "bucket big rank 3"}
	if l := Labels(q); fmt.Sprint(l) != fmt.Sprint(want) {
		t.Errorf("labels %v, want %v", l, want)
	}
	t.Setenv(GPUsEnv, "0")
	z := mustParse(t, "cache_salt_rank", 8)
	if h := z.Place(Write{CacheSalt: "rag:a", KVRank: PackKVRank(2, 0, 2, 0)}); h != N || z.Name() != "cache_salt_rank:gpus=0" {
		t.Errorf("0 GPUs: handle %d (%s), want no directive", h, z.Name())
	}
	t.Setenv(GPUsEnv, "two")
	if _, err := Parse("cache_salt_rank", 8); err == nil || !strings.Contains(err.Error(), GPUsEnv) {
		t.Errorf("RBCTL_GPUS=two: %v", err)
	}
}

// Buckets fold as Python's str.casefold: full Unicode folding, Cherokee as CaseFolding.txt.
// Expected values from Python 3.11's casefold.
func TestSaltBucketCasefold(t *testing.T) {
	for _, c := range []struct{ salt, bucket string }{
		{"Straße:x", "strasse"}, {"STRASSE:y", "strasse"}, {"ẞ:z", "ss"},
		{"RAG:app1", "rag"}, {"rag:", "rag"}, {"\u212a:1", "k"}, {"ΣΑΣ:1", "σασ"}, {"ς:1", "σ"},
		{"ﬁle:1", "file"}, {"İ:1", "i\u0307"}, {"ǅ:1", "ǆ"},
		{"\u13a0:1", "\u13a0"}, {"\uab70:1", "\u13a0"}, {"\u13f8x:1", "\u13f0x"},
	} {
		b, ok := SaltBucket(c.salt)
		if !ok || b != c.bucket {
			t.Errorf("SaltBucket(%q) = %q %v, want %q", c.salt, b, ok, c.bucket)
		}
	}
	p := mustParse(t, "cache_salt_prefix", 4)
	if a, b := p.Place(Write{CacheSalt: "Straße:u1"}), p.Place(Write{CacheSalt: "STRASSE:u2"}); a != 0 || b != 0 {
		t.Errorf("Straße: and STRASSE: on %d and %d, want one bucket on 0", a, b)
	}
}

// TestCacheSaltRankWithMetadataClass: the metadata handle is outside the pool.
func TestCacheSaltRankWithMetadataClass(t *testing.T) {
	t.Setenv(GPUsEnv, "2")
	p := mustParse(t, "metadata-class+cache_salt_rank", 3)
	got := []Handle{
		p.Place(Write{CacheSalt: "a:1", KVRank: PackKVRank(2, 0, 2, 0)}),
		p.Place(Write{CacheSalt: "a:1", KVRank: PackKVRank(2, 1, 2, 1)}),
		p.Place(Write{CacheSalt: "b:1", KVRank: PackKVRank(2, 0, 2, 0)}),
		p.Place(Write{Metadata: true}),
	}
	if want := []Handle{0, 1, N, 2}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("placements %v, want %v", got, want)
	}
}

// TestSaltBucketsConcurrent: racing writers agree on one handle per (bucket, rank), no
// handle is given twice, and the pool bound holds.
func TestSaltBucketsConcurrent(t *testing.T) {
	t.Setenv(GPUsEnv, "3")
	for _, spec := range []string{"cache_salt_prefix", "cache_salt_rank"} {
		p := mustParse(t, spec, 6)
		var mu sync.Mutex
		seen := map[string]Handle{}
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := range 500 {
					salt := fmt.Sprintf("t%d:x", (i+g)%5)
					lr := uint32(i % 3)
					h := p.Place(Write{CacheSalt: salt, KVRank: PackKVRank(3, lr, 3, lr)})
					k := fmt.Sprint((i+g)%5, "/", lr)
					if spec == "cache_salt_prefix" {
						k = fmt.Sprint((i + g) % 5)
					}
					mu.Lock()
					if prev, ok := seen[k]; ok && prev != h {
						t.Errorf("%s: %s on %d and %d", spec, k, prev, h)
					}
					seen[k] = h
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		used := map[Handle]string{}
		for k, h := range seen {
			if h == N {
				continue
			}
			if h < 0 || h >= 6 {
				t.Errorf("%s: %s on %d", spec, k, h)
			}
			if o, ok := used[h]; ok {
				t.Errorf("%s: handle %d given to %s and %s", spec, h, o, k)
			}
			used[h] = k
		}
		if len(used) != min(len(seen), 6) {
			t.Errorf("%s: %d handles used for %d streams, want the whole pool of 6 used", spec, len(used), len(seen))
		}
	}
}

// FuzzSaltBuckets: any salts and kv ranks keep the invariants — a handle from the pool or
// None, the same answer for the same (bucket, local rank), at most the quota per bucket, no
// handle given to two streams.
func FuzzSaltBuckets(f *testing.F) {
	f.Add("RAG:a", "rag:b", uint32(0x02000201), uint32(0x02010200), uint8(2), true)
	f.Add(":", "x:", uint32(0), uint32(0xffffffff), uint8(0), false)
	f.Fuzz(func(t *testing.T, s1, s2 string, r1, r2 uint32, ranks uint8, perRank bool) {
		pool := []Handle{5, 1, 3}
		var p *saltBuckets
		if perRank {
			p = NewCacheSaltLocalRank(pool, int(ranks)%4).(*saltBuckets)
		} else {
			p = NewCacheSaltPrefix(pool).(*saltBuckets)
		}
		type key struct {
			b  string
			lr int
		}
		got := map[key]Handle{}
		owner := map[Handle]key{}
		for i := range 16 {
			salt, kr := s1, r1+uint32(i)
			if i%2 == 1 {
				salt, kr = s2+fmt.Sprint(i%3), r2^uint32(i)
			}
			h := p.Place(Write{CacheSalt: salt, KVRank: uint64(kr)})
			b, ok := SaltBucket(salt)
			if !ok {
				if h != N {
					t.Fatalf("salt %q without bucket on %d", salt, h)
				}
				continue
			}
			k := key{b, -1}
			if perRank {
				k.lr = LocalRank(uint64(kr))
			}
			if prev, ok := got[k]; ok && prev != h && prev != N {
				t.Fatalf("%v moved %d → %d", k, prev, h)
			}
			if h == N {
				continue
			}
			if h != 5 && h != 1 && h != 3 {
				t.Fatalf("%v on %d, not in the pool", k, h)
			}
			if o, ok := owner[h]; ok && o != k {
				t.Fatalf("handle %d given to %v and %v", h, o, k)
			}
			owner[h], got[k] = k, h
		}
		if perRank && ranks%4 > 0 {
			per := map[string]int{}
			for k := range owner {
				per[owner[k].b]++
			}
			for b, c := range per {
				if c > int(ranks%4) {
					t.Fatalf("bucket %q holds %d handles, quota %d", b, c, ranks%4)
				}
			}
		}
	})
}
