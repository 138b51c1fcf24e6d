package node

import (
	"context"
	"encoding/hex"
	"time"

	"google.golang.org/grpc/peer"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/workloads/l2trace"
)

// Recording (`rbctl serve --record FILE`, docs/record.md): every chunk operation the node
// answers, on every front end, becomes one l2trace record. Recorder.Record never blocks (a
// full buffer drops the record and counts it), and nothing here runs unless the node
// records.

// Recording reports whether the node records its operations.
func (n *Node) Recording() bool { return n.opts.Recorder != nil }

// RecordOp records one chunk operation of a front end (proto resp or grpc, or peer for a
// peer's lookup): client is who asked, start when the request arrived, size the payload
// bytes stored or returned, hit as l2trace.Record.Hit.
func (n *Node) RecordOp(op l2trace.Op, proto, client string, k engine.Key, size int, hit bool, start time.Time, err error) {
	n.RecordBatchOp(op, proto, client, k, size, hit, start, 0, err)
}

// RecordBatchOp is RecordOp of one chunk of a call that carried several, batch the call's
// number (l2trace.Record.Batch; 0: a call of one chunk).
func (n *Node) RecordBatchOp(op l2trace.Op, proto, client string, k engine.Key, size int, hit bool, start time.Time, batch uint64, err error) {
	rec := n.opts.Recorder
	if rec == nil {
		return
	}
	r := l2trace.Record{Time: start, Op: op, Client: client, Proto: proto, Size: int64(size), Hit: hit, Latency: time.Since(start), Batch: batch}
	if p, ok := k.Parts(); ok {
		r.Salt, r.Model, r.KVRank, r.Chunk = p.CacheSalt, p.Model, int(p.KVRank), hex.EncodeToString(p.ChunkHash)
	} else {
		r.Salt, r.Chunk = k.CacheSalt(), k.String()
	}
	if err != nil {
		r.Err = err.Error()
	}
	rec.Record(r)
}

// NextBatch numbers a call of several chunks (l2trace.Record.Batch) from the node's one
// counter, which every front end of the node uses (the RESP front end's resp.Server.NextBatch
// too), so a batch number names one call in the node's recording.
func (n *Node) NextBatch() uint64 { return n.batches.Add(1) }

// recordMany records op for each key of a gRPC call (or a peer's lookup), the keys of a call
// of several sharing a batch number.
func (n *Node) recordMany(ctx context.Context, op l2trace.Op, proto string, keys []engine.Key, size func(i int) int, hit func(i int) bool, start time.Time, err error) {
	if n.opts.Recorder == nil {
		return
	}
	client := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		client = p.Addr.String()
	}
	var batch uint64
	if len(keys) > 1 {
		batch = n.NextBatch()
	}
	for i, k := range keys {
		n.RecordBatchOp(op, proto, client, k, size(i), hit(i), start, batch, err)
	}
}
