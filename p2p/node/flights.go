package node

import (
	"bytes"
	"context"
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

// flight is one key's fetch in progress; copies and peer are set before done closes (nil
// copies: a miss). Each waiter gets a copy of its own, made by the lead before its Get
// returns: a caller may Recycle its payload (bufpool.go), and no other Get may then hold it.
type flight struct {
	done    chan struct{}
	waiters int
	copies  [][]byte
	peer    string
}

// waiting is one Get's wait for a flight: its copy is copies[slot].
type waiting struct {
	fl   *flight
	slot int
}

func newFlights() *flights { return &flights{m: map[string]*flight{}} }

// claim splits missing (indexes into keys) into the keys this call leads and the flights
// it waits for.
func (f *flights) claim(keys []engine.Key, missing []int) (lead []int, wait map[int]waiting) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, i := range missing {
		s := keys[i].String()
		if fl, ok := f.m[s]; ok {
			if wait == nil {
				wait = map[int]waiting{}
			}
			wait[i] = waiting{fl: fl, slot: fl.waiters}
			fl.waiters++
			continue
		}
		f.m[s] = &flight{done: make(chan struct{})}
		lead = append(lead, i)
	}
	return lead, wait
}

// finish publishes the outcome of the keys a call led (out[i] as fetchMissing filled it).
func (f *flights) finish(keys []engine.Key, lead []int, out []Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, i := range lead {
		s := keys[i].String()
		if fl, ok := f.m[s]; ok {
			if out[i].Source == Peer {
				fl.peer = out[i].Peer
				fl.copies = make([][]byte, fl.waiters)
				for j := range fl.copies {
					fl.copies[j] = bytes.Clone(out[i].Payload)
				}
			}
			delete(f.m, s)
			close(fl.done)
		}
	}
}

// fetchShared fills out[i] for the missing indexes: the keys no other Get is fetching are
// fetched here (fetchMissing); the others take the outcome of the Get fetching them.
func (n *Node) fetchShared(ctx context.Context, keys []engine.Key, missing []int, out []Result, alloc chunkAlloc) {
	lead, wait := n.flights.claim(keys, missing)
	if len(lead) > 0 {
		func() {
			defer n.flights.finish(keys, lead, out) // also when the fetch panics or ends early
			n.fetchMissing(ctx, keys, lead, out, alloc)
		}()
	}
	for i, w := range wait {
		n.c.flightWaits.Add(1)
		select {
		case <-w.fl.done:
			if w.fl.copies != nil {
				out[i] = Result{Source: Peer, Payload: w.fl.copies[w.slot], Peer: w.fl.peer}
				n.c.peerHits.Add(1)
			}
		case <-ctx.Done():
		}
	}
}
