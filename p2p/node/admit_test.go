package node

import (
	"context"
	"errors"
	"testing"

	"github.com/rbctl/rbctl/admission"
	"github.com/rbctl/rbctl/p2p/client"
	"github.com/rbctl/rbctl/p2p/p2ppb"
)

// second-hit: a key's first put is declined (a later get misses), its second is stored; a
// replica is a write like a put, so b keeps a chunk fetched from a only on its second fetch.
func TestSecondHitNode(t *testing.T) {
	ea := newEngine(t, nil)
	a := startNode(t, ea, fastOptions("a", nil))
	ob := fastOptions("b", NewStaticDirectory(a.Peer()))
	ob.Admission = "second-hit"
	b := startNode(t, newEngine(t, nil), ob)
	ca, cb := dial(t, a), dial(t, b)

	if err := cb.Store(context.Background(), wireKeyN(1), payloadN(1, 100)); !errors.Is(err, client.ErrDeclined) {
		t.Fatalf("first put: %v, want declined", err)
	}
	if ch := get(t, cb, 1); ch.Source != p2ppb.Source_SOURCE_MISS {
		t.Fatalf("get after a declined put: %s", ch.Source)
	}
	put(t, cb, 1, 100)
	if ch := get(t, cb, 1); ch.Source != p2ppb.Source_SOURCE_LOCAL || string(ch.Payload) != string(payloadN(1, 100)) {
		t.Fatalf("get after the second put: %s, %d bytes", ch.Source, len(ch.Payload))
	}

	put(t, ca, 2, 200)
	for round, want := range []p2ppb.Source{p2ppb.Source_SOURCE_PEER, p2ppb.Source_SOURCE_PEER, p2ppb.Source_SOURCE_LOCAL} {
		if ch := get(t, cb, 2); ch.Source != want || string(ch.Payload) != string(payloadN(2, 200)) {
			t.Fatalf("get %d of a's key on b: %s, want %s", round+1, ch.Source, want)
		}
	}
	s := b.Stats().Counters
	if s["admission_declined"] != 2 || s["replicas_stored"] != 1 || s["puts"] != 1 || s["replicas_not_stored"] != 0 {
		t.Fatalf("b's counters: %v", s)
	}
}

// tinylfu on a full node: a one-off key does not displace chunks its clients keep asking
// for, while with every write admitted it evicts one.
func TestTinyLFUNodeKeepsHotChunks(t *testing.T) {
	for _, adm := range []string{"tinylfu", "all"} {
		o := fastOptions("a", nil)
		o.Eviction, o.Admission = EvictLRU, adm
		n := startNode(t, smallEngine(t, 16), o)
		c := dial(t, n)
		for i := range 16 {
			put(t, c, i, 1000)
			for range 3 {
				get(t, c, i)
			}
		}
		err := c.Store(context.Background(), wireKeyN(100), payloadN(100, 1000))
		s := n.Stats().Counters
		switch {
		case adm == "tinylfu" && (!errors.Is(err, client.ErrDeclined) || s["evicted"] != 0 || s["admission_declined"] != 1):
			t.Errorf("tinylfu: put of a one-off key: %v, counters %v", err, s)
		case adm == "all" && (err != nil || s["evicted"] != 1 || s["admission_declined"] != 0):
			t.Errorf("all: put of a one-off key: %v, counters %v", err, s)
		}
		if adm == "tinylfu" {
			// Asked for often enough, the new key outweighs the least recent chunk.
			for range 8 {
				get(t, c, 100)
			}
			if err := c.Store(context.Background(), wireKeyN(100), payloadN(100, 1000)); err != nil {
				t.Errorf("tinylfu: put of a key asked for 8 times: %v", err)
			}
		}
	}
}

// A node cannot run a policy that needs a chunk's position in its request.
func TestNodeRefusesPrefixDepth(t *testing.T) {
	if err := CheckAdmission("prefix-depth:4"); !errors.Is(err, admission.ErrSpec) {
		t.Fatalf("prefix-depth: %v", err)
	}
	for _, ok := range []string{"", "all", "second-hit:100", "tinylfu"} {
		if err := CheckAdmission(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	o := fastOptions("a", nil)
	o.Admission = "prefix-depth:4"
	if _, err := New(newEngine(t, nil), o); !errors.Is(err, admission.ErrSpec) {
		t.Fatalf("New with prefix-depth: %v", err)
	}
}
