package resp

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/rbctl/rbctl/engine"
)

// A SET the store does not keep is answered +OK and its value dropped, as a cache may evict
// a value at once (docs/resp.md, "What +OK promises"): LMCache's client reads exactly the 5
// bytes of "+OK\r\n" after a SET, so any other reply would pair every later reply on the
// connection with the wrong request. Each drop is counted by its reason
// (resp_set_dropped/REASON in the node's stats, INFO's rbctl_set_dropped_REASON) and the first
// of each reason is logged.
const (
	DropTooLarge = "too_large" // the value is larger than a slot's payload (Store.MaxValue)
	DropEmpty    = "empty"     // a zero-length value (a slot holds 1 byte or more)
	DropFull     = "full"      // no slot could be had (eviction none, or every slot pinned)
	DropDeclined = "declined"  // the node's admission policy declined the write
	DropKey      = "key"       // the store does not take the key (ErrKey)
	// DropIndexRoom: the key's index entry would not fit the checkpoint (a very long model
	// name or key; engine.ErrIndexFull, docs/engine.md "Room in the checkpoint").
	DropIndexRoom = "index_room"
	// DropCheckpointFailing: checkpoints have failed for longer than the crash window, so
	// the node keeps nothing new until one succeeds (engine.ErrCheckpointFailing).
	DropCheckpointFailing = "checkpoint_failing"
	DropError             = "error" // any other store error: an I/O error
)

// DropReasons lists the reasons in the order stats show them.
var DropReasons = []string{DropTooLarge, DropEmpty, DropFull, DropDeclined, DropKey, DropIndexRoom, DropCheckpointFailing, DropError}

// Dropped is a store's refusal to keep a value, with its reason (one of DropReasons).
type Dropped struct {
	Reason string
	Err    error
}

func (d *Dropped) Error() string { return fmt.Sprintf("not stored (%s): %v", d.Reason, d.Err) }
func (d *Dropped) Unwrap() error { return d.Err }

// drop returns a Dropped error.
func drop(reason string, format string, a ...any) error {
	return &Dropped{Reason: reason, Err: fmt.Errorf(format, a...)}
}

// dropReason classifies a Store.Set error.
func dropReason(err error) string {
	var d *Dropped
	switch {
	case errors.As(err, &d):
		return d.Reason
	case errors.Is(err, ErrKey):
		return DropKey
	case errors.Is(err, engine.ErrIndexFull):
		return DropIndexRoom
	case errors.Is(err, engine.ErrCheckpointFailing):
		return DropCheckpointFailing
	}
	return DropError
}

// dropCounters count drops by reason; logged remembers which reasons were logged.
type dropCounters struct {
	n      [8]atomic.Int64 // as DropReasons
	logged [8]atomic.Bool
}

func reasonIndex(r string) int {
	for i, x := range DropReasons {
		if x == r {
			return i
		}
	}
	return len(DropReasons) - 1
}

// dropped counts a SET not kept and logs the first of its reason.
func (s *Server) dropped(key []byte, err error) {
	i := reasonIndex(dropReason(err))
	s.drops.n[i].Add(1)
	if s.Logger != nil && s.drops.logged[i].CompareAndSwap(false, true) {
		s.Logger.Warn("RESP SET answered +OK without keeping the value (counted in resp_set_dropped; logged once per reason)",
			"reason", DropReasons[i], "key", printableArg(key), "err", err)
	}
}

// getFailed counts a GET answered as a miss because the store failed (an I/O error) and
// logs the first.
func (s *Server) getFailed(key []byte, err error) {
	s.getErrs.Add(1)
	if s.Logger != nil && s.getLogged.CompareAndSwap(false, true) {
		s.Logger.Warn("RESP GET answered as a miss because the store failed (counted in resp_get_failed; logged once)",
			"key", printableArg(key), "err", err)
	}
}
