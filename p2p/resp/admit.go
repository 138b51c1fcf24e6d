package resp

import (
	"io"
	"log/slog"
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
// With authentication on, a newcomer that finds its address's (or the server's) room for
// unauthenticated connections full takes the place of the oldest unauthenticated one there,
// which is closed: a client that authenticates at once (LMCache's, which never reconnects)
// gets in even beside a crowd of idle strangers on its own host, who keep at most PerAddr
// places and lose the oldest first. Without authentication nothing tells a stranger from a
// client, so what is over a bound is refused.
type admitListener struct {
	net.Listener
	lim     ConnLimits
	auth    bool // the server checks AUTH: unauthenticated connections are bounded apart
	refused *atomic.Int64
	evicted *atomic.Int64
	log     *slog.Logger // refusals, at most one line per refusalLogEvery (nil: none)
	logged  atomic.Int64 // unix nanoseconds of the last refusal logged

	mu      sync.Mutex
	open    int // all connections
	unauth  int // of them, not (yet) authenticated
	byIP    map[netip.Addr]int
	pending []*admitConn // unauthenticated connections, oldest first (auth only)
}

func newAdmitListener(l net.Listener, lim ConnLimits, auth bool, refused, evicted *atomic.Int64, log *slog.Logger) *admitListener {
	return &admitListener{Listener: l, lim: lim, auth: auth, refused: refused, evicted: evicted, log: log, byIP: map[netip.Addr]int{}}
}

// refusalReply is what a connection refused at accept reads before the close: valkey's
// words when its maxclients is reached, so that redis-cli and redis-benchmark print a reason
// instead of "Server closed the connection".
const refusalReply = "-ERR max number of clients reached\r\n"

// refusalLogEvery spaces the log lines about refused connections: a crowd of thousands
// makes one line per interval, with the count.
const refusalLogEvery = 10 * time.Second

// refuse answers c with refusalReply and closes it; the write goes to a fresh socket's empty
// send buffer, and a deadline bounds it all the same, so that accepting never waits on a
// refused peer.
func (al *admitListener) refuse(c net.Conn, ip netip.Addr) {
	n := al.refused.Add(1)
	c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	io.WriteString(c, refusalReply)
	c.Close()
	now := time.Now().UnixNano()
	if last := al.logged.Load(); al.log != nil && now-last >= int64(refusalLogEvery) && al.logged.CompareAndSwap(last, now) {
		al.log.Warn("RESP connection refused at accept: over the connection limits (answered -ERR max number of clients reached; logged at most every 10 s)",
			"from", ip.String(), "refused_so_far", n, "per_addr", al.lim.PerAddr, "max_conns", al.lim.MaxConns)
	}
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
		ac := &admitConn{Conn: c, al: al, ip: ip}
		ok := false
		for range 4 { // each round closes one victim; a few at most are ever needed
			var victim *admitConn
			if ok, victim = al.admit(ac); ok || victim == nil {
				break
			}
			victim.Close()
			al.evicted.Add(1)
		}
		if ok {
			if tc, isTCP := c.(*net.TCPConn); isTCP {
				tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: al.lim.KeepAlive, Interval: 15 * time.Second, Count: 4})
			}
			return ac, nil
		}
		al.refuse(c, ip)
	}
}

// admit takes ac in, or names the unauthenticated connection it may replace (auth only), or
// refuses it (false, nil).
func (al *admitListener) admit(ac *admitConn) (bool, *admitConn) {
	al.mu.Lock()
	defer al.mu.Unlock()
	ip := ac.ip
	if al.byIP[ip] >= al.lim.PerAddr {
		return false, al.oldest(func(c *admitConn) bool { return c.ip == ip })
	}
	if al.auth && al.unauth >= al.lim.MaxConns-al.lim.Reserved {
		return false, al.oldest(func(*admitConn) bool { return true })
	}
	if al.open >= al.lim.MaxConns {
		return false, al.oldest(func(*admitConn) bool { return true }) // nil: all authenticated
	}
	al.open++
	al.unauth++
	al.byIP[ip]++
	if al.auth {
		al.pending = append(al.pending, ac)
	}
	return true, nil
}

// oldest is the oldest unauthenticated connection match accepts (nil without auth, or none).
func (al *admitListener) oldest(match func(*admitConn) bool) *admitConn {
	if !al.auth {
		return nil
	}
	for _, c := range al.pending {
		if match(c) {
			return c
		}
	}
	return nil
}

// unpend removes c from pending (under al.mu).
func (al *admitListener) unpend(c *admitConn) {
	for i, p := range al.pending {
		if p == c {
			al.pending = append(al.pending[:i], al.pending[i+1:]...)
			return
		}
	}
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
	al.unpend(c)
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
			al.unpend(c)
		}
		al.mu.Unlock()
	})
	return c.Conn.Close()
}
