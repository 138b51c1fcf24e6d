package node

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/p2p/dataplane"
)

// After the first fetch (a control-plane lookup, then the pull on a dialled connection)
// every fetch on the pooled connection is one lookup request on the data plane: no
// control-plane call, the right bytes, the leading prefix only, every lease released by
// the holder and no pin left; an absent first key is an empty lookup that keeps the
// connection; a corrupting holder is a counted miss, nothing stored.
func TestLookupFetchOnTheDataPlane(t *testing.T) {
	var corrupt atomic.Bool
	oa := fastOptions("a", nil)
	oa.TamperData = func(_ uint32, p []byte) {
		if corrupt.Load() {
			p[len(p)/2] ^= 1
		}
	}
	ea := newEngine(t, nil)
	a := startNode(t, ea, oa)
	ob := fastOptions("b", NewStaticDirectory(a.Peer()))
	ob.FetchOnly = true // every Get fetches
	eb := newEngine(t, nil)
	b := startNode(t, eb, ob)
	for i := range 5 {
		if _, err := a.Put([]engine.Key{keyN(i)}, [][]byte{payloadN(i, 3000+i)}); err != nil {
			t.Fatal(err)
		}
	}
	getPeer(t, b, 3000, 0) // dials: the control-plane lookup, then the pull
	for range 3 {
		getPeer(t, b, 3001, 1) // the pooled connection: one lookup request each
	}
	res, err := b.Get(context.Background(), []engine.Key{keyN(2), keyN(3), keyN(99), keyN(1)}, false)
	if err != nil {
		t.Fatal(err)
	}
	for j, want := range []int{2, 3} {
		if res[j].Source != Peer || !bytes.Equal(res[j].Payload, payloadN(want, 3000+want)) {
			t.Fatalf("batch key %d: source %d, %d bytes", want, res[j].Source, len(res[j].Payload))
		}
	}
	if res[2].Source != Miss || res[3].Source != Miss { // the lease is the leading prefix
		t.Fatalf("after a missing key: %d %d", res[2].Source, res[3].Source)
	}
	if res, _ := b.Get(context.Background(), []engine.Key{keyN(50)}, false); res[0].Source != Miss {
		t.Fatalf("absent key: %d", res[0].Source)
	}
	eventually(t, "a's leases all released", func() bool { return a.leases.active() == 0 })
	if g, d := a.leases.granted.Load(), a.leases.grantedData.Load(); g != 5 || d != 4 {
		t.Fatalf("a granted %d leases, %d to lookup requests; want 5 and 4 (one control-plane lookup)", g, d)
	}
	if r, x := a.leases.released.Load(), a.leases.releasedData.Load(); r != 5 || x != 5 {
		t.Fatalf("a released %d leases, %d on the data plane; want 5 and 5", r, x)
	}
	if st := a.data.Stats(); st.Requests != 6 || st.Lookups != 5 || st.LookupsRefused != 0 || st.BadFrames != 0 {
		t.Fatalf("a's data plane: %+v", st)
	}
	for i := range 5 {
		if locks(ea, i) != 0 {
			t.Fatalf("key %d still pinned", i)
		}
	}
	s := b.Stats().Counters
	if s["peer_lookups"] != 6 || s["peer_lookup_empty"] != 1 || s["peer_errors"] != 0 || s["unlock_failed"] != 0 {
		t.Fatalf("b's counters: %v", s)
	}
	r, _ := b.peers.get(a.Peer())
	r.mu.Lock()
	pooled := len(r.idle)
	r.mu.Unlock()
	if pooled != 1 {
		t.Fatalf("%d pooled connections, want 1", pooled)
	}

	corrupt.Store(true)
	res, _ = b.Get(context.Background(), []engine.Key{keyN(4)}, false)
	if res[0].Source != Miss || res[0].Payload != nil {
		t.Fatalf("through a corrupting peer: %d, %d bytes", res[0].Source, len(res[0].Payload))
	}
	if _, ok := eb.Lookup(keyN(4)); ok {
		t.Fatal("b stored a corrupted chunk")
	}
	if s := b.Stats().Counters; s["peer_checksum_errors"] != 1 {
		t.Fatalf("b's counters: %v", s)
	}
	eventually(t, "a's pins released after the failed fetch", func() bool { return locks(ea, 4) == 0 && a.leases.active() == 0 })
}

// A node with a token file takes a lookup request only with a token that has the peer
// right, as its control plane takes Peer/LookupAndLock: no token, an unknown one, a
// tenant's, or a malformed key is refused for every key, leases nothing and is counted.
func TestLookupRequestTokens(t *testing.T) {
	oa := fastOptions("a", nil)
	oa.Tokens = testTokens(t)
	ea := newEngine(t, nil)
	a := startNode(t, ea, oa)
	if _, err := a.Put([]engine.Key{keyN(0), keyN(1)}, [][]byte{payloadN(0, 4000), payloadN(1, 4000)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dataplane.Dial(ctx, a.Peer().Data)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.TakesLookups() {
		t.Fatal("a's data plane does not announce lookup requests")
	}
	names := []string{keyN(0).String(), keyN(1).String()}
	ask := func(token string, keys []string) []dataplane.Frame {
		t.Helper()
		if err := c.SendLookup(ctx, token, keys); err != nil {
			t.Fatal(err)
		}
		f, err := c.ReceiveAll(ctx, leadingIndexes(len(keys)), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, tc := range []struct {
		name, token string
		keys        []string
	}{{"no token", "", names}, {"an unknown token", "not-a-token-0123456789", names},
		{"a tenant's token", secretA, names}, {"a malformed key", secretPeer, []string{names[0], "\x01bad"}}} {
		for i, f := range ask(tc.token, tc.keys) {
			if f.Status != dataplane.StatusRefused || f.Payload != nil {
				t.Fatalf("%s: chunk %d %v, %d bytes", tc.name, i, f.Status, len(f.Payload))
			}
		}
	}
	if g := a.leases.granted.Load(); g != 0 {
		t.Fatalf("%d leases granted to refused lookups", g)
	}
	cs := a.Stats().Counters
	if cs["auth_failed"] != 2 || cs["auth_denied"] != 1 || a.data.Stats().LookupsRefused != 4 {
		t.Fatalf("auth_failed %d auth_denied %d, refused lookups %d; want 2, 1, 4", cs["auth_failed"], cs["auth_denied"], a.data.Stats().LookupsRefused)
	}
	f := ask(secretPeer, append(names, keyN(7).String()))
	for i := range 2 {
		if f[i].Status != dataplane.StatusOK || !bytes.Equal(f[i].Payload, payloadN(i, 4000)) {
			t.Fatalf("with the peer token, chunk %d: %v, %d bytes", i, f[i].Status, len(f[i].Payload))
		}
	}
	if f[2].Status != dataplane.StatusMiss {
		t.Fatalf("an absent key: %v", f[2].Status)
	}
	eventually(t, "the lease released", func() bool { return a.leases.active() == 0 && locks(ea, 0) == 0 })
}

// A chunk larger than the requester's own slots ends the prefix there without a failure:
// the chunks before it are delivered, and the lookup is not counted as empty.
func TestLookupChunkLargerThanRequesterSlots(t *testing.T) {
	ea := newEngine(t, nil)
	a := startNode(t, ea, fastOptions("a", nil))
	ob := fastOptions("b", NewStaticDirectory(a.Peer()))
	ob.FetchOnly = true
	b := startNode(t, newEngine(t, func(c *engine.Config) { c.SlotBytes = 4096 + 8192 }), ob)
	sizes := []int{3000, 8000, 20000}
	for i, sz := range sizes {
		if _, err := a.Put([]engine.Key{keyN(i)}, [][]byte{payloadN(i, sz)}); err != nil {
			t.Fatal(err)
		}
	}
	getPeer(t, b, 3000, 0) // dials: the control-plane lookup; the connection is pooled
	res, err := b.Get(context.Background(), []engine.Key{keyN(1), keyN(2)}, false)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Source != Peer || !bytes.Equal(res[0].Payload, payloadN(1, 8000)) || res[1].Source != Miss {
		t.Fatalf("sources %d %d, %d bytes", res[0].Source, res[1].Source, len(res[0].Payload))
	}
	res, _ = b.Get(context.Background(), []engine.Key{keyN(2)}, false)
	if res[0].Source != Miss {
		t.Fatalf("a chunk above b's slots: source %d", res[0].Source)
	}
	if st := a.data.Stats(); st.Lookups != 2 {
		t.Fatalf("a's data plane: %+v", st)
	}
	if s := b.Stats().Counters; s["peer_lookup_empty"] != 0 || s["peer_errors"] != 0 {
		t.Fatalf("b's counters: %v", s)
	}
	eventually(t, "a's leases all released", func() bool { return a.leases.active() == 0 })
}
