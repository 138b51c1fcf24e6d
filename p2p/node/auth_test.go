package node

import (
	"bytes"
	"context"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/p2p/auth"
	"github.com/rbctl/rbctl/p2p/client"
	"github.com/rbctl/rbctl/p2p/p2ppb"
	"github.com/rbctl/rbctl/p2p/p2ptest"
)

const (
	secretA     = "tenant-a-secret-0123456789"
	secretB     = "tenant-b-secret-0123456789"
	secretAdmin = "admin-secret-0123456789ab"
	secretPeer  = "peer-secret-0123456789abc"
	tokenFile   = "a " + secretA + " rights=read,write,delete salts=tenantA\n" +
		"b " + secretB + " rights=read,write,delete salts=tenantB\n" +
		"ops " + secretAdmin + " rights=admin\n" +
		"nodes " + secretPeer + " rights=peer\n"
)

func testTokens(t testing.TB) *auth.Tokens {
	t.Helper()
	ts, err := auth.Parse(strings.NewReader(tokenFile))
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func saltKey(i int, salt string) *p2ppb.ObjectKey { return client.Key("m/odel", 0, hashOf(i), salt) }

// A node with a token file in one namespace, its clients in another (an unrelated host):
// tenant A's token cannot read, lock, list, overwrite or delete tenant B's keys, each a
// PermissionDenied that changes nothing; no token or an unknown one is Unauthenticated;
// admin can do all of it; the peer service takes the peer token only.
func TestTenantTokensAcrossNamespaces(t *testing.T) {
	nt := p2ptest.NewNet(t, 2)
	e := newEngine(t, nil)
	o := fastOptions("a", nil)
	o.Tokens = testTokens(t)
	n := startNodeIn(t, nt, 0, e, o, "7470", "0")
	dialer := nt.Dialer(1)
	from := grpc.WithContextDialer(func(_ context.Context, addr string) (net.Conn, error) { return dialer("tcp", addr, 5*time.Second) })
	as := func(secret string) *client.Client {
		opts := []grpc.DialOption{from}
		if secret != "" {
			opts = append(opts, client.WithToken(secret))
		}
		c, err := client.Dial(n.Peer().Control, 10*time.Second, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	ctx := context.Background()
	a, b, admin := as(secretA), as(secretB), as(secretAdmin)
	kb, ka := saltKey(1, "tenantB"), saltKey(2, "tenantA")
	valB, valA := payloadN(1, 1000), payloadN(2, 1000)
	if o, err := b.Put(ctx, kb, valB); !o.Stored || err != nil {
		t.Fatalf("B puts its key: %+v %v", o, err)
	}
	if o, err := a.Put(ctx, ka, valA); !o.Stored || err != nil {
		t.Fatalf("A puts its key: %+v %v", o, err)
	}

	cc, err := grpc.NewClient(n.Peer().Control, from, grpc.WithTransportCredentials(insecure.NewCredentials()), client.WithToken(secretA))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	rawA := p2ppb.NewCacheClient(cc)
	peerAsA := p2ppb.NewPeerClient(cc)
	for name, call := range map[string]func() error{
		"get B's key":          func() error { _, err := a.Get(ctx, kb, true); return err },
		"list":                 func() error { _, err := a.List(ctx, "", 0); return err },
		"list B's salt":        func() error { _, err := a.List(ctx, "tenantB", 0); return err },
		"stats":                func() error { _, err := a.Stats(ctx); return err },
		"overwrite B's key":    func() error { _, err := a.Put(ctx, kb, []byte("FORGED by A")); return err },
		"delete B's key":       func() error { _, err := a.Delete(ctx, kb, false); return err },
		"force-delete B's key": func() error { _, err := a.Delete(ctx, kb, true); return err },
		"force-delete own key": func() error { _, err := a.Delete(ctx, ka, true); return err },
		"lock B's key": func() error {
			_, err := rawA.LookupAndLock(ctx, &p2ppb.LookupAndLockRequest{Keys: []*p2ppb.ObjectKey{kb}})
			return err
		},
		"get own and B's key": func() error {
			_, err := rawA.Get(ctx, &p2ppb.GetRequest{Keys: []*p2ppb.ObjectKey{ka, kb}})
			return err
		},
		"peer lookup": func() error {
			_, err := peerAsA.LookupAndLock(ctx, &p2ppb.LookupAndLockRequest{Keys: []*p2ppb.ObjectKey{ka}})
			return err
		},
	} {
		if err := call(); status.Code(err) != codes.PermissionDenied {
			t.Errorf("A: %s: %v, want PermissionDenied", name, err)
		} else if strings.Contains(err.Error(), secretA) {
			t.Errorf("A: %s: the error shows the token: %v", name, err)
		}
	}
	for name, c := range map[string]*client.Client{"no token": as(""), "unknown token": as("not-a-known-token-0123456789")} {
		if _, err := c.Get(ctx, kb, true); status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s: get: %v, want Unauthenticated", name, err)
		}
		if _, err := c.Put(ctx, saltKey(3, "tenantB"), []byte("x")); status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s: put: %v, want Unauthenticated", name, err)
		}
	}
	// Nothing changed: B's key holds B's bytes, unpinned; nothing else was stored.
	if ch, err := b.Get(ctx, kb, true); err != nil || !bytes.Equal(ch.Payload, valB) {
		t.Fatalf("B's key after A's attempts: %v %q", err, ch.GetPayload()[:min(16, len(ch.GetPayload()))])
	}
	if u := e.Usage(); u.SlotsUsed != 2 || saltLocks(e, 1, "tenantB") != 0 {
		t.Fatalf("after refused calls: %d entries, %d locks", u.SlotsUsed, saltLocks(e, 1, "tenantB"))
	}
	if c := n.Stats().Counters; c["auth_denied"] != 11 || c["auth_failed"] != 4 {
		t.Errorf("auth_denied %d (want 11), auth_failed %d (want 4)", c["auth_denied"], c["auth_failed"])
	}
	// A's own key: read and delete allowed.
	if ch, err := a.Get(ctx, ka, true); err != nil || !bytes.Equal(ch.Payload, valA) {
		t.Fatalf("A reads its key: %v", err)
	}
	// Admin lists everything, reads stats, force-deletes under a lease.
	if l, err := admin.List(ctx, "", 0); err != nil || len(l.Entries) != 2 {
		t.Fatalf("admin list: %v %v", l, err)
	}
	if _, err := admin.Stats(ctx); err != nil {
		t.Fatal(err)
	}
	cb, err := grpc.NewClient(n.Peer().Control, from, grpc.WithTransportCredentials(insecure.NewCredentials()), client.WithToken(secretB))
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	if r, err := p2ppb.NewCacheClient(cb).LookupAndLock(ctx, &p2ppb.LookupAndLockRequest{Keys: []*p2ppb.ObjectKey{kb}}); err != nil || r.LeaseId == 0 {
		t.Fatalf("B locks its key: %v %v", r, err)
	} else if rel, err := rawA.Unlock(ctx, &p2ppb.UnlockRequest{LeaseId: r.LeaseId}); err != nil || rel.Released {
		t.Fatalf("A released B's lease: %v %v", rel, err)
	}
	if ok, err := admin.Delete(ctx, kb, true); err != nil || !ok {
		t.Fatalf("admin force-delete under a lease: %v %v", ok, err)
	}
	// The peer service answers the peer token.
	cp, err := grpc.NewClient(n.Peer().Control, from, grpc.WithTransportCredentials(insecure.NewCredentials()), client.WithToken(secretPeer))
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	peerAPI := p2ppb.NewPeerClient(cp)
	if r, err := peerAPI.LookupAndLock(ctx, &p2ppb.LookupAndLockRequest{Keys: []*p2ppb.ObjectKey{ka}}); err != nil || r.LeaseId == 0 {
		t.Fatalf("peer lookup with the peer token: %v %v", r, err)
	} else if rel, err := peerAPI.Unlock(ctx, &p2ppb.UnlockRequest{LeaseId: r.LeaseId}); err != nil || !rel.Released {
		t.Fatalf("peer unlock: %v %v", rel, err)
	}
	if _, err := p2ppb.NewCacheClient(cp).Get(ctx, &p2ppb.GetRequest{Keys: []*p2ppb.ObjectKey{ka}}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("the peer token read through the cache service: %v", err)
	}
}

// Two nodes checking tokens: b fetches a's chunk with the peer token; without it the fetch
// is a miss (a refused the lookup) and b's data is not a's.
func TestPeerToken(t *testing.T) {
	ea := newEngine(t, nil)
	oa := fastOptions("a", nil)
	oa.Tokens = testTokens(t)
	a := startNode(t, ea, oa)
	ca, err := client.Dial(a.Peer().Control, 10*time.Second, client.WithToken(secretA))
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	ctx := context.Background()
	for i := range 2 {
		if o, err := ca.Put(ctx, saltKey(i, "tenantA"), payloadN(i, 4096)); !o.Stored || err != nil {
			t.Fatal(o, err)
		}
	}
	for _, c := range []struct {
		peerToken string
		i         int
		want      p2ppb.Source
	}{{"", 0, p2ppb.Source_SOURCE_MISS}, {secretPeer, 1, p2ppb.Source_SOURCE_PEER}} {
		ob := fastOptions("b", NewStaticDirectory(a.Peer()))
		ob.Tokens, ob.PeerToken = testTokens(t), c.peerToken
		b := startNode(t, newEngine(t, nil), ob)
		cb, err := client.Dial(b.Peer().Control, 10*time.Second, client.WithToken(secretA))
		if err != nil {
			t.Fatal(err)
		}
		ch, err := cb.Get(ctx, saltKey(c.i, "tenantA"), false)
		cb.Close()
		if err != nil || ch.Source != c.want || (c.want == p2ppb.Source_SOURCE_PEER && !bytes.Equal(ch.Payload, payloadN(c.i, 4096))) {
			t.Fatalf("with peer token %v: %v %v, want %v", c.peerToken != "", ch.GetSource(), err, c.want)
		}
	}
	if c := a.Stats().Counters; c["auth_failed"] != 1 {
		t.Fatalf("a: auth_failed %d, want 1 (b's lookup without a token)", c["auth_failed"])
	}
}

// Leases are capped per client and in all: a client past its cap gets misses, counted as
// leases_refused; another client still gets leases until the total cap.
func TestLeaseCaps(t *testing.T) {
	e := newEngine(t, nil)
	o := fastOptions("a", nil)
	o.Tokens = testTokens(t)
	o.Limits.MaxLeasesPerClient, o.Limits.MaxLeases = 5, 8
	n := startNode(t, e, o)
	lockAs := func(secret string, tries int) (granted int) {
		cc, err := grpc.NewClient(n.Peer().Control, grpc.WithTransportCredentials(insecure.NewCredentials()), client.WithToken(secret))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		api := p2ppb.NewCacheClient(cc)
		for range tries {
			r, err := api.LookupAndLock(context.Background(), &p2ppb.LookupAndLockRequest{Keys: []*p2ppb.ObjectKey{saltKey(1, "tenantA")}, LeaseMs: 60000})
			if err != nil {
				t.Fatal(err)
			}
			if r.LeaseId != 0 {
				granted++
			}
		}
		return granted
	}
	ca := dialAs(t, n, secretAdmin)
	if o, err := ca.Put(context.Background(), saltKey(1, "tenantA"), []byte("v")); !o.Stored || err != nil {
		t.Fatal(o, err)
	}
	if g := lockAs(secretA, 20); g != 5 {
		t.Fatalf("client a got %d leases, cap 5", g)
	}
	if g := lockAs(secretAdmin, 20); g != 3 {
		t.Fatalf("client ops got %d leases, 3 left of the total 8", g)
	}
	c := n.Stats().Counters
	if c["leases_refused"] != 15+17 || c["leases_active"] != 8 {
		t.Fatalf("leases_refused %d (want 32), active %d (want 8)", c["leases_refused"], c["leases_active"])
	}
	if m := saltLocks(e, 1, "tenantA"); m != 8 {
		t.Fatalf("%d pins, want 8", m)
	}
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(n.metrics.reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "rbctl_node_leases_refused_total 32\n") {
		t.Fatalf("no rbctl_node_leases_refused_total 32 in /metrics")
	}
}

func dialAs(t testing.TB, n *Node, secret string) *client.Client {
	t.Helper()
	c, err := client.Dial(n.Peer().Control, 10*time.Second, client.WithToken(secret))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// saltLocks is the engine's lock count of saltKey(i, salt).
func saltLocks(e *engine.Engine, i int, salt string) uint32 {
	m, _ := e.Lookup(engine.ObjectKey("m/odel", 0, hashOf(i), salt))
	return m.Locks
}

// Issue 28's row "20,000 leases from one client", with the default caps and no tokens (the
// client is its address): 1024 are granted, the rest are misses counted as refused, and
// another client still gets a lease.
func TestLeaseFloodFromOneClient(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 20,000 calls")
	}
	e := newEngine(t, nil)
	n := startNode(t, e, fastOptions("a", nil))
	c := dial(t, n)
	put(t, c, 1, 100)
	cc := rawConn(t, n.Peer().Control)
	api := p2ppb.NewCacheClient(cc)
	var granted atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 20000 / 16 {
				r, err := api.LookupAndLock(context.Background(), &p2ppb.LookupAndLockRequest{Keys: []*p2ppb.ObjectKey{wireKeyN(1)}, LeaseMs: 60000})
				if err != nil {
					t.Error(err)
					return
				}
				if r.LeaseId != 0 {
					granted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	st := n.Stats().Counters
	t.Logf("20000 lookups from one client in %v: %d leases granted, %d refused, %d pins on the key", took.Round(time.Millisecond),
		granted.Load(), st["leases_refused"], locks(e, 1))
	if granted.Load() != 1024 || st["leases_refused"] != 20000-1024 || locks(e, 1) != 1024 {
		t.Fatalf("granted %d, refused %d, pins %d; want 1024, 18976, 1024", granted.Load(), st["leases_refused"], locks(e, 1))
	}
	// Another client (another token's name would do; here a node lock as the node itself).
	if l := n.leases.lock([]keyT{keyN(1)}, time.Second, "ip:10.0.0.9"); l == nil {
		t.Fatal("another client got no lease")
	}
}
