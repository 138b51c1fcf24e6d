package node

import (
	"context"
	"net/netip"
	"time"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/p2p"
	"github.com/rbctl/rbctl/p2p/dataplane"
	"github.com/rbctl/rbctl/p2p/p2ppb"
	"github.com/rbctl/rbctl/workloads/l2trace"
)

// A fetch on a pooled data connection to a peer that takes lookup requests is one round
// trip on the data plane (dataplane/lookup.go): the request names the keys and carries
// this node's peer token; the holder checks the token as its control plane would for
// Peer/LookupAndLock, leases the leading keys it holds for the length of its answer,
// streams their chunks and releases the lease. No control-plane call: the gRPC lookup that
// fetchEarly waits for (a third of a millisecond before the first byte on a loopback
// pair) is gone. docs/p2p.md, "Throughput of a peer fetch".

// LeaseKeys implements dataplane.KeyLeaser: the data plane's LookupAndLock.
func (n *Node) LeaseKeys(from netip.Addr, token string, names []string) (uint64, int, dataplane.Status) {
	start := time.Now()
	if n.opts.Tokens != nil {
		tok, ok := n.opts.Tokens.Lookup(token)
		if !ok {
			n.c.authFailed.Add(1)
			return 0, 0, dataplane.StatusRefused
		}
		if err := n.permit(tok, p2ppb.Peer_LookupAndLock_FullMethodName, &p2ppb.LookupAndLockRequest{}); err != nil {
			n.c.authDenied.Add(1)
			return 0, 0, dataplane.StatusRefused
		}
	}
	wire := make([]*p2ppb.ObjectKey, len(names))
	for i, s := range names {
		wire[i] = &p2ppb.ObjectKey{Encoded: s}
	}
	keys, err := keysOf(wire, n.cache.Shard(0).Config().Namespace, n.opts.MaxBatch)
	if err != nil {
		return 0, 0, dataplane.StatusRefused
	}
	owner := "local"
	if from.IsValid() {
		owner = "ip:" + from.Unmap().String() // as clientOf names a peer
	}
	l := n.leases.lock(keys, min(n.opts.LeaseTTL, n.opts.MaxLeaseTTL), owner)
	hits := 0
	if l != nil {
		n.leases.grantedData.Add(1)
		hits = len(l.hits)
		for _, k := range l.keys { // a peer's use is a use
			n.evict.touch(n.cache.ShardOf(k), k)
		}
	}
	if n.Recording() {
		client := ""
		if from.IsValid() {
			client = from.Unmap().String()
		}
		for i, k := range keys {
			size := 0
			if i < hits {
				size = l.hits[i].Size
			}
			n.RecordOp(l2trace.OpFetch, "peer", client, k, size, i < hits, start, nil)
		}
	}
	if l == nil {
		return 0, 0, dataplane.StatusOK
	}
	return l.id, hits, dataplane.StatusOK
}

// fetchLookup fetches keys from r in one lookup request on conn (a pooled connection
// whose server TakesLookups) and returns the verified payloads of the leading keys r
// holds. The holder releases its lease itself, also after a failed transfer.
func (n *Node) fetchLookup(fctx context.Context, r *remote, peer p2p.Peer, keys []engine.Key, conn *dataplane.Conn, alloc chunkAlloc) [][]byte {
	n.c.peerLookups.Add(1)
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.String()
	}
	if err := conn.SendLookup(fctx, n.opts.PeerToken, names); err != nil {
		conn.Close() // a pooled connection the peer closed: a miss, as for any transfer
		n.peerFailed(fctx, r, peer, "lookup", err)
		return nil
	}
	conn.SetAlloc(alloc.get)
	frames, rerr := conn.ReceiveAll(fctx, leadingIndexes(len(keys)), uint32(n.maxChunk))
	defer func() { // what was read and not delivered goes back to the pool
		for _, f := range frames {
			alloc.drop(f.Payload, n.maxChunk)
		}
	}()
	var payloads [][]byte
	for i := range frames {
		if frames[i].Status != dataplane.StatusOK || frames[i].Payload == nil {
			break // a miss ends the prefix; a chunk above this node's slot is one
		}
		payloads = append(payloads, frames[i].Payload)
		frames[i].Payload = nil
	}
	if rerr != nil {
		conn.Close()
		n.peerFailed(fctx, r, peer, "transfer", rerr)
		return payloads
	}
	r.keep(conn) // every answer was read: the connection is in step
	if len(payloads) < len(frames) {
		switch st := frames[len(payloads)].Status; st {
		case dataplane.StatusOK: // a chunk larger than this node's slots: the prefix ends there
		case dataplane.StatusMiss: // the rest is not held
			if len(payloads) == 0 {
				n.c.peerEmpty.Add(1) // a directory false positive, or evicted since
			}
		case dataplane.StatusRefused:
			n.peerFailed(fctx, r, peer, "lookup", &dataplane.ChunkError{Index: uint32(len(payloads)), Status: st})
			return nil
		default:
			n.peerFailed(fctx, r, peer, "transfer", &dataplane.ChunkError{Index: uint32(len(payloads)), Status: st})
			return payloads
		}
	}
	r.succeeded()
	return payloads
}
