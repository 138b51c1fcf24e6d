package node

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/rbctl/rbctl/p2p"
	"github.com/rbctl/rbctl/p2p/dataplane"
	"github.com/rbctl/rbctl/p2p/p2ppb"
)

// peerMsgBytes bounds a peer's control-plane answer (256 hits of a few bytes each).
const peerMsgBytes = 1 << 20

// remote is what a node keeps per peer: a lazily dialled gRPC connection (gRPC reconnects it
// with its own backoff), idle data-plane connections, and this node's own backoff after
// failures so that a dead peer costs nothing until its retry time.
type remote struct {
	peer p2p.Peer
	cc   *grpc.ClientConn
	api  p2ppb.PeerClient

	mu       sync.Mutex
	idle     []*dataplane.Conn
	failures int
	retryAt  time.Time
	latency  time.Duration // recent fetch time per chunk (choice.go); 0: never measured
}

type peerPool struct {
	opts   *Config
	bufs   *payloadPool // payload buffers for fetches (bufpool.go)
	mu     sync.Mutex
	m      map[string]*remote // by control address
	closed bool
}

var errNodeClosed = errors.New("node closed")

func newPeerPool(o *Config) *peerPool {
	return &peerPool{opts: o, m: map[string]*remote{}, bufs: newPayloadPool(poolBytes)}
}

// get returns the peer's entry, creating it (without any network traffic) on first use.
func (p *peerPool) get(peer p2p.Peer) (*remote, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errNodeClosed
	}
	if r, ok := p.m[peer.Control]; ok {
		if peer.Data != "" {
			r.mu.Lock()
			r.peer.Data = peer.Data
			r.mu.Unlock()
		}
		return r, nil
	}
	bc := backoff.DefaultConfig
	bc.BaseDelay, bc.MaxDelay = p.opts.BackoffBase, p.opts.BackoffMax
	cc, err := grpc.NewClient(peer.Control, append(p.opts.peerTokenOptions(),
		grpc.WithTransportCredentials(p.opts.peerCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bc, MinConnectTimeout: p.opts.LookupTimeout}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(peerMsgBytes)))...)
	if err != nil {
		return nil, err
	}
	r := &remote{peer: peer, cc: cc, api: p2ppb.NewPeerClient(cc)}
	p.m[peer.Control] = r
	return r, nil
}

func (p *peerPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for k, r := range p.m {
		r.cc.Close()
		r.mu.Lock()
		for _, c := range r.idle {
			c.Close()
		}
		r.idle = nil
		r.mu.Unlock()
		delete(p.m, k)
	}
}

// usable reports whether the peer is outside its backoff window.
func (r *remote) usable(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !now.Before(r.retryAt)
}

// failed starts or extends the backoff window (doubling, with jitter, up to max).
func (r *remote) failed(o *Config) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures++
	d := o.BackoffBase << min(r.failures-1, 20)
	if d <= 0 || d > o.BackoffMax {
		d = o.BackoffMax
	}
	d = d/2 + rand.N(d/2+1)
	r.retryAt = time.Now().Add(d)
	for _, c := range r.idle {
		c.Close()
	}
	r.idle = nil
}

func (r *remote) succeeded() {
	r.mu.Lock()
	r.failures, r.retryAt = 0, time.Time{}
	r.mu.Unlock()
}

// dataAddr is where to pull from: the directory's data address when it has one (it knows
// how this node reaches the peer, e.g. through a proxy or NAT), else the address the lease
// announced, with the host of the control address when the peer listens on an unspecified
// one (0.0.0.0, ::).
func (r *remote) dataAddr(announced string) string {
	r.mu.Lock()
	known := r.peer.Data
	r.mu.Unlock()
	if known != "" {
		return known
	}
	h, port, err := net.SplitHostPort(announced)
	if err != nil {
		return announced
	}
	if ip := net.ParseIP(h); h == "" || (ip != nil && ip.IsUnspecified()) {
		if ch, _, err := net.SplitHostPort(r.peer.Control); err == nil {
			return net.JoinHostPort(ch, port)
		}
	}
	return announced
}

// conn returns an idle data connection to addr or dials one.
func (r *remote) conn(ctx context.Context, addr string, idleMax time.Duration, dial func(context.Context, string) (*dataplane.Conn, error)) (*dataplane.Conn, error) {
	if c := r.idleConn(idleMax); c != nil {
		return c, nil
	}
	return dial(ctx, addr)
}

// idleConn takes a pooled data connection used within idleMax; nil when there is none.
func (r *remote) idleConn(idleMax time.Duration) *dataplane.Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.idle) > 0 {
		c := r.idle[len(r.idle)-1]
		r.idle = r.idle[:len(r.idle)-1]
		if time.Since(c.LastUsed()) < idleMax {
			return c
		}
		c.Close()
	}
	return nil
}

// keep returns a healthy connection to the idle pool (at most 4 per peer).
func (r *remote) keep(c *dataplane.Conn) {
	c.SetAlloc(nil) // a pooled connection holds no past caller's buffers (chunkAlloc)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.idle) < 4 {
		r.idle = append(r.idle, c)
		return
	}
	c.Close()
}
