package node

import (
	"log/slog"
	"testing"
	"time"

	"github.com/rbctl/rbctl/p2p"
	"github.com/rbctl/rbctl/p2p/p2ppb"
	"github.com/rbctl/rbctl/p2p/p2ptest"
)

// TestFaultsThroughProxy puts fault-injecting proxies on both of a's planes (the host has
// no netem): every fault is a miss within the timeouts, never wrong bytes, and a healed
// link is used again.
func TestFaultsThroughProxy(t *testing.T) {
	ea := newEngine(t, nil)
	a := startNode(t, ea, fastOptions("a", nil))
	ctl, err := p2ptest.NewProxy(a.Peer().Control)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	data, err := p2ptest.NewProxy(a.Peer().Data)
	if err != nil {
		t.Fatal(err)
	}
	defer data.Close()
	ob := fastOptions("b", NewStaticDirectory(p2p.Peer{Name: "a", Control: ctl.Addr(), Data: data.Addr()}))
	ob.LookupTimeout, ob.FetchTimeout = 300*time.Millisecond, 300*time.Millisecond
	ob.Logger = slog.New(slog.NewTextHandler(tWriter{t}, nil))
	eb := newEngine(t, nil)
	b := startNode(t, eb, ob)
	ca, cb := dial(t, a), dial(t, b)
	for i := range 8 {
		put(t, ca, i, chunkBytes)
	}
	fetched := func(i int) bool {
		ch := get(t, cb, i) // get verifies any bytes it is given
		return ch.Source == p2ppb.Source_SOURCE_PEER
	}

	data.Stall(true) // a slow peer: the transfer outlives the fetch timeout
	if fetched(0) {
		t.Fatal("hit through a stalled data plane")
	}
	data.Stall(false)
	eventually(t, "pins released after the stalled fetch", func() bool { return locks(ea, 0) == 0 })

	data.CorruptEvery(1000) // bytes flipped in flight
	eventually(t, "backoff over", func() bool { return !fetched(1) && b.Stats().Counters["peer_checksum_errors"] > 0 })
	data.CorruptEvery(0)
	if _, ok := eb.Lookup(keyN(1)); ok {
		t.Fatal("b stored a chunk corrupted in flight")
	}

	ctl.Blackhole(true) // a partition of the control plane: lookups time out
	time.Sleep(2 * ob.BackoffMax)
	if fetched(2) {
		t.Fatal("hit through a blackholed control plane")
	}
	ctl.Blackhole(false)
	ctl.ResetAll()

	data.SetLatency(20 * time.Millisecond) // slow but within the timeouts: still a hit
	eventually(t, "the healed peer is used again", func() bool { return fetched(3) })
	s := b.Stats().Counters
	if s["peer_timeouts"] < 2 || s["peer_checksum_errors"] < 1 {
		t.Fatalf("faults not counted: %v", s)
	}
	eventually(t, "a's leases all gone", func() bool { return a.Stats().Counters["leases_active"] == 0 })
	t.Logf("b: %v", s)
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
