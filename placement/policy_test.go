package placement

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func mustParse(t testing.TB, spec string, handles int) Policy {
	t.Helper()
	p, err := Parse(spec, handles)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNoneAndStatic(t *testing.T) {
	if h := mustParse(t, "none", 4).Place(Write{CacheSalt: "a", Metadata: true}); h != None {
		t.Fatalf("none placed on %d", h)
	}
	p := mustParse(t, "static:2", 4)
	for _, w := range []Write{{}, {CacheSalt: "x"}, {Metadata: true}} {
		if h := p.Place(w); h != 2 {
			t.Fatalf("static:2 placed %+v on %d", w, h)
		}
	}
}

func TestRoundRobin(t *testing.T) {
	p := mustParse(t, "round-robin", 3)
	for i := range 9 {
		if h := p.Place(Write{}); h != Handle(i%3) {
			t.Fatalf("write %d on %d", i, h)
		}
	}
	// Concurrent callers see every handle equally often.
	p = mustParse(t, "round-robin", 4)
	var mu sync.Mutex
	counts := make([]int, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			local := make([]int, 4)
			for range 1000 {
				local[p.Place(Write{})]++
			}
			mu.Lock()
			for i, c := range local {
				counts[i] += c
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	for i, c := range counts {
		if c != 1000 {
			t.Fatalf("handle %d got %d of 4000 writes", i, c)
		}
	}
}

func TestCacheSaltHash(t *testing.T) {
	p := mustParse(t, "cache-salt:hash", 4)
	seen := map[Handle]bool{}
	for i := range 64 {
		salt := fmt.Sprintf("tenant-%d", i)
		h := p.Place(Write{CacheSalt: salt, Identity: uint64(i)})
		if h < 0 || h >= 4 {
			t.Fatalf("salt %s on %d", salt, h)
		}
		for j := range 5 { // stable: independent of key, chunk and size
			if h2 := p.Place(Write{CacheSalt: salt, Identity: uint64(j * 77), ChunkIndex: j, Size: j}); h2 != h {
				t.Fatalf("salt %s moved from %d to %d", salt, h, h2)
			}
		}
		seen[h] = true
	}
	if len(seen) != 4 {
		t.Fatalf("64 salts used only handles %v", seen)
	}
	if h := p.Place(Write{}); h != 0 {
		t.Fatalf("empty salt on %d, want 0", h)
	}
}

func TestCacheSaltHashPinned(t *testing.T) {
	// The hash mapping is a contract across releases: these handles must never change.
	p := mustParse(t, "cache-salt:hash", 7)
	want := map[string]Handle{}
	for _, salt := range []string{"chat", "rag", "agent", "tenant-a", ""} {
		want[salt] = Handle((saltHash(salt) >> 32) * 7 >> 32)
	}
	want[""] = 0
	for salt, h := range want {
		if got := p.Place(Write{CacheSalt: salt}); got != h {
			t.Errorf("salt %q on %d, want %d", salt, got, h)
		}
	}
	// The collision that motivated cache-salt's assignment: on 7 handles (8 with
	// metadata-class) rag and agent hash to the same handle.
	if p.Place(Write{CacheSalt: "rag"}) != p.Place(Write{CacheSalt: "agent"}) {
		t.Log("rag and agent no longer collide under the hash; the docs' example is out of date")
	}
}

func TestCacheSaltAssign(t *testing.T) {
	cases := []struct {
		name    string
		handles int
		writes  []Write // in order
		want    map[string]Handle
	}{
		{"first seen order", 4, []Write{{CacheSalt: "b"}, {CacheSalt: "a"}, {CacheSalt: "b"}, {CacheSalt: "c"}},
			map[string]Handle{"b": 0, "a": 1, "c": 2}},
		{"empty salt is a salt", 3, []Write{{CacheSalt: "x"}, {}, {CacheSalt: "y"}},
			map[string]Handle{"x": 0, "": 1, "y": 2}},
		{"overflow joins least-loaded", 3,
			[]Write{{CacheSalt: "big", Size: 1000}, {CacheSalt: "small", Size: 10}, {CacheSalt: "mid", Size: 500},
				{CacheSalt: "late1", Size: 1}, {CacheSalt: "late2", Size: 1}},
			// late1 joins small (10 B) → small+late1 = 11 B, still the least: late2 joins it too.
			map[string]Handle{"big": 0, "small": 1, "mid": 2, "late1": 1, "late2": 1}},
		{"overflow after loads change", 2,
			[]Write{{CacheSalt: "a", Size: 5}, {CacheSalt: "b", Size: 100}, {CacheSalt: "c", Size: 100}, {CacheSalt: "d", Size: 1}},
			// c joins a (5 B) → a's handle 105 B > b's 100 B: d joins b.
			map[string]Handle{"a": 0, "b": 1, "c": 0, "d": 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := mustParse(t, "cache-salt", tc.handles)
			for _, w := range tc.writes {
				p.Place(w)
			}
			for salt, h := range tc.want {
				if got := p.Place(Write{CacheSalt: salt, Size: 0}); got != h {
					t.Errorf("salt %q on %d, want %d", salt, got, h)
				}
			}
			if got := p.(*cacheSaltAssign).Assignment(); len(got) != len(tc.want) {
				t.Errorf("Assignment %v, want %d salts", got, len(tc.want))
			}
		})
	}
}

// TestCacheSaltCollisionFree: as long as there are no more salts than handles, every salt
// gets its own handle, whatever the salts are called and however many goroutines race to
// place them first; later writes never move a salt.
func TestCacheSaltCollisionFree(t *testing.T) {
	for _, n := range []int{1, 3, 7, 8, 64} {
		p := mustParse(t, "cache-salt", n)
		salts := make([]string, n)
		for i := range salts {
			salts[i] = fmt.Sprintf("tenant-%d-%x", i, i*7919)
		}
		got := make([][]Handle, 4)
		var wg sync.WaitGroup
		for g := range got {
			wg.Go(func() {
				for i := range 200 {
					got[g] = append(got[g], p.Place(Write{CacheSalt: salts[(i*(g+1))%n], Size: 4096}))
				}
			})
		}
		wg.Wait()
		first := map[string]Handle{}
		for g := range got {
			for i, h := range got[g] {
				s := salts[(i*(g+1))%n]
				if f, ok := first[s]; ok && f != h {
					t.Fatalf("n=%d: salt %s on %d and %d", n, s, f, h)
				}
				first[s] = h
			}
		}
		used := map[Handle]string{}
		for s, h := range first {
			if h < 0 || int(h) >= n {
				t.Fatalf("n=%d: salt %s on %d", n, s, h)
			}
			if o, dup := used[h]; dup {
				t.Fatalf("n=%d: salts %s and %s share handle %d", n, s, o, h)
			}
			used[h] = s
		}
	}
	// With metadata-class the data salts get handles 0..n-2, still one each.
	p := mustParse(t, "metadata-class+cache-salt", 8)
	used := map[Handle]bool{}
	for i := range 7 {
		h := p.Place(Write{CacheSalt: fmt.Sprint("s", i)})
		if h == 7 || used[h] {
			t.Fatalf("salt %d on %d (used %v)", i, h, used)
		}
		used[h] = true
	}
}

func TestCacheSaltOverflowBeyondMemory(t *testing.T) {
	p := NewCacheSalt(4).(*cacheSaltAssign)
	for i := range MaxAssignedSalts {
		p.Place(Write{CacheSalt: fmt.Sprint(i), Size: 1})
	}
	hash := NewCacheSaltHash(4)
	for i := range 100 {
		s := fmt.Sprint("new-", i)
		if got, want := p.Place(Write{CacheSalt: s}), hash.Place(Write{CacheSalt: s}); got != want {
			t.Fatalf("salt %s beyond the memory bound on %d, want the hash handle %d", s, got, want)
		}
	}
	if n := len(p.Assignment()); n != MaxAssignedSalts {
		t.Fatalf("remembers %d salts, want %d", n, MaxAssignedSalts)
	}
}

func TestCacheSaltBytes(t *testing.T) {
	p := mustParse(t, "cache-salt:bytes", 3)
	// "big" writes most bytes, "mid" next; "small" and "tiny" share the last handle.
	for range 10 {
		p.Place(Write{CacheSalt: "big", Size: 1000})
		p.Place(Write{CacheSalt: "mid", Size: 500})
		p.Place(Write{CacheSalt: "small", Size: 10})
		p.Place(Write{CacheSalt: "tiny", Size: 1})
	}
	want := map[string]Handle{"big": 0, "mid": 1, "small": 2, "tiny": 2, "": 2}
	for salt, h := range want {
		if got := p.Place(Write{CacheSalt: salt, Size: 1}); got != h {
			t.Errorf("salt %q on %d, want %d", salt, got, h)
		}
	}
	// Ranks follow bytes: once "tiny" outgrows everyone it gets handle 0 (after a re-rank).
	for range 2 * rankEvery {
		p.Place(Write{CacheSalt: "tiny", Size: 10000})
	}
	if got := p.Place(Write{CacheSalt: "tiny", Size: 1}); got != 0 {
		t.Errorf("heaviest salt on %d, want 0", got)
	}
}

func TestMetadataClass(t *testing.T) {
	p := mustParse(t, "metadata-class+cache-salt", 4)
	if h := p.Place(Write{Metadata: true, CacheSalt: "x"}); h != 3 {
		t.Fatalf("metadata on %d, want 3", h)
	}
	for i := range 200 {
		if h := p.Place(Write{CacheSalt: fmt.Sprint(i)}); h < 0 || h >= 3 {
			t.Fatalf("data on %d, must avoid the metadata handle 3", h)
		}
	}
	alone := mustParse(t, "metadata-class", 2)
	if alone.Place(Write{Metadata: true}) != 1 || alone.Place(Write{}) != 0 {
		t.Fatal("metadata-class alone: metadata → 1, data → 0")
	}
	rr := mustParse(t, "metadata-class+round-robin", 3)
	for i := range 6 {
		if h := rr.Place(Write{}); h != Handle(i%2) {
			t.Fatalf("data write %d on %d", i, h)
		}
	}
}

// lcg is a deterministic stream of pseudo-random numbers for building skewed key streams.
type lcg uint64

func (r *lcg) next() uint64 {
	*r = *r*6364136223846793005 + 1442695040888963407
	return uint64(*r >> 11)
}

func TestHotnessSeparatesHotFromCold(t *testing.T) {
	p := mustParse(t, "hotness", 2)
	r := lcg(1)
	const hot, cold = 50, 20000
	// 80% of lookups go to 50 hot keys; 20% spread over 20,000 cold keys.
	for range 200000 {
		x := r.next()
		var id uint64
		if x%10 < 8 {
			id = 1 + x/10%hot
		} else {
			id = 1000 + x/10%cold
		}
		Observe(p, id, Lookup)
	}
	hotOnHot, coldOnCold := 0, 0
	for i := range uint64(hot) {
		if p.Place(Write{Identity: 1 + i}) == 1 {
			hotOnHot++
		}
	}
	for i := range uint64(cold) {
		if p.Place(Write{Identity: 1000 + i}) == 0 {
			coldOnCold++
		}
	}
	t.Logf("hot keys on the hot handle: %d/%d; cold keys on the cold handle: %d/%d", hotOnHot, hot, coldOnCold, cold)
	if hotOnHot != hot {
		t.Errorf("only %d of %d hot keys classed hot", hotOnHot, hot)
	}
	if coldOnCold < cold*9/10 {
		t.Errorf("only %d of %d cold keys classed cold", coldOnCold, cold)
	}
	// Graded classes on 4 handles: hot keys (~3,000 lookups each) in the top class, cold
	// keys (~2 each) in the bottom two.
	p4 := mustParse(t, "hotness", 4)
	r = lcg(1)
	for range 200000 {
		x := r.next()
		var id uint64
		if x%10 < 8 {
			id = 1 + x/10%hot
		} else {
			id = 1000 + x/10%cold
		}
		Observe(p4, id, Lookup)
	}
	coldLow, hotTop := 0, 0
	for i := range uint64(cold) {
		if p4.Place(Write{Identity: 1000 + i}) <= 1 {
			coldLow++
		}
	}
	for i := range uint64(hot) {
		if p4.Place(Write{Identity: 1 + i}) == 3 {
			hotTop++
		}
	}
	t.Logf("4 handles: hot keys on handle 3: %d/%d; cold keys on handles 0-1: %d/%d", hotTop, hot, coldLow, cold)
	if hotTop != hot || coldLow < cold*9/10 {
		t.Errorf("graded classes do not separate: hot top %d/%d, cold low %d/%d", hotTop, hot, coldLow, cold)
	}
	// Unseen keys are cold; a delete keeps history; a rewrite after eviction keeps the class.
	if h := p4.Place(Write{Identity: 999999999}); h != 0 {
		t.Errorf("unseen key on %d", h)
	}
	before := p4.Place(Write{Identity: 1})
	Observe(p4, 1, Delete)
	Observe(p4, 1, Store)
	if after := p4.Place(Write{Identity: 1}); after != before {
		t.Errorf("key moved from %d to %d after delete+store", before, after)
	}
	// A first store teaches nothing.
	Observe(p4, 424242, Store)
	if h := p4.Place(Write{Identity: 424242}); h != 0 {
		t.Errorf("first store made a key hot: %d", h)
	}
}

func TestHotnessDecay(t *testing.T) {
	p := NewHotness(8).(*hotness)
	for range 100 {
		p.Observe(7, Load)
	}
	before := p.Estimate(7)
	// Enough other traffic to trigger several halvings.
	for i := range 3 * p.decayEvery {
		p.Observe(1_000_000+i%5000, Lookup)
	}
	if after := p.Estimate(7); after >= before/4 {
		t.Fatalf("estimate %d → %d after 3 decay periods", before, after)
	}
}

func TestConcurrentSafety(t *testing.T) {
	for _, spec := range []string{"round-robin", "cache-salt", "cache-salt:hash", "cache-salt:bytes", "hotness", "lifetime", "metadata-class+hotness", "metadata-class+lifetime"} {
		p := mustParse(t, spec, 4)
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := range 2000 {
					id := uint64(g*100000 + i%300)
					Observe(p, id, Lookup)
					if h := p.Place(Write{CacheSalt: fmt.Sprint(i % 7), Identity: id, Size: 100, Metadata: i%50 == 0}); h < 0 || h >= 4 {
						t.Errorf("%s placed on %d", spec, h)
						return
					}
				}
			})
		}
		wg.Wait()
	}
}

func TestLifetime(t *testing.T) {
	const long, short, fresh = 1, 2, 3 // identities
	build := func(n int) Policy {
		p := mustParse(t, "lifetime", n)
		Observe(p, long, Store)
		for i := range uint64(1000) { // a crowd of keys that die at once sets the mean low
			Observe(p, 1000+i, Store)
			Observe(p, 1000+i, Delete)
		}
		Observe(p, long, Lookup) // lookups and loads change nothing
		Observe(p, long, Load)
		Observe(p, long, Delete) // lived ~1000 stores: long
		Observe(p, short, Store)
		Observe(p, short, Delete) // lived 1 store: short
		return p
	}
	for _, tc := range []struct {
		handles             int
		long, short, newKey Handle
	}{{1, 0, 0, 0}, {2, 1, 0, 0}, {8, 1, 0, 0}} {
		p := build(tc.handles)
		got := [3]Handle{p.Place(Write{Identity: long}), p.Place(Write{Identity: short}), p.Place(Write{Identity: fresh})}
		if want := [3]Handle{tc.long, tc.short, tc.newKey}; got != want {
			t.Errorf("%d handles: long, short, new on %v, want %v", tc.handles, got, want)
		}
	}
	// A re-stored key keeps its class while cached and until its next delete re-classifies it.
	p := build(4)
	Observe(p, long, Store)
	if h := p.Place(Write{Identity: long}); h != 1 {
		t.Errorf("re-stored long-lived key on %d, want 1", h)
	}
	Observe(p, long, Delete) // lived 1 store this time
	if h := p.Place(Write{Identity: long}); h != 0 {
		t.Errorf("key that now died young on %d, want 0", h)
	}
	if c := p.(*lifetime).Class(short); c != 1 {
		t.Errorf("short-lived key in class %d, want 1", c)
	}
	// Deletes of keys never stored teach nothing; an unused policy allocates nothing.
	q := NewLifetime(4).(*lifetime)
	Observe(q, 5, Delete)
	Observe(q, 5, Lookup)
	if q.st.Load() != nil || q.Place(Write{Identity: 5}) != 0 {
		t.Error("policy without stores allocated its table or placed a key off handle 0")
	}
}

// TestLifetimeFilterMatchesTable: Place's filter answers exactly what the table says, also
// when keys take over each other's entries (200,000 keys in 2^20 entries collide often).
func TestLifetimeFilterMatchesTable(t *testing.T) {
	p := NewLifetime(4).(*lifetime)
	const keys = 200_000
	stored := make([]bool, keys)
	r := lcg(7)
	for range 600_000 {
		id := r.next() % keys
		if stored[id] && r.next()%3 != 0 {
			Observe(p, id, Delete)
			stored[id] = false
		} else if !stored[id] {
			Observe(p, id, Store)
			stored[id] = true
		}
	}
	long, taken := 0, 0
	for id := range uint64(keys) {
		want := Handle(0)
		if p.Class(id) == 2 {
			want = 1
			long++
		}
		if got := p.Place(Write{Identity: id}); got != want {
			t.Fatalf("key %d: Place %d, table class %d", id, got, p.Class(id))
		}
		if idx, tag := lifeSlot(id); p.st.Load().table[idx].Load()>>40 != tag {
			taken++
		}
	}
	if long == 0 || taken == 0 {
		t.Fatalf("test too weak: %d long-lived keys, %d keys whose entry another key took", long, taken)
	}
}

// cache-salt:pin: pinned salts keep their handle in every process; the others are assigned
// first-seen over the handles nobody pinned; salts keep their case; Name parses back.
func TestCacheSaltPinned(t *testing.T) {
	p := mustParse(t, "cache-salt:pin=Rag=2/chat=0", 4)
	if p.Name() != "cache-salt:pin=chat=0/Rag=2" {
		t.Fatalf("Name %q", p.Name())
	}
	for _, tc := range []struct {
		salt string
		want Handle
	}{{"agent", 1}, {"Rag", 2}, {"chat", 0}, {"rag", 3}, {"agent", 1}, {"Rag", 2}} {
		if h := p.Place(Write{CacheSalt: tc.salt, Size: 10}); h != tc.want {
			t.Fatalf("salt %q: handle %d, want %d", tc.salt, h, tc.want)
		}
	}
	again := mustParse(t, p.Name(), 4)
	if again.Name() != p.Name() || again.Place(Write{CacheSalt: "Rag"}) != 2 {
		t.Fatalf("round trip: %q places Rag on %d", again.Name(), again.Place(Write{CacheSalt: "Rag"}))
	}
	got := Labels(mustParse(t, "metadata-class+cache-salt:pin=a=1/b=1", 4))
	if got[1] != "salt a, b" || got[3] != "metadata" {
		t.Fatalf("labels %v", got)
	}
	for spec, want := range map[string]string{
		"cache-salt:pin=chat=4":                     "want 0..3",
		"cache-salt:pin=chat":                       "want SALT=HANDLE",
		"cache-salt:pin=chat=x":                     "integer",
		"cache-salt:pin=chat=0/chat=1":              "pinned twice",
		"metadata-class+cache-salt:pin=chat=3":      "metadata-class reserves handle 3",
		"cache-salt:pin=a=0+metadata-class+hotness": "only metadata-class composes",
	} {
		if _, err := Parse(spec, 4); err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrSpec) {
			t.Errorf("%s: error %v, want ErrSpec containing %q", spec, err, want)
		}
	}
}

// Seeding restores an assignment: a seeded salt keeps its handle whatever order salts are
// seen in, a seeded handle is taken for new salts, an assigned salt is not moved, handles
// out of range and the metadata handle are refused.
func TestCacheSaltSeed(t *testing.T) {
	p := mustParse(t, "metadata-class+cache-salt", 5) // data handles 0..3, metadata 4
	for _, tc := range []struct {
		salt string
		h    Handle
		ok   bool
	}{{"chat", 2, true}, {"rag", 0, true}, {"chat", 1, false}, {"agent", 4, false}, {"agent", 9, false}, {"agent", -1, false}} {
		if got := Seed(p, tc.salt, tc.h); got != tc.ok {
			t.Fatalf("Seed(%q, %d) = %v, want %v", tc.salt, tc.h, got, tc.ok)
		}
	}
	for _, tc := range []struct {
		salt string
		want Handle
	}{{"new", 1}, {"chat", 2}, {"rag", 0}, {"other", 3}} {
		if h := p.Place(Write{CacheSalt: tc.salt, Size: 1}); h != tc.want {
			t.Fatalf("salt %q on %d, want %d", tc.salt, h, tc.want)
		}
	}
	if Seed(mustParse(t, "cache-salt:hash", 4), "a", 1) || Seed(mustParse(t, "hotness", 4), "a", 1) {
		t.Fatal("stateless and learning policies must not accept a seed")
	}
}
