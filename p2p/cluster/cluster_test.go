package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rbctl/rbctl/p2p"
)

// testCluster runs members on loopback with fast timing, finding each other through one
// registry directory.
type testCluster struct {
	t        *testing.T
	registry string
}

func newTestCluster(t *testing.T) *testCluster {
	return &testCluster{t: t, registry: t.TempDir()}
}

func (tc *testCluster) config(name string) Config {
	return Config{Name: name, Cluster: "test", Timing: TimingFast, RegistryDir: tc.registry,
		Control: "127.0.0.1:1" + fmt.Sprint(len(name)), Data: "127.0.0.1:2" + fmt.Sprint(len(name)),
		ExpectedKeys: 1000}
}

func (tc *testCluster) start(cfg Config) *Cluster {
	tc.t.Helper()
	c, err := Join(context.Background(), cfg)
	if err != nil {
		tc.t.Fatalf("join %s: %v", cfg.Name, err)
	}
	tc.t.Cleanup(func() { c.Shutdown() })
	return c
}

// eventually polls cond until it holds or limit passes; it returns the time it took.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

func names(ps []p2p.Peer) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.Name)
	}
	return strings.Join(s, ",")
}

func seesPeers(c *Cluster, want string) func() bool {
	return func() bool { return names(c.Peers()) == want }
}

func holds(c *Cluster, id uint64, peer string) bool {
	return slices.ContainsFunc(c.Candidates(id), func(p p2p.Peer) bool { return p.Name == peer })
}

// three starts a, b and c and waits until each sees the other two.
func three(t *testing.T) (*testCluster, []*Cluster) {
	tc := newTestCluster(t)
	var ms []*Cluster
	for _, n := range []string{"a", "b", "c"} {
		ms = append(ms, tc.start(tc.config(n)))
	}
	for _, m := range ms {
		eventually(t, 10*time.Second, m.cfg.Name+" sees the others", func() bool { return len(m.Peers()) == 2 })
	}
	return tc, ms
}

func TestMembersFindEachOtherThroughTheRegistry(t *testing.T) {
	_, ms := three(t)
	for _, p := range ms[0].Peers() {
		if p.Control != "127.0.0.1:11" || p.Data != "127.0.0.1:21" {
			t.Fatalf("peer %+v: advertised planes lost", p)
		}
	}
	if got := names(ms[1].Members()); got != "a,b,c" {
		t.Fatalf("members %s; want a,b,c", got)
	}
	for _, m := range ms {
		if len(m.Candidates(42)) != 0 {
			t.Fatalf("%s: candidates for a key nobody holds", m.cfg.Name)
		}
	}
}

func TestAdmittedKeysBecomeCandidatesAndEvictionsRemoveThem(t *testing.T) {
	_, ms := three(t)
	a, b, c := ms[0], ms[1], ms[2]
	for id := uint64(1); id <= 100; id++ {
		a.Admitted(id)
	}
	c.Admitted(50)
	for _, m := range []*Cluster{b, c} {
		eventually(t, 10*time.Second, m.cfg.Name+" learns a's keys", func() bool {
			for id := uint64(1); id <= 100; id++ {
				if !holds(m, id, "a") {
					return false
				}
			}
			return true
		})
	}
	if holds(a, 1, "a") {
		t.Fatal("a lists itself as a candidate")
	}
	eventually(t, 10*time.Second, "b sees 50 at a and c", func() bool { return names(b.Candidates(50)) != "" && len(b.Candidates(50)) == 2 })
	for id := uint64(1); id <= 60; id++ {
		a.Evicted(id)
	}
	eventually(t, 10*time.Second, "evictions reach b and c", func() bool {
		for id := uint64(1); id <= 60; id++ {
			if holds(b, id, "a") || holds(c, id, "a") {
				return false
			}
		}
		return holds(b, 61, "a") && holds(b, 50, "c")
	})
	if s := a.Stats(); s.Keys != 40 || s.DeltasSent == 0 {
		t.Fatalf("a's stats %+v; want 40 keys and deltas sent", s)
	}
}

func TestKilledMemberIsDroppedWithinTheBound(t *testing.T) {
	_, ms := three(t)
	a, b, c := ms[0], ms[1], ms[2]
	c.Admitted(7)
	eventually(t, 10*time.Second, "a learns c's key", func() bool { return holds(a, 7, "c") })
	bound := a.FailureBound()
	c.Shutdown()
	// Twice the nominal bound: memberlist's awareness stretches probes on a loaded machine.
	took := eventually(t, 2*bound, "a drops c", seesPeers(a, "b"))
	eventually(t, 2*bound, "b drops c", seesPeers(b, "a"))
	t.Logf("killed member dropped after %v (bound %v)", took, bound)
	if holds(a, 7, "c") {
		t.Fatal("a dead member is still a candidate")
	}
}

func TestLeavingMemberIsDroppedAtOnce(t *testing.T) {
	_, ms := three(t)
	if err := ms[2].Leave(time.Second); err != nil {
		t.Fatal(err)
	}
	eventually(t, ms[0].FailureBound(), "a sees c leave", seesPeers(ms[0], "b"))
	if err := ms[2].Leave(time.Second); err != ErrStopped {
		t.Fatalf("second Leave: %v; want ErrStopped", err)
	}
}

func TestPartitionDropsAndHealRejoins(t *testing.T) {
	_, ms := three(t)
	a, b, c := ms[0], ms[1], ms[2]
	c.Admitted(99)
	eventually(t, 10*time.Second, "a learns c's key", func() bool { return holds(a, 99, "c") })
	c.cutOff(true)
	bound := a.FailureBound()
	eventually(t, 2*bound, "a drops c", seesPeers(a, "b"))
	eventually(t, 2*bound, "c drops a and b", seesPeers(c, ""))
	c.Admitted(100) // changed while cut off: must arrive after the heal
	c.cutOff(false)
	took := eventually(t, 10*time.Second, "a and b see c again", func() bool {
		return names(a.Peers()) == "b,c" && names(b.Peers()) == "a,c" && names(c.Peers()) == "a,b"
	})
	eventually(t, 10*time.Second, "c's filter is back", func() bool { return holds(a, 99, "c") && holds(b, 100, "c") })
	t.Logf("partition healed after %v", took)
}

func TestRestartedMemberRejoinsWithItsNewKeys(t *testing.T) {
	tc, ms := three(t)
	a := ms[0]
	ms[2].Admitted(1)
	eventually(t, 10*time.Second, "a learns c's key", func() bool { return holds(a, 1, "c") })
	ms[2].Shutdown()
	eventually(t, 2*a.FailureBound(), "a drops c", seesPeers(a, "b"))
	c2 := tc.start(tc.config("c")) // same name, new port, empty cache
	c2.Admitted(2)
	eventually(t, 10*time.Second, "a sees the new c with its key", func() bool {
		return names(a.Peers()) == "b,c" && holds(a, 2, "c")
	})
	if holds(a, 1, "c") {
		t.Fatal("the restarted member still carries its previous life's key")
	}
}

func TestJoinThroughSeeds(t *testing.T) {
	cfg := Config{Name: "s1", Timing: TimingFast, NoRegistry: true, ExpectedKeys: 100}
	s1, err := Join(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Shutdown()
	cfg.Name, cfg.Seeds = "s2", []string{s1.GossipAddr()}
	s2, err := Join(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Shutdown()
	eventually(t, 10*time.Second, "s1 sees s2", seesPeers(s1, "s2"))
	cfg.Name, cfg.Seeds = "s3", []string{"127.0.0.1:1"}
	if s3, err := Join(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "no seed") {
		if s3 != nil {
			s3.Shutdown()
		}
		t.Fatalf("join through a dead seed: %v; want 'no seed ... answered'", err)
	}
}

func TestConfigRejections(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{Name: "a/b"},
		{Name: "a", Cluster: "x y"},
		{Name: "a", Control: "nowhere"},
		{Name: "a", BindPort: 70000},
		{Name: "a", FalsePositive: 2},
		{Name: "a", ExpectedKeys: 1 << 24, MaxRemoteFilter: 1 << 10},
		{Name: "a", Timing: 7},
	} {
		cfg.NoRegistry = true
		if c, err := Join(context.Background(), cfg); err == nil {
			c.Shutdown()
			t.Errorf("Join(%+v) succeeded", cfg)
		}
	}
}

func TestOversizedRemoteFilterIsRejected(t *testing.T) {
	tc := newTestCluster(t)
	big := tc.config("big")
	big.ExpectedKeys = 100000 // 120 KB
	small := tc.config("small")
	small.ExpectedKeys = 100
	small.MaxRemoteFilter = 4096
	b := tc.start(big)
	s := tc.start(small)
	b.Admitted(5)
	eventually(t, 10*time.Second, "small sees big", seesPeers(s, "big"))
	eventually(t, 10*time.Second, "small rejects big's filter", func() bool { return s.Stats().Rejected > 0 })
	if len(s.Candidates(5)) != 0 || s.Stats().RemoteKnown != 0 {
		t.Fatal("a filter above the cap was used")
	}
	eventually(t, 10*time.Second, "big takes small's filter", func() bool { return b.Stats().RemoteKnown == 1 })
}
