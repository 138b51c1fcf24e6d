package node

import (
	"bytes"
	"context"
	"slices"
	"sync"

	"github.com/rbctl/rbctl/engine"
)

// flights makes concurrent misses of one key on this node share one peer fetch (single
// flight): the first Get to miss a key leads it, fetching it and storing the replica; a Get
// that misses the same key while the lead is in progress waits for the lead's outcome
// instead of asking a peer itself. Keys are compared in full (encoded), never by identity
// alone, so a waiter can never receive another key's bytes.
type flights struct {
	mu sync.Mutex
	m  map[string]*flight
}

// flight is one key's fetch in progress; its waiters' copies and peer are set before done
// closes (no copies: a miss). Each waiter gets a copy of its own, made by the lead before its
// Get returns: a caller may Recycle its payload (bufpool.go), and no other Get may then hold
// it. A waiter that passed an alloc to GetWith (a RESP GET's lent value buffer) gets its copy
// in a buffer from that alloc, so a shared fetch takes no memory beyond each Get's own.
type flight struct {
	done    chan struct{}
	waiters []*waiter // appended under flights.mu until the lead takes the flight off the map
	peer    string
	cut     bool // no chunk, and the lead's context had ended: its miss says nothing of the peers

	mu sync.Mutex // orders the lead's copies against waiters leaving (waiter.gone)
}

// waiter is one Get waiting for a flight.
type waiter struct {
	alloc func(size int) []byte // the waiter's GetWith alloc (nil: a heap copy)
	copy  []byte                // its copy of the fetched chunk (nil: a miss, or it left)
	gone  bool                  // it stopped waiting (its context ended): write nothing for it
}

// waiting is one Get's wait for a flight.
type waiting struct {
	fl *flight
	w  *waiter
}

func newFlights() *flights { return &flights{m: map[string]*flight{}} }

// claim splits missing (indexes into keys) into the keys this call leads and the flights
// it waits for; alloc is the call's GetWith alloc, from which the lead of a flight it waits
// for takes the buffer of its copy.
func (f *flights) claim(keys []engine.Key, missing []int, alloc func(size int) []byte) (lead []int, wait map[int]waiting) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, i := range missing {
		s := keys[i].String()
		if fl, ok := f.m[s]; ok {
			if wait == nil {
				wait = map[int]waiting{}
			}
			w := &waiter{alloc: alloc}
			fl.waiters = append(fl.waiters, w)
			wait[i] = waiting{fl: fl, w: w}
			continue
		}
		f.m[s] = &flight{done: make(chan struct{})}
		lead = append(lead, i)
	}
	return lead, wait
}

// finish publishes the outcome of the keys a call led (out[i] as fetchMissing filled it);
// cut says the lead's context had ended, so that its misses may be the fetch given up.
func (f *flights) finish(keys []engine.Key, lead []int, out []Result, cut bool) {
	for _, i := range lead {
		s := keys[i].String()
		f.mu.Lock()
		fl, ok := f.m[s]
		if ok {
			delete(f.m, s) // no waiter joins it from here on
		}
		f.mu.Unlock()
		if !ok {
			continue
		}
		fl.mu.Lock()
		if out[i].Source == Peer {
			fl.peer = out[i].Peer
			for _, w := range fl.waiters {
				if !w.gone {
					w.copy = copyFor(w.alloc, out[i].Payload)
				}
			}
		} else {
			fl.cut = cut
		}
		close(fl.done)
		fl.mu.Unlock()
	}
}

// copyFor copies p into a buffer from alloc (engine.LoadMany's contract: it may be longer,
// and p is cut from it), or onto the heap when there is no alloc or its buffer is too short.
func copyFor(alloc func(size int) []byte, p []byte) []byte {
	if alloc != nil {
		if b := alloc(len(p)); len(b) >= len(p) {
			return b[:copy(b, p)]
		}
	}
	return bytes.Clone(p)
}

// leave ends w's wait before its flight is done, and reports whether it did: false when
// the flight finished first (w's copy, if any, is there to take).
func (fl *flight) leave(w *waiter) bool {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	select {
	case <-fl.done:
		return false
	default:
		w.gone = true
		return true
	}
}

// fetchShared fills out[i] for the missing indexes: the keys no other Get is fetching are
// fetched here (fetchMissing); the others take the outcome of the Get fetching them. A key
// whose lead gave up (its caller's context ended: a RESP client that went away) is fetched
// again while this call's own context lasts, so one caller leaving does not turn every
// waiter's GET into a miss.
func (n *Node) fetchShared(ctx context.Context, keys []engine.Key, missing []int, out []Result, alloc chunkAlloc) {
	lead, wait := n.flights.claim(keys, missing, alloc.caller)
	if len(lead) > 0 {
		func() {
			cut := false
			defer func() { n.flights.finish(keys, lead, out, cut) }() // also when the fetch panics or ends early
			n.fetchMissing(ctx, keys, lead, out, alloc)
			cut = callerGaveUp(ctx) // the deadline too: a socket deadline set from it may fire first
		}()
	}
	var again []int
	for i, w := range wait {
		n.c.flightWaits.Add(1)
		select {
		case <-w.fl.done:
		case <-ctx.Done():
			if w.fl.leave(w.w) {
				continue // nothing is, or will be, written for it
			}
		}
		switch {
		case w.w.copy != nil:
			out[i] = Result{Source: Peer, Payload: w.w.copy, Peer: w.fl.peer}
			n.c.peerHits.Add(1)
		case w.fl.cut && !callerGaveUp(ctx):
			again = append(again, i)
		}
	}
	if len(again) > 0 { // each round needs another lead to give up first
		slices.Sort(again)
		n.fetchShared(ctx, keys, again, out, alloc)
	}
}
