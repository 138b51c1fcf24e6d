package resp

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/p2p/node"
	"github.com/rbctl/rbctl/workloads/l2trace"
)

// NodeStore is a Store over a cache node (rbctl serve --resp): keys as EngineStore takes
// them (LMCache's native-connector spelling, stored under the raw-block key of the same
// ObjectKey), a GET that misses here is fetched from a peer (and kept as a replica), a SET
// into a full node evicts by the node's policy, one the node does not keep (declined by
// admission, full with eviction none, an I/O error, ...) is a Dropped error the dispatcher
// answers +OK (a later GET misses), and every operation counts in the node's stats and
// metrics.
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
		return drop(DropEmpty, "an empty value cannot be stored (a slot holds 1 byte or more)")
	}
	keys := []engine.Key{key}
	declined := false
	err = putOrPresent(func() (bool, error) {
		res, err := s.N.Put(keys, [][]byte{v})
		if err == nil && len(res.Declined) > 0 {
			declined = true
			return true, nil
		}
		return err == nil && res.Results[0], err
	}, func() bool { return s.N.Exists(keys)[0] }, func() bool { return s.N.Full(key) })
	if declined {
		// Declined by the node's admission policy: OK, as a cache that evicts answers a SET
		// whose value it drops later (LMCache's connector fails a whole batch on -ERR).
		return drop(DropDeclined, "the node's admission policy declined the write")
	}
	return err
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
		"rbctl_auth_failed":        strconv.FormatInt(c["auth_failed"], 10), // gRPC and RESP
		// Checkpoint health (docs/p2p.md, "Crash contract"): 0 while checkpoints fail.
		"rbctl_healthy":                    strconv.FormatInt(c["healthy"], 10),
		"rbctl_checkpoint_failing_seconds": strconv.FormatInt(c["checkpoint_failing_seconds"], 10),
		"rbctl_checkpoint_errors":          strconv.FormatInt(c["checkpoint_errors"], 10),
		"rbctl_index_room_refused":         strconv.FormatInt(c["index_room_refused"], 10),
	}
}

// FrontEndOptions configure the RESP listener of a node. Zero fields take the defaults named
// on each (docs/resp.md, "Bounds").
type FrontEndOptions struct {
	Listen string     // HOST:PORT
	Conns  ConnLimits // admission, AUTH deadline, idle timeout (0: none), keepalive
	// Memory bounds the request bytes all connections hold at once (default 256 MiB, at
	// least 4 connections' MaxRequest); a connection that needs more stops being read.
	Memory  int64
	Auth    Auth // nil: no AUTH (unless the node checks tokens)
	Version string
	Logger  *slog.Logger // nil: the node's
	// Ready, when set, is told the bound address.
	Ready func(addr string)
}

// Bounds of a node's RESP requests, from its largest payload P (docs/resp.md, "Bounds"):
// a value up to P is kept; one up to MaxBulk (Redis's 512 MiB) is read and discarded (the
// SET answered +OK, dropped as too large); a longer one is a protocol error. A request keeps
// at most 4 × P + 1 MiB (SET, a few MSET pairs, MGET's keys), at most 1 GiB.
func nodeLimits(p int64) Limits {
	keep := max(p, 64<<10) // keys up to 64 KiB (a native key's bound) are never discarded
	return Limits{MaxKeep: keep, MaxRequest: min(4*keep+(1<<20), 1<<30)}
}

// FrontEnd serves a node over RESP2 at o.Listen, within the bounds above: memory per
// connection (one request's kept bytes, one reply value at a time, 128 KiB of socket
// buffers) and in all (o.Memory), connections admitted as o.Conns says.
func FrontEnd(o FrontEndOptions) node.FrontEnd {
	return func(ctx context.Context, n *node.Node) (func(), error) {
		lim := nodeLimits(int64(n.MaxPayload()))
		mem := o.Memory
		if mem <= 0 {
			mem = 256 << 20
		}
		mem = max(mem, 4*lim.MaxRequest)
		var lc net.ListenConfig
		l, err := lc.Listen(ctx, "tcp", o.Listen)
		if err != nil {
			return nil, fmt.Errorf("RESP listener: %w", err)
		}
		if o.Ready != nil {
			o.Ready(l.Addr().String())
		}
		logger := o.Logger
		if logger == nil {
			logger = n.Logger()
		}
		srv := &Server{Store: NodeStore{N: n, Ctx: ctx}, Auth: o.Auth, Tokens: n.Tokens(), Version: o.Version,
			Limits: lim, Conns: o.Conns, Budget: NewBudget(mem), Logger: logger, AuthFailed: n.CountAuthFailure}
		if n.Recording() {
			st := srv.Store.(NodeStore)
			srv.Record = func(op, client string, key []byte, size int, hit bool, start time.Time, err error) {
				k, kerr := st.key(key)
				if kerr != nil {
					return // a key the store does not take names no chunk
				}
				n.RecordOp(l2trace.Op(op), "resp", client, k, size, hit, start, err)
			}
		}
		n.AddStats(srv.Stats)
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = srv.Serve(sctx, l, o.Conns.Idle)
		}()
		return func() { cancel(); <-done }, nil
	}
}
