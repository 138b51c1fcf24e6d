package node

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/p2p"
	"github.com/rbctl/rbctl/p2p/p2ptest"
)

// TestSoak runs four nodes under mixed traffic while a fault injector cycles through the
// proxies in front of every node's planes (latency, stalls, blackholes, refused and reset
// connections, bytes corrupted in flight) and restarts nodes. It asserts no wrong bytes, no
// errors to the callers, no pins or leases left and no goroutines leaked. It runs 4 s in
// `go test`; RBCTL_P2P_SOAK=5m runs it for that long (the figures in docs/reliability.md).
func TestSoak(t *testing.T) {
	d := 4 * time.Second
	if testing.Short() {
		d = 2 * time.Second
	}
	if s := os.Getenv("RBCTL_P2P_SOAK"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			t.Fatalf("RBCTL_P2P_SOAK=%q: %v", s, err)
		}
	}
	const n, keys = 4, 96
	engs := make([]*engine.Engine, n)
	for i := range n {
		engs[i] = newEngine(t, nil) // engines outlive the test body (t.Cleanup closes them)
	}
	goroutines := runtime.NumGoroutine()

	addrs := make([]p2p.Peer, n)           // where each node listens
	ctlProxy := make([]*p2ptest.Proxy, n)  // what the others dial for its control plane
	dataProxy := make([]*p2ptest.Proxy, n) // ... and for its data plane
	for i := range n {
		ln, dl := listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0")
		addrs[i] = p2p.Peer{Name: fmt.Sprint("n", i), Control: ln.Addr().String(), Data: dl.Addr().String()}
		ln.Close()
		dl.Close()
		var err error
		if ctlProxy[i], err = p2ptest.NewProxy(addrs[i].Control); err != nil {
			t.Fatal(err)
		}
		if dataProxy[i], err = p2ptest.NewProxy(addrs[i].Data); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	nodes := make([]*Node, n)
	start := func(i int) *Node {
		var others []p2p.Peer
		for j := range n {
			if j != i {
				others = append(others, p2p.Peer{Name: addrs[j].Name, Control: ctlProxy[j].Addr(), Data: dataProxy[j].Addr()})
			}
		}
		o := fastOptions(addrs[i].Name, NewStaticDirectory(others...))
		o.LookupTimeout, o.FetchTimeout, o.UnlockTimeout = 300*time.Millisecond, 500*time.Millisecond, 300*time.Millisecond
		o.LeaseTTL = time.Second
		nd, err := New(engs[i], o)
		if err != nil {
			t.Fatal(err)
		}
		nd.Serve(listen(t, addrs[i].Control), listen(t, addrs[i].Data))
		return nd
	}
	for i := range n {
		nodes[i] = start(i)
	}
	node := func(i int) *Node { mu.Lock(); defer mu.Unlock(); return nodes[i] }
	for k := range keys {
		if _, err := nodes[k%n].Put([]engine.Key{keyN(k)}, [][]byte{payloadN(k, 4096+k*1000)}); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var gets, wrong, peerHits, misses, faults, restarts atomic.Int64
	var cks, timeouts, bytesIn atomic.Int64 // summed over every life of every node
	retired := func(c map[string]int64) {
		cks.Add(c["peer_checksum_errors"])
		timeouts.Add(c["peer_timeouts"])
		bytesIn.Add(c["peer_bytes_in"])
	}
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for ctx.Err() == nil {
				batch := make([]engine.Key, 1+rng.IntN(4))
				idx := make([]int, len(batch))
				for j := range batch {
					idx[j] = rng.IntN(keys)
					batch[j] = keyN(idx[j])
				}
				res, err := node(w).Get(context.Background(), batch, false)
				if err != nil {
					t.Errorf("node %d get: %v", w, err)
					return
				}
				for j, r := range res {
					gets.Add(1)
					switch r.Source {
					case Miss:
						misses.Add(1)
						continue
					case Peer:
						peerHits.Add(1)
					}
					if string(r.Payload) != string(payloadN(idx[j], 4096+idx[j]*1000)) {
						wrong.Add(1)
					}
				}
				if rng.IntN(8) == 0 { // drop a replica now and then so fetches go on
					k := rng.IntN(keys)
					if k%n != w {
						node(w).Delete([]engine.Key{keyN(k)}, false)
					}
				}
			}
		})
	}
	// The fault injector: every 100 ms one fault on one node's proxies, or a node restart.
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(99, 1))
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for ctx.Err() == nil {
			<-tick.C
			i := rng.IntN(n)
			cp, dp := ctlProxy[i], dataProxy[i]
			cp.SetLatency(0)
			dp.SetLatency(0)
			for _, p := range []*p2ptest.Proxy{cp, dp} {
				p.Stall(false)
				p.Blackhole(false)
				p.Refuse(false)
				p.CorruptEvery(0)
			}
			faults.Add(1)
			switch rng.IntN(8) {
			case 0:
				dp.SetLatency(time.Duration(rng.IntN(50)) * time.Millisecond)
			case 1:
				dp.Stall(true)
			case 2:
				cp.Blackhole(true)
			case 3:
				cp.Refuse(true)
			case 4:
				dp.ResetAll()
			case 5:
				dp.CorruptEvery(int64(500 + rng.IntN(5000)))
			case 6:
				mu.Lock()
				old := nodes[i]
				mu.Unlock()
				old.Close()
				retired(old.Stats().Counters)
				nd := start(i)
				mu.Lock()
				nodes[i] = nd
				mu.Unlock()
				restarts.Add(1)
			default:
				faults.Add(-1) // a quiet tick
			}
		}
	})
	wg.Wait()
	for i := range n {
		nd := node(i)
		nd.Close()
		retired(nd.Stats().Counters)
	}
	for _, p := range append(ctlProxy, dataProxy...) {
		p.Close()
	}
	if wrong.Load() != 0 {
		t.Fatalf("%d chunks with wrong bytes", wrong.Load())
	}
	for i, e := range engs {
		e.Entries(func(k engine.Key, m engine.EntryMeta) bool {
			if m.Locks != 0 {
				t.Errorf("node %d: %s still pinned %d times", i, k, m.Locks)
			}
			return true
		})
	}
	if peerHits.Load() == 0 {
		t.Fatal("no peer hits at all")
	}
	// Goroutines: every node, proxy and connection is closed; allow the runtime a moment.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > goroutines+2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > goroutines+2 {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after the soak, %d before:\n%s", g, goroutines, buf[:runtime.Stack(buf, true)])
	}
	t.Logf("soak %v, %d nodes: %d chunk gets, %d peer hits (%.1f MiB in), %d misses, %d faults injected, %d restarts, %d checksum failures caught, %d peer timeouts, 0 wrong bytes, 0 pins left",
		d, n, gets.Load(), peerHits.Load(), float64(bytesIn.Load())/(1<<20), misses.Load(), faults.Load(), restarts.Load(), cks.Load(), timeouts.Load())
}
