package resp

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// ConnLimits bound a server's connections the way the node bounds its gRPC plane
// (p2p/node/limits.go): what is over a bound is closed at accept, never left waiting in the
// listen backlog, so a crowd of idle connections cannot lock other clients out. Zero fields
// take the defaults named on each; docs/resp.md lists them.
type ConnLimits struct {
	MaxConns int // connections open at once (default 1024); more are closed at accept
	// PerAddr: connections one IP address may hold that have not authenticated (default 128).
	// With authentication off no connection ever authenticates, so it bounds all of them.
	PerAddr int
	// Reserved: of MaxConns, kept for connections that authenticated (default an eighth);
	// only with authentication on.
	Reserved int
	// AuthTimeout: with authentication on, a connection must authenticate within this of
	// its accept or it is closed (default 10 s).
	AuthTimeout time.Duration
	// MaxAuthFailures: the connection is closed after this many failed AUTHs (default 3);
	// each failure is answered after AuthFailDelay (default 100 ms; negative: none).
	MaxAuthFailures int
	AuthFailDelay   time.Duration
	// Idle: an authenticated connection (any, with authentication off) without a request
	// for this long is closed (0: never, as valkey's default `timeout 0`; LMCache's client
	// never reconnects). TCP keepalive finds dead peers instead.
	Idle time.Duration
	// WriteTimeout: a reply write that makes no progress for this long closes the connection
	// (default 60 s): a client that sends requests and reads none of the replies cannot hold
	// its request's bytes (and the server's budget) for ever.
	WriteTimeout time.Duration
	// KeepAlive: TCP keepalive of accepted connections: the first probe after this much
	// silence (default 60 s), then every 15 s, 4 unanswered probes close it.
	KeepAlive time.Duration
}

func (l ConnLimits) withDefaults() ConnLimits {
	def := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	def(&l.MaxConns, 1024)
	def(&l.PerAddr, 128)
	def(&l.Reserved, l.MaxConns/8)
	def(&l.MaxAuthFailures, 3)
	if l.Reserved >= l.MaxConns {
		l.Reserved = l.MaxConns - 1
	}
	if l.AuthTimeout <= 0 {
		l.AuthTimeout = 10 * time.Second
	}
	if l.AuthFailDelay == 0 {
		l.AuthFailDelay = 100 * time.Millisecond
	}
	if l.KeepAlive <= 0 {
		l.KeepAlive = time.Minute
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = time.Minute
	}
	return l
}

// admitListener closes at accept what is over the ConnLimits (it never blocks in Accept).
type admitListener struct {
	net.Listener
	lim     ConnLimits
	auth    bool // the server checks AUTH: unauthenticated connections are bounded apart
	refused *atomic.Int64

	mu     sync.Mutex
	open   int // all connections
	unauth int // of them, not (yet) authenticated
	byIP   map[netip.Addr]int
}

func newAdmitListener(l net.Listener, lim ConnLimits, auth bool, refused *atomic.Int64) *admitListener {
	return &admitListener{Listener: l, lim: lim, auth: auth, refused: refused, byIP: map[netip.Addr]int{}}
}

func (al *admitListener) Accept() (net.Conn, error) {
	for {
		c, err := al.Listener.Accept()
		if err != nil {
			return nil, err
		}
		var ip netip.Addr
		if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
			ip = ap.Addr().Unmap()
		}
		if al.admit(ip) {
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: al.lim.KeepAlive, Interval: 15 * time.Second, Count: 4})
			}
			return &admitConn{Conn: c, al: al, ip: ip}, nil
		}
		al.refused.Add(1)
		c.Close()
	}
}

func (al *admitListener) admit(ip netip.Addr) bool {
	al.mu.Lock()
	defer al.mu.Unlock()
	if al.open >= al.lim.MaxConns || al.byIP[ip] >= al.lim.PerAddr {
		return false
	}
	if al.auth && al.unauth >= al.lim.MaxConns-al.lim.Reserved {
		return false
	}
	al.open++
	al.unauth++
	al.byIP[ip]++
	return true
}

// admitConn is an admitted connection; authenticated moves it out of the unauthenticated
// bounds (PerAddr, the room kept by Reserved).
type admitConn struct {
	net.Conn
	al     *admitListener
	ip     netip.Addr
	authed bool // under al.mu
	once   sync.Once
}

func (c *admitConn) authenticated() {
	al := c.al
	al.mu.Lock()
	defer al.mu.Unlock()
	if c.authed {
		return
	}
	c.authed = true
	al.unauth--
	al.dropIP(c.ip)
}

func (al *admitListener) dropIP(ip netip.Addr) {
	if al.byIP[ip]--; al.byIP[ip] <= 0 {
		delete(al.byIP, ip)
	}
}

func (c *admitConn) Close() error {
	c.once.Do(func() {
		al := c.al
		al.mu.Lock()
		al.open--
		if !c.authed {
			al.unauth--
			al.dropIP(c.ip)
		}
		al.mu.Unlock()
	})
	return c.Conn.Close()
}
