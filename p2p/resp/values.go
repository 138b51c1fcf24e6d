package resp

import (
	"context"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rbctl/rbctl/blockdev"
)

// ValuePool lends GET and MGET the buffers their values are loaded into (a Store that is a
// ValueLoader loads into them), so that a GET allocates no value: the buffer is taken before
// the store loads, the value goes from it to the socket in one writev (replyWriter.direct),
// and it is given back as soon as that write returns — a connection holds at most one.
//
// Every buffer is Size bytes (the largest value, whole 4 KiB pages) and page-aligned, so an
// O_DIRECT load reads straight into it with no bounce buffer and no copy. The buffers are
// one mapping outside the Go heap (Arena), which the node registers with its devices
// (engine.RegisterMemory: io_uring fixed buffers, no page pinning per read) and the garbage
// collector never scans. When every one of them is lent (more GETs at once than the arena
// holds), a GET takes a spare from the Go heap, whose bytes are taken from the server's
// request budget (Server.Budget) for as long as it is lent — waiting, as a request's
// arguments wait, while the budget is full — and dropped when it is given back: spares
// never hold more than the budget, and no network peer can make the pool grow past it.
type ValuePool struct {
	size   int
	arena  []byte
	bufs   [][]byte // the arena cut in buffers
	free   chan []byte
	spares atomic.Int64 // heap buffers lent now (resp_value_spares)
	made   atomic.Int64 // heap buffers made so far (resp_value_spares_made)
	lent   atomic.Int64 // buffers lent now, arena and heap (resp_value_lent)
}

const pageBytes = 4096

// NewValuePool makes a pool of buffers for values up to maxValue bytes with n of them in
// the arena (n × the rounded size mapped at once; 0: none, every buffer a spare).
func NewValuePool(maxValue, n int) (*ValuePool, error) {
	size := (max(maxValue, 1) + pageBytes - 1) / pageBytes * pageBytes
	p := &ValuePool{size: size, free: make(chan []byte, max(n, 0))}
	if n > 0 {
		a, err := blockdev.Alloc(n * size)
		if err != nil {
			return nil, err
		}
		p.arena = a
		for i := range n {
			b := a[i*size : (i+1)*size : (i+1)*size]
			p.bufs = append(p.bufs, b)
			p.free <- b
		}
	}
	return p, nil
}

// Size is the length of every buffer.
func (p *ValuePool) Size() int { return p.size }

// Arena is the pool's fixed buffers, for engine.RegisterMemory; nil without an arena.
func (p *ValuePool) Arena() [][]byte { return p.bufs }

// Close unmaps the arena; nothing may be lent or registered by then.
func (p *ValuePool) Close() error {
	if p.arena == nil {
		return nil
	}
	a := p.arena
	p.arena, p.bufs = nil, nil
	return blockdev.Free(a)
}

// take lends a buffer of Size bytes: an arena buffer when one is free, else a heap spare
// whose bytes are taken from b (nil: unbounded, for a pool without a server's budget) as
// Budget.acquire takes them, waiting until ctx ends or, past maxWait, ErrBusy.
func (p *ValuePool) take(ctx context.Context, b *Budget, maxWait time.Duration) ([]byte, error) {
	select {
	case buf := <-p.free:
		p.lent.Add(1)
		return buf, nil
	default:
	}
	if b != nil {
		if err := b.acquire(ctx, int64(p.size), maxWait); err != nil {
			return nil, err
		}
	}
	p.lent.Add(1)
	p.spares.Add(1)
	p.made.Add(1)
	buf := make([]byte, p.size+pageBytes)
	off := (pageBytes - int(uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%pageBytes)) % pageBytes
	return buf[off : off+p.size : off+p.size], nil
}

// give takes back a buffer take lent: an arena buffer is kept, a spare dropped and its
// bytes given back to b.
func (p *ValuePool) give(buf []byte, b *Budget) {
	p.lent.Add(-1)
	if p.owns(buf) {
		p.free <- buf[:p.size:p.size]
		return
	}
	p.spares.Add(-1)
	if b != nil {
		b.release(int64(p.size))
	}
}

func (p *ValuePool) owns(b []byte) bool {
	if p.arena == nil || cap(b) == 0 {
		return false
	}
	s := uintptr(unsafe.Pointer(unsafe.SliceData(p.arena)))
	q := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return q >= s && q < s+uintptr(len(p.arena))
}

// ValueLoader is a Store whose GET loads into memory the dispatcher lends (Server.Values):
// GetInto is Get with the value loaded into a buffer from alloc (which may be longer than
// the value, and aligned; the value is cut from it). The buffer is the dispatcher's again
// once the reply is written, so the value returned must not be kept.
type ValueLoader interface {
	GetInto(key Key, alloc func(size int) []byte) (val []byte, found bool, err error)
}

// get loads k's value, into a lent buffer when the store takes one. The buffer is taken
// before the store is asked (a spare may wait for the budget: no store call holds a pin
// meanwhile); it is given back by giveBack once the reply is written.
func (s *Server) get(ss *session, k Key) ([]byte, bool, error) {
	vl, ok := s.Store.(ValueLoader)
	if !ok || s.Values == nil || k.Err != nil {
		return s.Store.Get(k)
	}
	wait := time.Duration(0)
	if ss.held > 0 { // the request's own bytes are held: two such waits must not wait for ever
		wait = s.budgetWait()
	}
	buf, err := s.Values.take(ss.ctx, s.Budget, wait)
	if err != nil {
		return nil, false, err
	}
	ss.lent = buf
	if ss.alloc == nil {
		ss.alloc = func(n int) []byte {
			if b := ss.lent; b != nil && n <= len(b) && !ss.used {
				ss.used = true
				return b
			}
			return make([]byte, n) // a second value of one load, or one over Size: no store of this pool's size has one
		}
	}
	ss.used = false
	return vl.GetInto(k, ss.alloc)
}

// giveBack returns what the session's last load was lent (its reply is written).
func (s *Server) giveBack(ss *session) {
	if ss.lent != nil {
		s.Values.give(ss.lent, s.Budget)
		ss.lent, ss.used = nil, false
	}
}

// valueStats adds the pool's figures to the server's Stats.
func (p *ValuePool) stats(m map[string]int64) {
	m["resp_value_lent"], m["resp_value_spares"], m["resp_value_spares_made"] = p.lent.Load(), p.spares.Load(), p.made.Load()
}
