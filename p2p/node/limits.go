package node

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// Limits bound what clients can make a node hold (issue 28): leases, control-plane
// connections and how long an idle one lives, and the data plane's admission of strangers
// (dataplane.ServerConfig). A client is its token's name when the node checks tokens (a
// token with the peer right: its IP address, since the nodes of a cluster share one), else
// its IP address. Zero fields take the defaults named on each; docs/p2p.md lists them.
type Limits struct {
	MaxLeases          int // leases held at once by all clients (default 16384)
	MaxLeasesPerClient int // leases one client holds at once (default 1024)

	ControlMaxConns  int           // control-plane connections at once (default 1024); more are closed at accept
	ControlPerIP     int           // of them from one address that is not a cluster member (default 64)
	ControlReserved  int           // of ControlMaxConns, kept for cluster members (default an eighth)
	HandshakeTimeout time.Duration // HTTP/2 preface and settings must arrive within this (default 5 s)
	ControlIdle      time.Duration // a control connection without a call for this long is closed (default 5 min)
	// KeepaliveTime: a connection silent this long is pinged and closed unless the ping is
	// answered within KeepaliveTimeout (default 1 min and 20 s): a peer that only sent the
	// preface and settings holds its connection for at most their sum.
	KeepaliveTime, KeepaliveTimeout time.Duration

	DataReserved       int           // data-plane slots kept for members and proven peers (default a quarter of DataMaxConns)
	DataStrangersPerIP int           // data-plane stranger slots one address may hold (default 8)
	DataProveTimeout   time.Duration // a stranger data connection must fetch a chunk within this of its hello (default 5 s)
}

func (l *Limits) defaults(dataConns int) error {
	def := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	def(&l.MaxLeases, 16384)
	def(&l.MaxLeasesPerClient, 1024)
	def(&l.ControlMaxConns, 1024)
	def(&l.ControlPerIP, 64)
	def(&l.ControlReserved, l.ControlMaxConns/8)
	for _, d := range []struct {
		p *time.Duration
		v time.Duration
	}{{&l.HandshakeTimeout, 5 * time.Second}, {&l.ControlIdle, 5 * time.Minute}, {&l.KeepaliveTime, time.Minute},
		{&l.KeepaliveTimeout, 20 * time.Second}, {&l.DataProveTimeout, 5 * time.Second}} {
		if *d.p <= 0 {
			*d.p = d.v
		}
	}
	if l.MaxLeasesPerClient > l.MaxLeases {
		return fmt.Errorf("node: %d leases per client above %d in all", l.MaxLeasesPerClient, l.MaxLeases)
	}
	if l.ControlReserved >= l.ControlMaxConns {
		return fmt.Errorf("node: %d reserved control connections of %d leave none for clients", l.ControlReserved, l.ControlMaxConns)
	}
	if dataConns > 0 && l.DataReserved >= dataConns {
		return fmt.Errorf("node: %d reserved data connections of %d leave none for new peers", l.DataReserved, dataConns)
	}
	return nil
}

// serverOptions are the gRPC server's connection bounds.
func (l *Limits) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ConnectionTimeout(l.HandshakeTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: l.ControlIdle,
			Time: l.KeepaliveTime, Timeout: l.KeepaliveTimeout}),
		// Clients may ping every 10 s, idle or not (gRPC's default is 5 min, and a client
		// pinging faster is sent away with "too_many_pings").
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
}

// trusted reports whether ip is the host of a cluster member (its control or data address):
// it may use the reserved connection slots of both planes.
func (n *Node) trusted(ip netip.Addr) bool {
	d := n.opts.Directory
	if d == nil || !ip.IsValid() {
		return false
	}
	for _, p := range d.Peers() {
		for _, a := range []string{p.Control, p.Data} {
			if ap, err := netip.ParseAddrPort(a); err == nil && ap.Addr().Unmap() == ip {
				return true
			}
		}
	}
	return false
}

// limitListener closes at accept what is over its bounds (never blocks in Accept, so a
// crowd of idle connections cannot keep a member's connection waiting in the backlog).
type limitListener struct {
	net.Listener
	l       *Limits
	trusted func(netip.Addr) bool
	refused *atomic.Int64

	mu   sync.Mutex
	open int
	byIP map[netip.Addr]int
}

func (n *Node) limitControl(ln net.Listener) net.Listener {
	return &limitListener{Listener: ln, l: &n.opts.Limits, trusted: n.trusted, refused: &n.c.ctlRefused, byIP: map[netip.Addr]int{}}
}

func (ll *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		var ip netip.Addr
		if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
			ip = ap.Addr().Unmap()
		}
		member := ll.trusted(ip)
		if ll.admit(ip, member) {
			return &limitedConn{Conn: c, ll: ll, ip: ip}, nil
		}
		ll.refused.Add(1)
		c.Close()
	}
}

func (ll *limitListener) admit(ip netip.Addr, member bool) bool {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if ll.open >= ll.l.ControlMaxConns {
		return false
	}
	if !member && (ll.open >= ll.l.ControlMaxConns-ll.l.ControlReserved || ll.byIP[ip] >= ll.l.ControlPerIP) {
		return false
	}
	ll.open++
	ll.byIP[ip]++
	return true
}

type limitedConn struct {
	net.Conn
	ll   *limitListener
	ip   netip.Addr
	once sync.Once
}

func (c *limitedConn) Close() error {
	c.once.Do(func() {
		c.ll.mu.Lock()
		c.ll.open--
		if c.ll.byIP[c.ip]--; c.ll.byIP[c.ip] <= 0 {
			delete(c.ll.byIP, c.ip)
		}
		c.ll.mu.Unlock()
	})
	return c.Conn.Close()
}
