package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/rbctl/rbctl/p2p"
	"github.com/rbctl/rbctl/p2p/client"
	"github.com/rbctl/rbctl/p2p/dataplane"
	"github.com/rbctl/rbctl/p2p/p2ppb"
	"github.com/rbctl/rbctl/p2p/p2ptest"
	"github.com/rbctl/rbctl/p2p/secure"
)

// pki is a cluster CA and a foreign one, writing certificates into one directory.
type pki struct {
	t         testing.TB
	dir       string
	ca, other *secure.CA
}

func newPKI(t testing.TB) *pki {
	t.Helper()
	now := time.Now()
	ca, err := secure.NewCA("cluster", now.Add(-time.Hour), now.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	other, err := secure.NewCA("other", now.Add(-time.Hour), now.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return &pki{t: t, dir: t.TempDir(), ca: ca, other: other}
}

// material issues name's certificate from the cluster CA for hosts and loads it.
func (p *pki) material(name string, hosts ...string) *secure.Material {
	p.t.Helper()
	f, err := p.ca.WriteFiles(p.dir, name, hosts)
	if err != nil {
		p.t.Fatal(err)
	}
	m, err := secure.Load(f, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	return m
}

// clientConfig trusts the cluster CA and presents cert (nil: none).
func (p *pki) clientConfig(cert *tls.Certificate) *tls.Config {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.ca.PEM)
	return &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if cert == nil {
				return &tls.Certificate{}, nil
			}
			return cert, nil
		}}
}

func (p *pki) pair(ca *secure.CA, notBefore, notAfter time.Time) *tls.Certificate {
	p.t.Helper()
	c, k, err := ca.Issue("client", nil, notBefore, notAfter)
	if err != nil {
		p.t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(c, k)
	if err != nil {
		p.t.Fatal(err)
	}
	return &pair
}

// rawDataFetch dials the data plane over TLS with cfg through dial, sends the hello and a
// request for chunk 0 of lease, and returns the chunk's bytes or the first error.
func rawDataFetch(dial func(network, addr string, timeout time.Duration) (net.Conn, error), addr string, cfg *tls.Config, lease uint64) ([]byte, error) {
	raw, err := dial("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(5 * time.Second))
	cfg = cfg.Clone()
	cfg.ServerName, _, _ = net.SplitHostPort(addr)
	c := tls.Client(raw, cfg)
	hello := binary.LittleEndian.AppendUint16([]byte(dataplane.Magic), dataplane.Version)
	hello = binary.LittleEndian.AppendUint16(hello, 0)
	if _, err := c.Write(hello); err != nil {
		return nil, err
	}
	ack := make([]byte, 12)
	if _, err := io.ReadFull(c, ack); err != nil {
		return nil, err
	}
	req, _ := dataplane.AppendRequest(nil, dataplane.Request{Lease: lease, Indexes: []uint32{0}})
	if _, err := c.Write(req); err != nil {
		return nil, err
	}
	h, err := dataplane.ReadChunkHeader(c, 1<<30)
	if err != nil {
		return nil, err
	}
	if h.Status != dataplane.StatusOK {
		return nil, &dataplane.ChunkError{Index: h.Index, Status: h.Status}
	}
	p := make([]byte, h.Size)
	_, err = io.ReadFull(c, p)
	return p, err
}

// TestTLSRefusesOutsidersOnBothPlanes (root with ip; skipped otherwise): a node serves TLS
// in one network namespace; from another, a client without a certificate, with one of
// another CA and with an expired one of the cluster's CA is refused on the control plane
// (a put, a get, a list) and on a raw data-plane dial that asks for a leased chunk. Nothing
// is written or read: the node's counters and keys stay as the legitimate client left
// them, and the same calls with a valid certificate succeed.
func TestTLSRefusesOutsidersOnBothPlanes(t *testing.T) {
	nt := p2ptest.NewNet(t, 2)
	p := newPKI(t)
	srv := p.material("node", nt.Nodes[0].IP)
	o := fastOptions("a", nil)
	o.TLS = srv
	n := startNodeIn(t, nt, 0, newEngine(t, nil), o, "0", "0")

	dialer := nt.Dialer(1)
	grpcClient := func(cfg *tls.Config) p2ppb.CacheClient {
		cc, err := grpc.NewClient("passthrough:///"+n.Peer().Control,
			grpc.WithTransportCredentials(credentials.NewTLS(cfg)),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
				return dialer("tcp", addr, 5*time.Second)
			}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return p2ppb.NewCacheClient(cc)
	}
	ctx := context.Background()
	now := time.Now()
	good := grpcClient(p.clientConfig(p.pair(p.ca, now.Add(-time.Hour), now.Add(time.Hour))))
	if _, err := good.Put(ctx, &p2ppb.PutRequest{Keys: []*p2ppb.ObjectKey{wireKeyN(1)}, Payloads: [][]byte{payloadN(1, 4096)}}); err != nil {
		t.Fatalf("put with a valid certificate: %v", err)
	}
	lk, err := good.LookupAndLock(ctx, &p2ppb.LookupAndLockRequest{Keys: []*p2ppb.ObjectKey{wireKeyN(1)}})
	if err != nil || lk.LeaseId == 0 {
		t.Fatalf("lookup-and-lock with a valid certificate: lease %v, %v", lk.GetLeaseId(), err)
	}
	before := n.Stats().Counters

	outsiders := []struct {
		name string
		cert *tls.Certificate
	}{
		{"no certificate", nil},
		{"another CA's certificate", p.pair(p.other, now.Add(-time.Hour), now.Add(time.Hour))},
		{"expired certificate of the cluster CA", p.pair(p.ca, now.Add(-48*time.Hour), now.Add(-time.Hour))},
	}
	for _, c := range outsiders {
		cfg := p.clientConfig(c.cert)
		api := grpcClient(cfg)
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, perr := api.Put(cctx, &p2ppb.PutRequest{Keys: []*p2ppb.ObjectKey{wireKeyN(2)}, Payloads: [][]byte{payloadN(2, 4096)}})
		_, gerr := api.Get(cctx, &p2ppb.GetRequest{Keys: []*p2ppb.ObjectKey{wireKeyN(1)}})
		_, lerr := api.List(cctx, &p2ppb.ListRequest{})
		cancel()
		for what, err := range map[string]error{"put": perr, "get": gerr, "list": lerr} {
			if status.Code(err) != codes.Unavailable { // the refusal's alert, or a broken pipe when a write wins the race
				t.Errorf("%s: gRPC %s: %v, want Unavailable (refused handshake)", c.name, what, err)
			}
		}
		b, derr := rawDataFetch(dialer, n.Peer().Data, cfg, lk.LeaseId)
		if derr == nil {
			t.Errorf("%s: data plane: %d bytes, %v; want a refused handshake", c.name, len(b), derr)
		}
		t.Logf("%s: refused: gRPC %v; data plane %v", c.name, perr, derr)
	}
	// The server counts a refused handshake after it sent the alert the client already read.
	eventually(t, "every refused data-plane handshake counted", func() bool {
		return n.Stats().Counters["data_tls_failed"] >= int64(len(outsiders))
	})
	after := n.Stats().Counters
	for _, k := range []string{"puts", "gets", "put_bytes", "served_chunks", "served_bytes", "leases_granted", "deletes"} {
		if after[k] != before[k] {
			t.Errorf("counter %s went from %d to %d while only refused clients called", k, before[k], after[k])
		}
	}
	if after["data_tls_failed"] != int64(len(outsiders)) { // each refused in the handshake, not later
		t.Errorf("data_tls_failed %d, want %d", after["data_tls_failed"], len(outsiders))
	}
	if ents, _ := n.List("", 0); len(ents) != 1 {
		t.Errorf("the node holds %d keys, want the 1 the valid client put", len(ents))
	}
	// The control: the same raw data-plane fetch with a valid certificate gets the bytes.
	b, err := rawDataFetch(dialer, n.Peer().Data, p.clientConfig(p.pair(p.ca, now.Add(-time.Hour), now.Add(time.Hour))), lk.LeaseId)
	if err != nil || !bytes.Equal(b, payloadN(1, 4096)) {
		t.Fatalf("data-plane fetch with a valid certificate: %d bytes, %v", len(b), err)
	}
}

// lateDirectory is a directory whose peers are given after the node using it has started
// (before that it has none); safe for the node's goroutines to read meanwhile (assigning
// the node's Directory after Start raced with its accept loop, which asks it who is trusted).
type lateDirectory struct {
	d atomic.Pointer[StaticDirectory]
}

func (l *lateDirectory) set(d *StaticDirectory) { l.d.Store(d) }

func (l *lateDirectory) Candidates(id uint64) []p2p.Peer {
	if d := l.d.Load(); d != nil {
		return d.Candidates(id)
	}
	return nil
}

func (l *lateDirectory) Peers() []p2p.Peer {
	if d := l.d.Load(); d != nil {
		return d.Peers()
	}
	return nil
}

func (l *lateDirectory) Admitted(uint64) {}
func (l *lateDirectory) Evicted(uint64)  {}

// startTLSNode starts a node on loopback with m.
func startTLSNode(t testing.TB, m *secure.Material, name string, dir p2p.Directory) *Node {
	o := fastOptions(name, dir)
	o.TLS = m
	return startNode(t, newEngine(t, nil), o)
}

// TestTLSPeersFetchAndStrangersCannot: two nodes with certificates of the cluster CA fetch
// from each other over TLS; a third with a certificate of another CA (trusting the
// cluster's CA) gets misses, counted as peer failures, and the holder serves it nothing.
func TestTLSPeersFetchAndStrangersCannot(t *testing.T) {
	p := newPKI(t)
	var aDir lateDirectory // b's address is known once b has started
	a := startTLSNode(t, p.material("a", "127.0.0.1"), "a", &aDir)
	b := startTLSNode(t, p.material("b", "127.0.0.1"), "b", NewStaticDirectory(a.Peer()))
	aDir.set(NewStaticDirectory(b.Peer()))
	ca, err := client.DialTLS(a.Peer().Control, 10*time.Second, p.material("client-a"))
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	cb, err := client.DialTLS(b.Peer().Control, 10*time.Second, p.material("client-b"))
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	put(t, ca, 1, 8192)
	put(t, cb, 2, 8192)
	if ch := get(t, cb, 1); ch.Source != p2ppb.Source_SOURCE_PEER || ch.Peer != "a" {
		t.Fatalf("b's get of a's key: %s from %q", ch.Source, ch.Peer)
	}
	if ch := get(t, ca, 2); ch.Source != p2ppb.Source_SOURCE_PEER || ch.Peer != "b" {
		t.Fatalf("a's get of b's key: %s from %q", ch.Source, ch.Peer)
	}

	// The stranger's certificate is another CA's; its CA file holds both CAs, so it
	// trusts the cluster's nodes and only its own certificate stands between it and the
	// chunks.
	odir := t.TempDir()
	sf, err := p.other.WriteFiles(odir, "stranger", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sf.CA, append(append([]byte{}, p.other.PEM...), p.ca.PEM...), 0o644); err != nil {
		t.Fatal(err)
	}
	sm, err := secure.Load(sf, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := startTLSNode(t, sm, "stranger", NewStaticDirectory(a.Peer()))
	before := a.Stats().Counters
	res, err := s.Get(context.Background(), []keyT{keyN(1)}, false)
	if err != nil || res[0].Source != Miss {
		t.Fatalf("the stranger's get of a's key: source %d, %v; want a miss", res[0].Source, err)
	}
	if sc := s.Stats().Counters; sc["peer_refused"]+sc["peer_errors"] == 0 {
		t.Errorf("the stranger's failed fetch is not counted: %v", sc)
	}
	after := a.Stats().Counters
	for _, k := range []string{"served_chunks", "leases_granted"} {
		if after[k] != before[k] {
			t.Errorf("a served the stranger: %s went from %d to %d", k, before[k], after[k])
		}
	}
}
