package node

import (
	"context"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/p2p"
	"github.com/rbctl/rbctl/p2p/dataplane"
	"github.com/rbctl/rbctl/p2p/p2ppb"
)

// A fetch on a pooled data connection asks for the chunks before it has the lease
// (leasewait.go): the data-plane request goes first, the lookup runs beside the read, and
// the chunks stream as soon as the holder grants the lease. Each chunk's bytes are checked
// against their frame's checksum as they arrive and against the lease once its answer is
// in; nothing is delivered before both.

// sendEarly, given c, a pooled data connection to r (nil: none), sends it the request for
// chunks 0..count-1 of a lease id it proposes, to wait for and release, when its server
// takes request flags. nil when it cannot (the fetch dials after the lookup; a connection
// whose server takes no flags goes back to the pool).
func (n *Node) sendEarly(ctx context.Context, r *remote, c *dataplane.Conn, count int) (*dataplane.Conn, uint64) {
	if c == nil {
		return nil, 0
	}
	if !c.TakesFlags() {
		r.keep(c)
		return nil, 0
	}
	id := newProposal()
	if err := c.Send(ctx, id, dataplane.FlagWait|dataplane.FlagRelease, leadingIndexes(count)); err != nil {
		c.Close() // a pooled connection the peer closed: the fetch goes on without it
		return nil, 0
	}
	return c, id
}

func leadingIndexes(count int) []uint32 {
	idx := make([]uint32, count)
	for i := range idx {
		idx[i] = uint32(i)
	}
	return idx
}

type lookedUp struct {
	resp *p2ppb.LookupAndLockResponse
	ok   bool
}

// fetchEarly reads the answer to conn's early request for lease id while the lookup
// proposing id runs, then keeps the leading chunks that match the lease.
func (n *Node) fetchEarly(ctx, fctx context.Context, r *remote, peer p2p.Peer, keys []engine.Key, conn *dataplane.Conn, id uint64, alloc chunkAlloc) [][]byte {
	rctx, stop := context.WithCancel(fctx)
	defer stop()
	done := make(chan lookedUp, 1)
	go func() {
		resp, ok := n.lookup(ctx, r, peer, keys, id)
		if resp == nil {
			stop() // the lookup failed: the holder may wait for the lease until its LeaseWait
		}
		done <- lookedUp{resp, ok}
	}()
	conn.SetAlloc(alloc.get)
	frames, rerr := conn.ReceiveAll(rctx, leadingIndexes(len(keys)), uint32(n.maxChunk))
	lk := <-done
	defer func() { // what was read and not delivered goes back to the pool
		for _, f := range frames {
			alloc.drop(f.Payload, n.maxChunk)
		}
	}()
	switch {
	case lk.resp == nil: // failed, counted
		conn.Close()
		return nil
	case !lk.ok: // the peer holds none of the keys: its answers were "no such lease"
		n.keepOrClose(r, conn, rerr)
		return nil
	case lk.resp.LeaseId != id: // the holder gave the lease another id (a clash)
		if rerr != nil {
			conn.Close()
			conn = nil
		}
		return n.pull(fctx, r, peer, keys, lk.resp, conn, alloc)
	}
	want := wantsOf(lk.resp.Hits, len(keys), n.maxChunk)
	var payloads [][]byte
	err := rerr
	for i, w := range want {
		if i >= len(frames) {
			break // rerr says why
		}
		if cerr := frames[i].Check(w); cerr != nil {
			err = cerr
			break
		}
		payloads = append(payloads, frames[i].Payload)
		frames[i].Payload = nil
	}
	if err != nil && len(payloads) < len(want) {
		conn.Close()
		n.unlockAsync(r, lk.resp.LeaseId) // a transfer cut short may not have reached the release
		n.peerFailed(fctx, r, peer, "transfer", err)
		return payloads
	}
	if rerr != nil { // every wanted chunk came, an answer after them did not
		n.unlockAsync(r, lk.resp.LeaseId)
	}
	n.keepOrClose(r, conn, rerr)
	r.succeeded()
	return payloads
}

// keepOrClose pools conn when its last answer was read whole.
func (n *Node) keepOrClose(r *remote, conn *dataplane.Conn, err error) {
	if err != nil {
		conn.Close()
		return
	}
	r.keep(conn)
}
