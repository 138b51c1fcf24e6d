package placement

import (
	"strconv"
	"sync/atomic"
)

// noneP never gives a directive.
type noneP struct{}

func (noneP) Place(Write) Handle { return None }
func (noneP) Name() string       { return "none" }

// NewNone returns the policy that sends every write without a placement directive.
func NewNone() Policy { return noneP{} }

// staticP sends every write to one handle.
type staticP struct{ h int }

func (p staticP) Place(Write) Handle { return Handle(p.h) }
func (p staticP) Name() string       { return "static:" + strconv.Itoa(p.h) }

// NewStatic returns the policy that sends every write to handle h (h >= 0; the caller
// checks it against the device).
func NewStatic(h int) Policy { return staticP{h: h} }

// roundRobin cycles over n handles, one write at a time, in call order.
type roundRobin struct {
	n   uint64
	ctr atomic.Uint64
}

func (p *roundRobin) Place(Write) Handle { return Handle((p.ctr.Add(1) - 1) % p.n) }
func (p *roundRobin) Name() string       { return "round-robin" }

// NewRoundRobin returns a policy that cycles through handles 0..n-1 (n >= 1).
func NewRoundRobin(n int) Policy { return &roundRobin{n: uint64(max(n, 1))} }
