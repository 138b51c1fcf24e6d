package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rbctl/rbctl/p2p/p2ptest"
)

// Three members in their own network namespaces, on a bridge, finding each other through a
// shared registry directory; one link goes down and comes back.
func TestClusterAcrossNamespacesSurvivesALinkDown(t *testing.T) {
	nt := p2ptest.NewNet(t, 3)
	registry := t.TempDir()
	var ms []*Cluster
	for i, node := range nt.Nodes {
		cfg := Config{Name: fmt.Sprintf("n%d", i), Cluster: "netns", Timing: TimingFast, RegistryDir: registry,
			BindAddr: node.IP, BindPort: 7946, Control: node.IP + ":7000", Data: node.IP + ":7001",
			ExpectedKeys: 1000, Dial: nt.Dialer(i)}
		var c *Cluster
		err := nt.Do(i, func() error { // the gossip sockets are made in the namespace
			var err error
			c, err = Join(context.Background(), cfg)
			return err
		})
		if err != nil {
			t.Fatalf("join n%d: %v", i, err)
		}
		t.Cleanup(func() { c.Shutdown() })
		ms = append(ms, c)
	}
	for _, m := range ms {
		eventually(t, 15*time.Second, m.cfg.Name+" sees the others", func() bool { return len(m.Peers()) == 2 })
	}
	if p := ms[0].Peers()[1]; p.Control != nt.Nodes[2].IP+":7000" {
		t.Fatalf("n2 advertised as %+v", p)
	}
	ms[2].Admitted(77)
	eventually(t, 10*time.Second, "n0 learns n2's key", func() bool { return holds(ms[0], 77, "n2") })

	bound := ms[0].FailureBound()
	if err := nt.LinkDown(2); err != nil {
		t.Fatal(err)
	}
	took := eventually(t, 2*bound, "n0 and n1 drop n2", func() bool {
		return names(ms[0].Peers()) == "n1" && names(ms[1].Peers()) == "n0"
	})
	eventually(t, 2*bound, "n2 drops the others", seesPeers(ms[2], ""))
	t.Logf("link down: dropped after %v (bound %v)", took, bound)
	if err := nt.LinkUp(2); err != nil {
		t.Fatal(err)
	}
	took = eventually(t, 15*time.Second, "n2 is back", func() bool {
		return names(ms[0].Peers()) == "n1,n2" && names(ms[2].Peers()) == "n0,n1" && holds(ms[1], 77, "n2")
	})
	t.Logf("link up: rejoined after %v", took)
}
