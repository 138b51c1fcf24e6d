package workloads

import hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

// Deletes: KindDelete ops, and the tickets that order every delete (evictions, expiries,
// overwrites) before the stores issued after it.

// issueDelete takes a ticket for deleting keys (lock held); 0 when there are none.
func (d *Driver) issueDelete(keys []Key) int64 {
	if len(keys) == 0 {
		return 0
	}
	d.delTicket++
	d.delPending[d.delTicket] = struct{}{}
	return d.delTicket
}

// finishDelete deletes keys from the backend and returns the ticket (lock not held).
func (d *Driver) finishDelete(h *[NumPhases]*hdrhistogram.Histogram, keys []Key, ticket int64) error {
	if ticket == 0 {
		return nil
	}
	err := timed(h[PhaseDelete], func() error { return d.be.Delete(keys) })
	d.mu.Lock()
	delete(d.delPending, ticket)
	d.delCond.Broadcast()
	d.mu.Unlock()
	return err
}

// waitDeletes blocks until every delete with a ticket ≤ upTo has returned.
func (d *Driver) waitDeletes(upTo int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		earlier := false
		for t := range d.delPending {
			if t <= upTo {
				earlier = true
				break
			}
		}
		if !earlier {
			return
		}
		d.delCond.Wait()
	}
}

func (d *Driver) delete(h *[NumPhases]*hdrhistogram.Histogram, keys []Key) error {
	d.mu.Lock()
	var gone []Key
	for _, k := range keys {
		if d.res.remove(k) {
			gone = append(gone, k)
		}
	}
	d.c.Deleted += int64(len(gone))
	ticket := d.issueDelete(gone)
	d.mu.Unlock()
	return d.finishDelete(h, gone, ticket)
}
