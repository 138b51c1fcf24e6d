package node

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/p2p/resp"
	"github.com/rbctl/rbctl/workloads/l2trace"
)

// RESPConfig is a node's Redis-protocol (RESP2) front end (rbctl serve --resp;
// docs/resp.md): LMCache's resp L2 adapter, redis-cli and redis-py on the node's cache.
// Zero fields take the defaults named on each (docs/resp.md, "Bounds").
type RESPConfig struct {
	Listen string          // HOST:PORT (port 0: any; RESPAddr tells the bound one)
	Conns  resp.ConnLimits // admission, AUTH deadline, idle timeout (0: none), keepalive
	// Memory bounds the request bytes all connections hold at once (default 256 MiB, at
	// least 4 connections' MaxRequest); a connection that needs more stops being read.
	Memory int64
	Auth   resp.Auth // nil: no AUTH (unless the node checks tokens)
}

// serveRESP serves the node over RESP2 at c.Listen, within resp.NodeLimits of its largest
// payload: memory per connection (one request's kept bytes, one reply value at a time, 128
// KiB of socket buffers) and in all (c.Memory), connections admitted as c.Conns says. It
// returns the bound address and how to stop it (every connection closed).
func (n *Node) serveRESP(ctx context.Context, c RESPConfig) (string, func(), error) {
	lim := resp.NodeLimits(int64(n.MaxPayload()))
	mem := c.Memory
	if mem <= 0 {
		mem = 256 << 20
	}
	if floor := 4 * lim.MaxRequest; mem < floor {
		n.Logger().Warn("RESP request memory raised to 4 requests' bound (the largest payload decides a request's)",
			"asked_bytes", mem, "using_bytes", floor, "max_payload_bytes", n.MaxPayload())
		mem = floor
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", c.Listen)
	if err != nil {
		return "", nil, fmt.Errorf("RESP listener: %w", err)
	}
	values, release, err := n.respValues()
	if err != nil {
		l.Close()
		return "", nil, err
	}
	// sctx ends when the front end stops (Close, SIGTERM): every connection's context derives
	// from it (resp.Server.ServeConn), and so do the peer fetches of its GETs, so a stop ends
	// the commands in flight instead of waiting for them (an MGET stops between two keys).
	sctx, cancel := context.WithCancel(ctx)
	srv := &resp.Server{Store: resp.NodeStore{N: respNode{n}, Ctx: sctx}, Auth: c.Auth, Tokens: n.Tokens(), Version: "rbctl",
		Limits: lim, Conns: c.Conns, Budget: resp.NewBudget(mem), Logger: n.Logger(), AuthFailed: n.CountAuthFailure,
		Values: values}
	if n.Recording() {
		srv.NextBatch = n.NextBatch
		srv.RecordBatched = func(op, client string, k resp.Key, size int, hit bool, start time.Time, batch uint64, err error) {
			if k.Err == nil { // a key the store does not take names no chunk
				n.RecordBatchOp(l2trace.Op(op), "resp", client, k.Engine, size, hit, start, batch, err)
			}
		}
	}
	n.AddStats(srv.Stats)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(sctx, l, c.Conns.Idle)
	}()
	return l.Addr().String(), func() { cancel(); <-done; release() }, nil
}

// respValueArena is the memory of the RESP front end's registered value buffers: as many
// buffers of the largest payload as fit, at least 8 and at most 64 (16 of 1 MiB, 64 of 256
// KiB). More GETs at once than that take heap buffers (resp_value_spares).
const respValueArena = 16 << 20

// respValues makes the pool GET and MGET load values into (resp.ValuePool: page-aligned
// buffers of the largest payload, so an O_DIRECT load reads straight into them) and
// registers its arena with the cache's devices (io_uring fixed buffers; a device without
// them, or a failed registration, leaves plain reads, which are as correct). release
// unregisters and unmaps it once no connection is served. The node registers no other
// caller memory: a second front end (ServeRESP again) would replace this registration
// (engine.RegisterMemory keeps one set), leaving the first's reads unregistered.
func (n *Node) respValues() (*resp.ValuePool, func(), error) {
	size := n.MaxPayload()
	p, err := resp.NewValuePool(size, min(max(respValueArena/max(size, 1), 8), 64))
	if err != nil {
		return nil, nil, fmt.Errorf("RESP value buffers: %w", err)
	}
	registered := n.cache.RegisterMemory(p.Arena()) == nil
	return p, func() {
		if registered && n.cache.RegisterMemory(nil) != nil {
			return // the devices may still hold the pages: leave them mapped
		}
		p.Close()
	}, nil
}

// ServeRESP serves a node built with New or NewSharded over RESP2 as Start does with
// Config.RESP, until ctx is done or the returned stop is called; it returns the bound address.
func (n *Node) ServeRESP(ctx context.Context, c RESPConfig) (addr string, stop func(), err error) {
	return n.serveRESP(ctx, c)
}

// respNode is the node as a RESP store sees it (resp.Node): one key per call.
type respNode struct{ n *Node }

func (r respNode) Get(ctx context.Context, k engine.Key, alloc func(size int) []byte) ([]byte, bool, error) {
	res, err := r.n.GetWith(ctx, []engine.Key{k}, false, alloc)
	if err != nil || res[0].Source == Miss {
		return nil, false, err
	}
	return res[0].Payload, true, nil
}

func (r respNode) Put(k engine.Key, v []byte) (stored, declined bool, err error) {
	res, err := r.n.Put([]engine.Key{k}, [][]byte{v})
	if err == nil && len(res.Declined) > 0 {
		return false, true, nil
	}
	return err == nil && res.Results[0], false, err
}

func (r respNode) Exists(k engine.Key) bool         { return r.n.Exists([]engine.Key{k})[0] }
func (r respNode) Delete(k engine.Key) bool         { return r.n.Delete([]engine.Key{k}, false)[0] }
func (r respNode) Full(k engine.Key) bool           { return r.n.Full(k) }
func (r respNode) Entries(fn func(engine.Key) bool) { r.n.Entries(fn) }
func (r respNode) Usage() engine.Usage              { return r.n.Usage() }
func (r respNode) MaxPayload() int                  { return r.n.MaxPayload() }

func (r respNode) Info() map[string]string {
	c := r.n.Stats().Counters
	m := map[string]string{
		"rbctl_node":               r.n.Peer().Name,
		"rbctl_evicted":            strconv.FormatInt(c["evicted"], 10),
		"rbctl_admission_declined": strconv.FormatInt(c["admission_declined"], 10),
		"rbctl_auth_failed":        strconv.FormatInt(c["auth_failed"], 10), // gRPC and RESP
		// Checkpoint health (docs/p2p.md, "Crash contract"): 0 while checkpoints fail.
		"rbctl_healthy":                    strconv.FormatInt(c["healthy"], 10),
		"rbctl_checkpoint_failing_seconds": strconv.FormatInt(c["checkpoint_failing_seconds"], 10),
		"rbctl_checkpoint_errors":          strconv.FormatInt(c["checkpoint_errors"], 10),
		"rbctl_index_room_refused":         strconv.FormatInt(c["index_room_refused"], 10),
		"maxmemory_policy":                 maxmemoryPolicy(r.n.opts.Eviction),
		"rbctl_eviction":                   evictionName(r.n.opts.Eviction),
		"rbctl_io_engine":                  r.n.IOEngines(),
	}
	for _, k := range []string{"ring_batches", "ring_queued_us", "ring_run_us", "ring_wake_us"} {
		if v, ok := c[k]; ok { // devices with io_uring rings (docs/resp.md, "Where a GET's time goes")
			m["rbctl_"+k] = strconv.FormatInt(v, 10)
		}
	}
	return m
}

// maxmemoryPolicy names the node's eviction as INFO's maxmemory_policy does: valkey's name
// where one means the same (noeviction, allkeys-lru), rbctl-NAME where none does.
func maxmemoryPolicy(e Eviction) string {
	switch e {
	case EvictNone:
		return "noeviction"
	case EvictLRU:
		return "allkeys-lru"
	}
	return "rbctl-" + string(e)
}

func evictionName(e Eviction) string {
	if e == EvictNone {
		return "none"
	}
	return string(e)
}
