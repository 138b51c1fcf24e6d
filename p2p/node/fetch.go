package node

import (
	"context"
	"errors"
	"net"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/p2p"
	"github.com/rbctl/rbctl/p2p/dataplane"
	"github.com/rbctl/rbctl/p2p/p2ppb"
)

// fetchMissing fills out[i] for the missing indexes from peers: the candidates of the first
// missing key, fastest first (choose), are asked for every missing key (a sequence's chunks
// usually live together); what a peer lacks or fails to send goes to the next candidate.
func (n *Node) fetchMissing(ctx context.Context, keys []engine.Key, missing []int, out []Result, alloc chunkAlloc) {
	tried := 0
	for _, peer := range n.choose(n.opts.Directory.Candidates(keys[missing[0]].Identity())) {
		if tried == n.opts.MaxCandidates || len(missing) == 0 || ctx.Err() != nil {
			return
		}
		tried++
		want := make([]engine.Key, min(len(missing), dataplane.MaxBatch))
		for j := range want {
			want[j] = keys[missing[j]]
		}
		got := n.fetchFrom(ctx, peer, want, alloc)
		for j, p := range got {
			out[missing[j]] = Result{Source: Peer, Payload: p, Peer: peer.Name}
			n.c.peerHits.Add(1)
		}
		missing = missing[len(got):]
	}
}

// fetchFrom runs one peer fetch: lookup-and-lock, pull over the data plane, verify, store
// locally, release. It returns the verified payloads of the leading keys the peer had; any
// failure ends the prefix there and is counted. With a pooled data connection to a peer
// that takes lookup requests the whole fetch is one data-plane request (fetchLookup); to
// one that takes request flags the pull is asked for first (fetchEarly).
func (n *Node) fetchFrom(ctx context.Context, peer p2p.Peer, keys []engine.Key, alloc chunkAlloc) [][]byte {
	r, err := n.peers.get(peer)
	if err != nil {
		n.c.peerErrors.Add(1)
		return nil
	}
	if !r.usable(time.Now()) {
		n.c.peerBackoff.Add(1)
		return nil
	}
	start := time.Now()
	fctx, cancel := context.WithTimeout(ctx, n.opts.FetchTimeout)
	fctx = context.WithValue(fctx, callerCtx{}, ctx) // peerFailed tells the caller giving up from the fetch timing out
	defer cancel()
	var payloads [][]byte
	if c := r.idleConn(n.opts.DataIdle); c != nil && c.TakesLookups() {
		payloads = n.fetchLookup(fctx, r, peer, keys, c, alloc)
	} else if early, id := n.sendEarly(fctx, r, c, len(keys)); early != nil {
		payloads = n.fetchEarly(ctx, fctx, r, peer, keys, early, id, alloc)
	} else {
		payloads = n.fetchAfter(ctx, fctx, r, peer, keys, alloc)
	}
	if len(payloads) == 0 {
		return nil
	}
	n.peerLat.record(time.Since(start))
	r.observe(time.Since(start), len(payloads))
	for _, p := range payloads {
		n.c.peerChunks.Add(1)
		n.c.peerBytes.Add(int64(len(p)))
	}
	if !n.opts.FetchOnly {
		n.storeReplicas(keys[:len(payloads)], payloads)
	}
	return payloads
}

// fetchAfter takes the lease, then pulls its chunks (on a connection from the pool or
// dialled), releasing the lease with the request when the peer takes request flags.
func (n *Node) fetchAfter(ctx, fctx context.Context, r *remote, peer p2p.Peer, keys []engine.Key, alloc chunkAlloc) [][]byte {
	resp, ok := n.lookup(ctx, r, peer, keys, 0)
	if !ok {
		return nil
	}
	return n.pull(fctx, r, peer, keys, resp, nil, alloc)
}

// lookup asks r for a lease on keys, proposing id (0: none); false when the lookup failed
// (counted, the peer backed off) or the peer holds none of the keys.
func (n *Node) lookup(ctx context.Context, r *remote, peer p2p.Peer, keys []engine.Key, id uint64) (*p2ppb.LookupAndLockResponse, bool) {
	n.c.peerLookups.Add(1)
	lctx, cancel := context.WithTimeout(ctx, n.opts.LookupTimeout)
	defer cancel()
	if id != 0 {
		lctx = withProposal(lctx, id)
	}
	resp, err := r.api.LookupAndLock(lctx, &p2ppb.LookupAndLockRequest{Keys: wireKeys(keys), LeaseMs: uint32(n.opts.LeaseTTL.Milliseconds())})
	if err != nil {
		n.peerFailed(ctx, r, peer, "lookup", err)
		return nil, false
	}
	if resp.LeaseId == 0 || len(resp.Hits) == 0 {
		r.succeeded()
		n.c.peerEmpty.Add(1) // a directory false positive, or evicted since
		return resp, false
	}
	return resp, true
}

// pull fetches the chunks of resp's lease on conn (nil: one from the pool, or dialled).
func (n *Node) pull(fctx context.Context, r *remote, peer p2p.Peer, keys []engine.Key, resp *p2ppb.LookupAndLockResponse, conn *dataplane.Conn, alloc chunkAlloc) [][]byte {
	want := wantsOf(resp.Hits, len(keys), n.maxChunk)
	if len(want) == 0 {
		if conn != nil {
			r.keep(conn)
		}
		n.unlockAsync(r, resp.LeaseId)
		return nil
	}
	var err error
	if conn == nil {
		if conn, err = r.conn(fctx, r.dataAddr(resp.DataAddr), n.opts.DataIdle, n.opts.dialData); err != nil {
			n.unlockAsync(r, resp.LeaseId)
			n.peerFailed(fctx, r, peer, "data connect", err)
			return nil
		}
	}
	var flags dataplane.Flags
	if conn.TakesFlags() {
		flags = dataplane.FlagRelease
	}
	conn.SetAlloc(alloc.get)
	payloads := make([][]byte, 0, len(want))
	err = conn.FetchWith(fctx, resp.LeaseId, flags, want, func(_ int, p []byte) { payloads = append(payloads, p) })
	if err != nil {
		conn.Close()
		n.unlockAsync(r, resp.LeaseId) // a transfer cut short may not have reached the release
		n.peerFailed(fctx, r, peer, "transfer", err)
		return payloads
	}
	r.keep(conn)
	if flags == 0 {
		n.unlockAsync(r, resp.LeaseId)
	}
	r.succeeded()
	return payloads
}

// wantsOf is what to pull of a lease's hits: the leading ones this cache can hold (a
// chunk larger than its slots, or empty, ends the prefix), at most n.
func wantsOf(hits []*p2ppb.Hit, n, maxChunk int) []dataplane.Want {
	hits = hits[:min(len(hits), n)]
	want := make([]dataplane.Want, 0, len(hits))
	for i, h := range hits {
		if int(h.Size) > maxChunk || h.Size == 0 {
			break
		}
		want = append(want, dataplane.Want{Index: uint32(i), Size: h.Size, CRC: h.Checksum, HasCRC: h.HasChecksum})
	}
	return want
}

// storeReplicas keeps the fetched chunks the admission policy admits locally (the answer does not wait on success: the
// bytes are verified either way).
func (n *Node) storeReplicas(keys []engine.Key, payloads [][]byte) {
	keep, _ := n.admitWrites(keys) // a replica is a write to flash like a put
	res, err := n.putMany(pick(keys, keep), pick(payloads, keep), n.replicaWrite())
	ids := make([]uint64, 0, len(res.Stored))
	for _, j := range res.Stored {
		i := keep[j]
		ids = append(ids, keys[i].Identity())
		n.c.replicas.Add(1)
		n.c.replicaBytes.Add(int64(len(payloads[i])))
	}
	n.replicas.mark(ids) // before admitted: the directory and eviction see a replica
	for _, j := range res.Stored {
		n.admitted(keys[keep[j]])
	}
	if miss := len(keep) - len(res.Stored); miss > 0 {
		n.c.replicaFailed.Add(int64(miss))
		if err != nil {
			n.opts.Logger.Warn("storing fetched chunks", "keys", miss, "err", err)
		}
	}
}

// unlockAsync releases a peer lease without holding up the caller (the peer's expiry
// timer covers a lost Unlock).
func (n *Node) unlockAsync(r *remote, id uint64) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), n.opts.UnlockTimeout)
		defer cancel()
		if _, err := r.api.Unlock(ctx, &p2ppb.UnlockRequest{LeaseId: id}); err != nil {
			n.c.unlockFailed.Add(1)
		}
	}()
}

// callerCtx keys the Get's own context in a fetch's context (fetchFrom), for callerGaveUp.
type callerCtx struct{}

// callerGaveUp says whether the Get behind ctx (the Get's context, or a fetch's carrying it)
// has ended: cancelled, or past its deadline. The deadline is read as well as Err because a
// socket deadline set from it can fire before the context's own timer has marked it done.
func callerGaveUp(ctx context.Context) bool {
	if c, ok := ctx.Value(callerCtx{}).(context.Context); ok {
		ctx = c
	}
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// peerFailed counts a failed step by kind, backs the peer off, and logs it. ctx is the
// step's caller's context or the fetch's (fetchFrom): when the Get behind it gave up (a RESP
// client went away, the node is closing), the failure says nothing of the peer: it is
// counted apart and backs nobody off.
func (n *Node) peerFailed(ctx context.Context, r *remote, peer p2p.Peer, step string, err error) {
	if callerGaveUp(ctx) {
		n.c.peerAbandoned.Add(1)
		n.opts.Logger.Debug("peer fetch given up by its caller", "peer", peer.Name, "step", step, "err", err)
		return
	}
	var ne net.Error
	switch code := status.Code(err); {
	case errors.Is(err, dataplane.ErrChecksum):
		n.c.peerChecksum.Add(1)
	case errors.Is(err, context.DeadlineExceeded), code == codes.DeadlineExceeded, errors.As(err, &ne) && ne.Timeout():
		n.c.peerTimeouts.Add(1)
	case code == codes.Unavailable, isRefused(err):
		n.c.peerRefused.Add(1)
	default:
		n.c.peerErrors.Add(1)
	}
	var ce *dataplane.ChunkError
	if !errors.As(err, &ce) || ce.Status != dataplane.StatusBusy {
		r.failed(&n.opts)
	}
	n.opts.Logger.Info("peer fetch is a miss", "peer", peer.Name, "step", step, "err", err)
}
