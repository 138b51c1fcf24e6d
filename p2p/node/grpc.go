package node

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/p2p/p2ppb"
	"github.com/rbctl/rbctl/workloads/l2trace"
)

// rpcErr maps a library error to a gRPC status: bad keys are the caller's fault.
func rpcErr(err error) error {
	if errors.Is(err, errKey) {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	if errors.Is(err, engine.ErrClosed) || errors.Is(err, engine.ErrCheckpointFailing) {
		return status.Error(codes.Unavailable, err.Error())
	}
	if errors.Is(err, engine.ErrIndexFull) {
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

func (n *Node) keys(ks []*p2ppb.ObjectKey, max int) ([]engine.Key, error) {
	k, err := keysOf(ks, n.cache.Shard(0).Config().Namespace, max)
	if err != nil {
		return nil, rpcErr(err)
	}
	return k, nil
}

// lookupAndLock is the one implementation behind both services' LookupAndLock.
func (n *Node) lookupAndLock(ctx context.Context, req *p2ppb.LookupAndLockRequest) (*p2ppb.LookupAndLockResponse, error) {
	keys, err := n.keys(req.Keys, n.opts.MaxBatch)
	if err != nil {
		return nil, err
	}
	ttl := time.Duration(req.LeaseMs) * time.Millisecond
	if ttl <= 0 {
		ttl = n.opts.LeaseTTL
	}
	ttl = min(ttl, n.opts.MaxLeaseTTL)
	l := n.leases.lockAs(keys, ttl, clientOf(ctx), proposedLease(ctx))
	resp := &p2ppb.LookupAndLockResponse{LeaseMs: uint32(ttl.Milliseconds()), DataAddr: n.Peer().Data}
	if l == nil {
		return resp, nil
	}
	if ctx.Err() != nil {
		// The requester gave up while we locked: nobody will use or unlock this lease.
		n.leases.unlock(l.id, "")
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	for _, k := range l.keys { // a peer's use is a use
		n.evict.touch(n.cache.ShardOf(k), k)
	}
	resp.LeaseId = l.id
	resp.Hits = make([]*p2ppb.Hit, len(l.hits))
	for i, m := range l.hits {
		resp.Hits[i] = &p2ppb.Hit{Size: uint32(m.Size), Checksum: m.Checksum, HasChecksum: m.HasChecksum}
	}
	return resp, nil
}

func (n *Node) unlock(ctx context.Context, req *p2ppb.UnlockRequest) *p2ppb.UnlockResponse {
	return &p2ppb.UnlockResponse{Released: n.leases.unlock(req.LeaseId, clientOf(ctx))}
}

// peerAPI is what other nodes call.
type peerAPI struct {
	p2ppb.UnimplementedPeerServer
	n *Node
}

func (a *peerAPI) LookupAndLock(ctx context.Context, req *p2ppb.LookupAndLockRequest) (*p2ppb.LookupAndLockResponse, error) {
	start := time.Now()
	resp, err := a.n.lookupAndLock(ctx, req)
	if a.n.Recording() {
		// A peer fetch served: the keys the lease holds, sized; the rest missed.
		keys, _ := a.n.keys(req.Keys, a.n.opts.MaxBatch)
		a.n.recordMany(ctx, l2trace.OpFetch, "peer", keys, func(i int) int {
			if resp != nil && i < len(resp.Hits) {
				return int(resp.Hits[i].Size)
			}
			return 0
		}, func(i int) bool { return resp != nil && i < len(resp.Hits) }, start, err)
	}
	return resp, err
}

func (a *peerAPI) Unlock(ctx context.Context, req *p2ppb.UnlockRequest) (*p2ppb.UnlockResponse, error) {
	return a.n.unlock(ctx, req), nil
}

// cacheAPI is what local clients call.
type cacheAPI struct {
	p2ppb.UnimplementedCacheServer
	n *Node
}

func (a *cacheAPI) LookupAndLock(ctx context.Context, req *p2ppb.LookupAndLockRequest) (*p2ppb.LookupAndLockResponse, error) {
	return a.n.lookupAndLock(ctx, req)
}

func (a *cacheAPI) Unlock(ctx context.Context, req *p2ppb.UnlockRequest) (*p2ppb.UnlockResponse, error) {
	return a.n.unlock(ctx, req), nil
}

func (a *cacheAPI) Put(ctx context.Context, req *p2ppb.PutRequest) (*p2ppb.PutResponse, error) {
	start := time.Now()
	keys, err := a.n.keys(req.Keys, a.n.opts.MaxBatch)
	if err != nil {
		return nil, err
	}
	if len(req.Payloads) != len(keys) {
		return nil, status.Errorf(codes.InvalidArgument, "%d keys and %d payloads", len(keys), len(req.Payloads))
	}
	for i, p := range req.Payloads {
		if len(p) == 0 || len(p) > a.n.maxChunk {
			return nil, status.Errorf(codes.InvalidArgument, "payload %d has %d bytes; a slot holds 1..%d", i, len(p), a.n.maxChunk)
		}
	}
	res, err := a.n.Put(keys, req.Payloads)
	a.n.recordMany(ctx, l2trace.OpSet, "grpc", keys, func(i int) int { return len(req.Payloads[i]) },
		func(i int) bool { return i < len(res.Results) && res.Results[i] }, start, err)
	if err != nil {
		return nil, rpcErr(err)
	}
	resp := &p2ppb.PutResponse{Stored: make([]bool, len(keys)), Present: res.Results}
	for _, i := range res.Stored {
		resp.Stored[i] = true
	}
	if len(res.Declined) > 0 {
		resp.Declined = make([]bool, len(keys))
		for _, i := range res.Declined {
			resp.Declined[i] = true
		}
	}
	return resp, nil
}

func (a *cacheAPI) Get(ctx context.Context, req *p2ppb.GetRequest) (*p2ppb.GetResponse, error) {
	keys, err := a.n.keys(req.Keys, a.n.maxGetKeys())
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res, err := a.n.Get(ctx, keys, req.LocalOnly)
	a.n.recordMany(ctx, l2trace.OpGet, "grpc", keys, func(i int) int {
		if i < len(res) {
			return len(res[i].Payload)
		}
		return 0
	}, func(i int) bool { return i < len(res) && res[i].Source != Miss }, start, err)
	if err != nil {
		return nil, rpcErr(err)
	}
	resp := &p2ppb.GetResponse{Chunks: make([]*p2ppb.Chunk, len(res))}
	for i, r := range res {
		c := &p2ppb.Chunk{Source: p2ppb.Source_SOURCE_MISS}
		switch r.Source {
		case Local:
			c.Source, c.Payload = p2ppb.Source_SOURCE_LOCAL, r.Payload
		case Peer:
			c.Source, c.Payload, c.Peer = p2ppb.Source_SOURCE_PEER, r.Payload, r.Peer
		}
		resp.Chunks[i] = c
	}
	return resp, nil
}

func (a *cacheAPI) Delete(ctx context.Context, req *p2ppb.DeleteRequest) (*p2ppb.DeleteResponse, error) {
	start := time.Now()
	keys, err := a.n.keys(req.Keys, a.n.opts.MaxBatch)
	if err != nil {
		return nil, err
	}
	del := a.n.Delete(keys, req.Force)
	a.n.recordMany(ctx, l2trace.OpDelete, "grpc", keys, func(int) int { return 0 }, func(i int) bool { return del[i] }, start, nil)
	return &p2ppb.DeleteResponse{Deleted: del}, nil
}

func (a *cacheAPI) List(_ context.Context, req *p2ppb.ListRequest) (*p2ppb.ListResponse, error) {
	if err := engine.CheckSalt(req.CacheSalt); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	ents, more := a.n.List(req.CacheSalt, int(req.MaxKeys))
	resp := &p2ppb.ListResponse{Truncated: more, Entries: make([]*p2ppb.Entry, len(ents))}
	for i, e := range ents {
		resp.Entries[i] = &p2ppb.Entry{Key: e.Key.String(), Size: uint32(e.Meta.Size), CacheSalt: e.Key.CacheSalt(),
			Handle: int32(e.Meta.Handle), Replica: e.Replica}
	}
	return resp, nil
}

func (a *cacheAPI) Stats(context.Context, *p2ppb.StatsRequest) (*p2ppb.StatsResponse, error) {
	s := a.n.Stats()
	return &p2ppb.StatsResponse{Node: s.Node, Counters: s.Counters, LatencyUs: s.LatencyUS}, nil
}
