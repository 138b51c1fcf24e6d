package resp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"golang.org/x/net/netutil"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/p2p/node"
)

// NodeStore is a Store over a cache node (rbctl serve --resp): keys as EngineStore takes
// them (LMCache's native-connector spelling, stored under the raw-block key of the same
// ObjectKey), a GET that misses here is fetched from a peer (and kept as a replica), a SET
// into a full node evicts by the node's policy, one its admission policy declines is answered
// OK and not stored (a later GET misses), and every operation counts in the node's
// stats and metrics.
type NodeStore struct {
	N   *node.Node
	Ctx context.Context // bounds peer fetches (the node's serving context)
}

var _ Store = NodeStore{}

func (s NodeStore) key(k []byte) (engine.Key, error) { return EngineStore{}.key(k) }

func (s NodeStore) Get(k []byte) ([]byte, bool, error) {
	key, err := s.key(k)
	if err != nil {
		return nil, false, err
	}
	res, err := s.N.Get(s.Ctx, []engine.Key{key}, false)
	if err != nil {
		return nil, false, err
	}
	if res[0].Source == node.Miss {
		return nil, false, nil
	}
	return res[0].Payload, true, nil
}

func (s NodeStore) Set(k, v []byte) error {
	key, err := s.key(k)
	if err != nil {
		return err
	}
	if len(v) == 0 {
		return errors.New("an empty value cannot be stored (a slot holds 1 byte or more)")
	}
	keys := []engine.Key{key}
	return putOrPresent(func() (bool, error) {
		res, err := s.N.Put(keys, [][]byte{v})
		// Declined by the node's admission policy: OK, as a cache that evicts answers a SET
		// whose value it drops later (LMCache's connector fails a whole batch on -ERR).
		return err == nil && (res.Results[0] || len(res.Declined) > 0), err
	}, func() bool { return s.N.Exists(keys)[0] })
}

func (s NodeStore) Exists(k []byte) (bool, error) {
	key, err := s.key(k)
	if err != nil {
		return false, err
	}
	return s.N.Exists([]engine.Key{key})[0], nil
}

func (s NodeStore) Delete(k []byte) (bool, error) {
	key, err := s.key(k)
	if err != nil {
		return false, err
	}
	return s.N.Delete([]engine.Key{key}, false)[0], nil
}

func (s NodeStore) Len() int64 { return s.N.Usage().SlotsUsed }

// Scan is EngineStore's walk over the node's keys (all its devices).
func (s NodeStore) Scan(cursor uint64, count int) ([]string, uint64) {
	return scanKeys(s.N.Entries, cursor, count)
}

func (s NodeStore) MaxValue() int64 { return int64(s.N.MaxPayload()) }

func (s NodeStore) Info() map[string]string {
	u, c := s.N.Usage(), s.N.Stats().Counters
	return map[string]string{
		"rbctl_slots_total":        strconv.FormatInt(u.SlotsTotal, 10),
		"rbctl_slots_used":         strconv.FormatInt(u.SlotsUsed, 10),
		"rbctl_node":               s.N.Peer().Name,
		"rbctl_evicted":            strconv.FormatInt(c["evicted"], 10),
		"rbctl_admission_declined": strconv.FormatInt(c["admission_declined"], 10),
	}
}

// FrontEndOptions configure the RESP listener of a node.
type FrontEndOptions struct {
	Listen   string        // HOST:PORT
	MaxConns int           // connections served at once (0: 1024); more wait in the backlog
	Idle     time.Duration // a connection idle this long is closed (0: 5 minutes)
	Auth     Auth          // nil: no AUTH
	Version  string
	// Ready, when set, is told the bound address.
	Ready func(addr string)
}

// FrontEnd serves a node over RESP2 at o.Listen: requests are bounded by the node's payload
// size (a value is at most twice a slot's payload before it is refused; a request at most
// 64 of them, within 1 GiB), so a client cannot make a connection hold more than that.
func FrontEnd(o FrontEndOptions) node.FrontEnd {
	return func(ctx context.Context, n *node.Node) (func(), error) {
		var lc net.ListenConfig
		l, err := lc.Listen(ctx, "tcp", o.Listen)
		if err != nil {
			return nil, fmt.Errorf("RESP listener: %w", err)
		}
		if o.MaxConns <= 0 {
			o.MaxConns = 1024
		}
		if o.Idle <= 0 {
			o.Idle = 5 * time.Minute
		}
		if o.Ready != nil {
			o.Ready(l.Addr().String())
		}
		maxVal := int64(n.MaxPayload())
		srv := &Server{Store: NodeStore{N: n, Ctx: ctx}, Auth: o.Auth, Tokens: n.Tokens(), Version: o.Version,
			Limits: Limits{MaxBulk: 2 * maxVal, MaxRequest: min(64*maxVal, 1<<30)}}
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = srv.Serve(sctx, netutil.LimitListener(l, o.MaxConns), o.Idle)
		}()
		return func() { cancel(); <-done }, nil
	}
}
