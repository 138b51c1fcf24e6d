package cluster

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q is not a positive count", name, v)
	}
	return n
}

// TestMetadataCost runs N members holding K keys each under churn and reports the bytes of
// metadata each node sends per second (every memberlist packet and stream, the filters
// inside them included) and the false-positive rate of Candidates against the target.
// Short by default; the figures in docs/p2p-cluster.md come from
//
//	RBCTL_P2P_COST=120s RBCTL_P2P_COST_TIMING=lan RBCTL_P2P_NODES=5 RBCTL_P2P_KEYS=100000 \
//	  go test -count=1 -run TestMetadataCost -v ./p2p/cluster/
func TestMetadataCost(t *testing.T) {
	dur := 3 * time.Second
	if v := os.Getenv("RBCTL_P2P_COST"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("RBCTL_P2P_COST=%q: %v", v, err)
		}
		dur = d
	}
	timing, timingName := TimingFast, "fast"
	if os.Getenv("RBCTL_P2P_COST_TIMING") == "lan" {
		timing, timingName = TimingLAN, "lan"
	}
	n := envInt(t, "RBCTL_P2P_NODES", 3)
	k := envInt(t, "RBCTL_P2P_KEYS", 10000)
	churn := envInt(t, "RBCTL_P2P_CHURN", 100) // keys replaced per node per second
	const target = 0.01

	registry := t.TempDir()
	ms := make([]*Cluster, n)
	rng := rand.New(rand.NewPCG(7, 7))
	held := make([][]uint64, n)
	for i := range ms {
		cfg := Config{Name: fmt.Sprintf("m%d", i), Cluster: "cost", Timing: timing, RegistryDir: registry,
			ExpectedKeys: k, FalsePositive: target}
		c, err := Join(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Shutdown() })
		ms[i] = c
		for j := 0; j < k; j++ {
			id := rng.Uint64()
			held[i] = append(held[i], id)
			c.Admitted(id)
		}
	}
	// divergence names the first member whose view of a peer's filter is not the peer's
	// published one; "" when every view is current.
	divergence := func() string {
		for _, m := range ms {
			if len(m.Peers()) != n-1 {
				return fmt.Sprintf("%s sees %d peers", m.cfg.Name, len(m.Peers()))
			}
			for _, o := range ms {
				if o == m {
					continue
				}
				o.local.mu.Lock()
				v, pending := o.local.version, len(o.local.pending)+btoi(o.local.whole)
				o.local.mu.Unlock()
				if pending > 0 {
					return o.cfg.Name + " has changes not yet published"
				}
				m.mu.RLock()
				r := m.remotes[o.cfg.Name]
				var state string
				if r == nil || r.filter == nil {
					state = "no filter"
				} else if r.epoch != o.epoch || r.version != v {
					state = fmt.Sprintf("epoch %d version %d, published %d %d", r.epoch, r.version, o.epoch, v)
				}
				m.mu.RUnlock()
				if state != "" {
					return fmt.Sprintf("%s's view of %s: %s", m.cfg.Name, o.cfg.Name, state)
				}
			}
		}
		return ""
	}
	converge := func(limit time.Duration, what string) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for d := divergence(); d != ""; d = divergence() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v: %s", what, limit, d)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	settle := 60 * time.Second
	if timing == TimingLAN {
		settle = 3 * time.Minute
	}
	converge(settle, "filters converge after the load")

	type sample struct{ out, in, filter uint64 }
	read := func(m *Cluster) sample {
		s := m.Stats()
		return sample{out: s.PacketBytesOut + s.StreamBytesOut, in: s.PacketBytesIn + s.StreamBytesIn,
			filter: s.DeltaBytes + s.FullBytes}
	}
	before := make([]sample, n)
	for i, m := range ms {
		before[i] = read(m)
	}
	start := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	replaced := 0
	for time.Since(start) < dur {
		<-tick.C
		per := churn / 10
		for i, m := range ms {
			for j := 0; j < per; j++ {
				m.Evicted(held[i][0])
				held[i] = held[i][1:]
				id := rng.Uint64()
				m.Admitted(id)
				held[i] = append(held[i], id)
			}
		}
		replaced += per
	}
	tick.Stop()
	secs := time.Since(start).Seconds()
	var out, in, filter float64
	for i, m := range ms {
		s := read(m)
		out += float64(s.out-before[i].out) / secs
		in += float64(s.in-before[i].in) / secs
		filter += float64(s.filter-before[i].filter) / secs
	}
	converge(settle, "filters converge after the churn")

	// Lookups of keys nobody holds: every candidate is a false positive.
	const lookups = 20000
	falsePos := 0
	for i, m := range ms {
		for j := 0; j < lookups; j++ {
			falsePos += len(m.Candidates(rng.Uint64()))
		}
		// Lookups of keys a peer holds: the holder is always a candidate.
		for o := range ms {
			if o == i {
				continue
			}
			for _, id := range held[o][len(held[o])-100:] {
				if !holds(m, id, ms[o].cfg.Name) {
					t.Fatalf("%s misses %s's key %d: a false negative", m.cfg.Name, ms[o].cfg.Name, id)
				}
			}
		}
	}
	rate := float64(falsePos) / float64(n*lookups*(n-1))
	st := ms[0].Stats()
	t.Logf("timing %s, %d nodes, %d keys each, %d keys/s replaced per node for %.0f s", timingName, n, k, churn, secs)
	t.Logf("filter %d bits (%d KiB), k=%d, fill %.3f", st.FilterBits, st.FilterBits/8/1024, st.Hashes, st.FillRatio)
	t.Logf("per node: sent %.0f B/s, received %.0f B/s, of which filter messages %.0f B/s", out/float64(n), in/float64(n), filter/float64(n))
	t.Logf("false-positive candidates: %d of %d peer checks = %.4f (target %.4f)", falsePos, n*lookups*(n-1), rate, target)
	t.Logf("node m0: deltas sent %d, fulls sent %d, gaps %d, wants %d, rejected %d", st.DeltasSent, st.FullsSent, st.Gaps, st.WantsSent, st.Rejected)
	if rate > 1.5*target {
		t.Fatalf("false-positive rate %.4f above 1.5 × target %.4f", rate, target)
	}
	if replaced == 0 {
		t.Fatal("no churn ran")
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
