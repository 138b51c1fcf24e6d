package dataplane

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// Admission of connections (issue 28): of MaxConns slots, Reserved are kept for known
// peers — an address Trusted names (a cluster member) or one that has already fetched a
// chunk of a live lease on this server (proven). Any other connection is a stranger: it
// takes one of the other slots, at most StrangersPerIP from one address, and is closed
// unless it fetches a chunk of a live lease within ProveTimeout of its hello. Idle
// connections that only said hello therefore hold a few slots for a few seconds, never the
// slots of a peer. An address is only as good an identity as the network makes it: with
// TLS, a peer's certificate is the better one (docs/p2p.md).

// provenCap bounds the proven-address set; when full, an arbitrary entry makes room.
const provenCap = 4096

type admission struct {
	cfg *ServerConfig

	mu        sync.Mutex
	strangers int
	perIP     map[netip.Addr]int
	proven    map[netip.Addr]struct{}
}

func newAdmission(cfg *ServerConfig) *admission {
	return &admission{cfg: cfg, perIP: map[netip.Addr]int{}, proven: map[netip.Addr]struct{}{}}
}

// remoteIP is a connection's peer address without port (the zero Addr if it has none).
func remoteIP(c net.Conn) netip.Addr {
	if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// known reports whether ip may use the reserved slots.
func (a *admission) known(ip netip.Addr) bool {
	a.mu.Lock()
	_, ok := a.proven[ip]
	a.mu.Unlock()
	return ok || (a.cfg.Trusted != nil && ip.IsValid() && a.cfg.Trusted(ip))
}

// stranger takes a stranger slot for ip; false when none is free for it.
func (a *admission) stranger(ip netip.Addr) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.strangers >= a.cfg.MaxConns-a.cfg.Reserved || a.perIP[ip] >= a.cfg.StrangersPerIP {
		return false
	}
	a.strangers++
	a.perIP[ip]++
	return true
}

// release gives a stranger slot back.
func (a *admission) release(ip netip.Addr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.strangers--
	if a.perIP[ip]--; a.perIP[ip] <= 0 {
		delete(a.perIP, ip)
	}
}

// prove records ip as a peer that fetched a chunk.
func (a *admission) prove(ip netip.Addr) {
	if !ip.IsValid() {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.proven[ip]; ok {
		return
	}
	if len(a.proven) >= provenCap {
		for k := range a.proven {
			delete(a.proven, k)
			break
		}
	}
	a.proven[ip] = struct{}{}
}

// connState is what a handler knows of its connection's admission.
type connState struct {
	ip       netip.Addr
	stranger bool      // holds a stranger slot: must prove itself by proveBy
	proveBy  time.Time // set at the hello
}

// deadline is the read deadline for the next request.
func (cs *connState) deadline(idle time.Duration) time.Time {
	d := time.Now().Add(idle)
	if cs.stranger && cs.proveBy.Before(d) {
		return cs.proveBy
	}
	return d
}
