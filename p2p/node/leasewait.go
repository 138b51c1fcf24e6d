package node

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"strconv"
	"time"

	"google.golang.org/grpc/metadata"
)

// A requester that pools a data connection to a peer asks for the chunks before the lease
// is granted: it picks the lease id itself (64 random bits), sends the data-plane request
// with FlagWait and FlagRelease, then calls LookupAndLock proposing that id in the call's
// metadata. The holder's data plane waits for the lease (AwaitLease) and streams the
// chunks as soon as it is granted, while the lookup's answer travels back; the request's
// FlagRelease releases the lease when the answer is written (ReleaseLease), so a fetch is
// one control-plane call and one data-plane request, both in flight at once. docs/p2p.md,
// "Throughput of a peer fetch".

// proposalKey carries a proposed lease id (16 hex digits) in LookupAndLock's metadata.
const proposalKey = "rbctl-lease-proposal"

// withProposal adds the proposed lease id to an outgoing call's metadata.
func withProposal(ctx context.Context, id uint64) context.Context {
	return metadata.AppendToOutgoingContext(ctx, proposalKey, strconv.FormatUint(id, 16))
}

// proposedLease is the lease id a LookupAndLock call proposes; 0 when it proposes none or
// something that is not one.
func proposedLease(ctx context.Context) uint64 {
	md, _ := metadata.FromIncomingContext(ctx)
	v := md.Get(proposalKey)
	if len(v) != 1 || len(v[0]) == 0 || len(v[0]) > 16 {
		return 0
	}
	id, err := strconv.ParseUint(v[0], 16, 64)
	if err != nil {
		return 0
	}
	return id
}

// newProposal is a random lease id to propose (never 0).
func newProposal() uint64 {
	for {
		var b [8]byte
		rand.Read(b[:])
		if id := binary.LittleEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}

// AwaitLease implements dataplane.LeaseWaiter: it waits up to max for lease id to be
// granted; false at once when the id is known not to come (a lookup that proposed it was
// refused or given another id, or its lease is over) or when the node closes.
func (n *Node) AwaitLease(id uint64, max time.Duration) bool { return n.leases.await(id, max) }

// ReleaseLease implements dataplane.LeaseReleaser: the requester's FlagRelease, counted as
// a release like an Unlock (leases_released). The lease id is the capability here as for
// reading its chunks: only its taker (or whom the taker told) knows it.
func (n *Node) ReleaseLease(id uint64) {
	if n.leases.drop(id) {
		n.leases.released.Add(1)
		n.leases.releasedData.Add(1)
	}
}

// goneCap bounds the ids remembered as gone: past it the oldest are forgotten, and a
// data-plane request for one waits its LeaseWait before "no such lease" (no wrong answer).
const goneCap = 4096

// goneIDs is a bounded FIFO set of lease ids that will not (again) be granted.
type goneIDs struct {
	ring []uint64
	next int
	set  map[uint64]struct{}
}

func (g *goneIDs) has(id uint64) bool { _, ok := g.set[id]; return ok }

func (g *goneIDs) add(id uint64) {
	if g.set == nil {
		g.set, g.ring = map[uint64]struct{}{}, make([]uint64, goneCap)
	}
	if g.has(id) {
		return
	}
	if old := g.ring[g.next]; old != 0 {
		delete(g.set, old)
	}
	g.ring[g.next] = id
	g.set[id] = struct{}{}
	g.next = (g.next + 1) % goneCap
}

// goneLocked marks id as not coming and wakes its waiters (t.mu held).
func (t *leaseTable) goneLocked(id uint64) {
	t.gone.add(id)
	if ch, ok := t.waits[id]; ok {
		close(ch)
		delete(t.waits, id)
	}
}

// await waits up to max for lease id; see Node.AwaitLease.
func (t *leaseTable) await(id uint64, max time.Duration) bool {
	t.mu.Lock()
	if _, ok := t.m[id]; ok {
		t.mu.Unlock()
		return true
	}
	if t.closed || t.gone.has(id) || id == 0 {
		t.mu.Unlock()
		return false
	}
	ch, ok := t.waits[id]
	if !ok {
		ch = make(chan struct{})
		t.waits[id] = ch
	}
	t.mu.Unlock()
	tm := time.NewTimer(max)
	defer tm.Stop()
	select {
	case <-ch:
	case <-tm.C:
		t.mu.Lock()
		if t.waits[id] == ch { // nobody granted or refused it: forget the wait
			delete(t.waits, id)
		}
		t.mu.Unlock()
	}
	_, live := t.get(id)
	return live
}
