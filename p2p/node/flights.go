package node

import (
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

// flight is one key's fetch in progress; payload and peer are set before done closes (nil
// payload: a miss).
type flight struct {
	done    chan struct{}
	payload []byte
	peer    string
}

func newFlights() *flights { return &flights{m: map[string]*flight{}} }

// claim splits missing (indexes into keys) into the keys this call leads and the flights
// it waits for.
func (f *flights) claim(keys []engine.Key, missing []int) (lead []int, wait map[int]*flight) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, i := range missing {
		s := keys[i].String()
		if fl, ok := f.m[s]; ok {
			if wait == nil {
				wait = map[int]*flight{}
			}
			wait[i] = fl
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
				fl.payload, fl.peer = out[i].Payload, out[i].Peer
			}
			delete(f.m, s)
			close(fl.done)
		}
	}
}

// fetchShared fills out[i] for the missing indexes: the keys no other Get is fetching are
// fetched here (fetchMissing); the others take the outcome of the Get fetching them.
func (n *Node) fetchShared(ctx context.Context, keys []engine.Key, missing []int, out []Result) {
	lead, wait := n.flights.claim(keys, missing)
	if len(lead) > 0 {
		func() {
			defer n.flights.finish(keys, lead, out) // also when the fetch panics or ends early
			n.fetchMissing(ctx, keys, lead, out)
		}()
	}
	for i, fl := range wait {
		n.c.flightWaits.Add(1)
		select {
		case <-fl.done:
			if fl.payload != nil {
				out[i] = Result{Source: Peer, Payload: fl.payload, Peer: fl.peer}
				n.c.peerHits.Add(1)
			}
		case <-ctx.Done():
		}
	}
}
