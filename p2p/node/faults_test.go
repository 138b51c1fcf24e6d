package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/p2p"
	"github.com/rbctl/rbctl/p2p/p2ppb"
)

func TestRequesterCancelReleasesPeerLease(t *testing.T) {
	inHook, release := make(chan struct{}, 1), make(chan struct{})
	var once sync.Once
	oa := fastOptions("a", nil)
	oa.TamperData = func(uint32, []byte) { once.Do(func() { inHook <- struct{}{}; <-release }) }
	ea := newEngine(t, nil)
	a := startNode(t, ea, oa)
	defer close(release)
	put(t, dial(t, a), 1, 1000)
	b := startNode(t, newEngine(t, nil), fastOptions("b", NewStaticDirectory(a.Peer())))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan []Result, 1)
	go func() { r, _ := b.Get(ctx, []engine.Key{keyN(1)}, false); done <- r }()
	<-inHook // a is mid-transfer with the key pinned
	if locks(ea, 1) != 1 {
		t.Fatalf("pins during the transfer: %d", locks(ea, 1))
	}
	cancel()
	if r := <-done; r[0].Source != Miss {
		t.Fatalf("cancelled get: source %d", r[0].Source)
	}
	eventually(t, "the requester's unlock releases the pins", func() bool { return locks(ea, 1) == 0 })
	if s := a.Stats().Counters; s["leases_released"] != 1 || s["leases_expired"] != 0 {
		t.Fatalf("a's counters: %v", s)
	}
}

func TestKeyOf(t *testing.T) {
	good := engine.ObjectKey("my/model", 0x01000100, []byte{0xab, 0xcd}, "salt")
	for _, tc := range []struct {
		name string
		k    *p2ppb.ObjectKey
		ns   engine.Namespace
		want string // "" = an error
	}{
		{"fields", &p2ppb.ObjectKey{ModelName: "my/model", KvRank: 0x01000100, ChunkHash: []byte{0xab, 0xcd}, CacheSalt: "salt"}, engine.NamespaceObject, good.String()},
		{"encoded", &p2ppb.ObjectKey{Encoded: good.String()}, engine.NamespaceObject, good.String()},
		{"encoded legacy", &p2ppb.ObjectKey{Encoded: "vllm@m@1@0@ff@bf16"}, engine.NamespaceLegacy, "vllm@m@1@0@ff@bf16"},
		{"nil", nil, engine.NamespaceObject, ""},
		{"encoded and fields", &p2ppb.ObjectKey{Encoded: good.String(), ModelName: "x"}, engine.NamespaceObject, ""},
		{"no hash", &p2ppb.ObjectKey{ModelName: "m"}, engine.NamespaceObject, ""},
		{"negative rank", &p2ppb.ObjectKey{ModelName: "m", ChunkHash: []byte{1}, KvRank: -1}, engine.NamespaceObject, ""},
		// LMCache packs ranks unmasked (a world of 256+ is 9+ hex digits) and names groups
		// in its newer shape: both are keys LMCache writes.
		{"rank above 32 bits", &p2ppb.ObjectKey{ModelName: "m", ChunkHash: []byte{1}, KvRank: 1 << 32}, engine.NamespaceObject, "m@0x100000000@01"},
		{"object group", &p2ppb.ObjectKey{ModelName: "m", ChunkHash: []byte{1}, ObjectGroupId: 0x1f, CacheSalt: "s"}, engine.NamespaceObject, "m@0x00000000@1f@01@s"},
		{"negative group", &p2ppb.ObjectKey{ModelName: "m", ChunkHash: []byte{1}, ObjectGroupId: -1}, engine.NamespaceObject, ""},
		{"salt with @", &p2ppb.ObjectKey{ModelName: "m", ChunkHash: []byte{1}, CacheSalt: "a@b"}, engine.NamespaceObject, ""},
		{"fields on a legacy cache", &p2ppb.ObjectKey{ModelName: "m", ChunkHash: []byte{1}}, engine.NamespaceLegacy, ""},
		{"control character", &p2ppb.ObjectKey{Encoded: "m@0x00000000@00\x1b"}, engine.NamespaceObject, ""},
	} {
		k, err := keyOf(tc.k, tc.ns)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%s: accepted as %q", tc.name, k.String())
		case tc.want == "" && !errors.Is(err, errKey):
			t.Errorf("%s: %v is not a key error", tc.name, err)
		case tc.want != "" && (err != nil || k.String() != tc.want):
			t.Errorf("%s: %q, %v; want %q", tc.name, k.String(), err, tc.want)
		}
	}
	if _, err := keysOf(make([]*p2ppb.ObjectKey, 3), engine.NamespaceObject, 2); err == nil {
		t.Error("a batch above the bound was accepted")
	}
}

// TestMixedTrafficNoWrongBytes runs three nodes that fetch from each other while one of
// them corrupts some of what it serves and one restarts: every byte any get returns is
// right, and at the end no lease and no pin is left anywhere.
func TestMixedTrafficNoWrongBytes(t *testing.T) {
	const keys = 60
	rounds := 400
	if testing.Short() {
		rounds = 100
	}
	var tamper atomic.Int64
	engs := make([]*engine.Engine, 3)
	nodes := make([]*Node, 3)
	var mu sync.Mutex
	node := func(i int) *Node { mu.Lock(); defer mu.Unlock(); return nodes[i] }
	ctl := make([]p2p.Peer, 3)
	for i := range nodes {
		engs[i] = newEngine(t, nil)
		ln, dl := listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0")
		ctl[i] = p2p.Peer{Name: fmt.Sprint("n", i), Control: ln.Addr().String(), Data: dl.Addr().String()}
		ln.Close()
		dl.Close()
	}
	start := func(i int) *Node {
		var others []p2p.Peer
		for j := range ctl {
			if j != i {
				others = append(others, ctl[j])
			}
		}
		o := fastOptions(ctl[i].Name, NewStaticDirectory(others...))
		o.LeaseTTL = 500 * time.Millisecond
		if i == 2 {
			o.TamperData = func(_ uint32, p []byte) {
				if tamper.Add(1)%5 == 0 {
					p[0] ^= 0xff
				}
			}
		}
		return startNodeOn(t, engs[i], o, ctl[i])
	}
	for i := range nodes {
		nodes[i] = start(i)
	}
	// Each key lives on one node to begin with.
	for k := range keys {
		if _, err := nodes[k%3].Put([]engine.Key{keyN(k)}, [][]byte{payloadN(k, 1000+k*100)}); err != nil {
			t.Fatal(err)
		}
	}
	var wrong, peerHits, misses atomic.Int64
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			for r := range rounds {
				k := (r*7 + w*13) % keys
				res, err := node(w).Get(context.Background(), []engine.Key{keyN(k)}, false)
				if err != nil {
					t.Errorf("node %d get: %v", w, err)
					return
				}
				switch res[0].Source {
				case Miss:
					misses.Add(1)
				case Peer:
					peerHits.Add(1)
					fallthrough
				default:
					if string(res[0].Payload) != string(payloadN(k, 1000+k*100)) {
						wrong.Add(1)
					}
				}
				if r%50 == 49 { // drop replicas now and then so fetches continue
					node(w).Delete([]engine.Key{keyN((k + 1) % keys)}, false)
				}
			}
		})
	}
	// Node 1 dies and returns in the middle of it.
	time.Sleep(20 * time.Millisecond)
	node(1).Close()
	time.Sleep(20 * time.Millisecond)
	n1 := start(1)
	mu.Lock()
	nodes[1] = n1
	mu.Unlock()
	wg.Wait()
	if wrong.Load() != 0 {
		t.Fatalf("%d gets returned wrong bytes", wrong.Load())
	}
	for i, n := range nodes {
		n.Close()
		engs[i].Entries(func(k engine.Key, m engine.EntryMeta) bool {
			if m.Locks != 0 {
				t.Errorf("node %d: %s still pinned %d times", i, k, m.Locks)
			}
			return true
		})
	}
	var cks int64
	for _, n := range nodes {
		cks += n.Stats().Counters["peer_checksum_errors"]
	}
	t.Logf("%d gets per node: %d peer hits, %d misses, %d checksum failures caught", rounds, peerHits.Load(), misses.Load(), cks)
	if peerHits.Load() == 0 {
		t.Fatal("no peer hits at all")
	}
}
