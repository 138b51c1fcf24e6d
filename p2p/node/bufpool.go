package node

import "sync"

// payloadPool keeps payload buffers that callers are done with (Recycle) for the next peer
// fetch to read into: a fetch reading into fresh memory costs more than the copy itself
// (the runtime zeroes it, and it is cold in the cache), measured in docs/p2p.md
// ("Throughput of a peer fetch"). Bounded in bytes; without Recycle it stays empty and
// fetches allocate as before.
type payloadPool struct {
	max int // bytes kept at most

	mu    sync.Mutex
	free  [][]byte
	bytes int
}

// poolBytes bounds what a node keeps for recycling: 4 batches of 16 chunks of 1 MiB.
const poolBytes = 64 << 20

func newPayloadPool(max int) *payloadPool { return &payloadPool{max: max} }

// get returns a buffer of size bytes, a recycled one when one is large enough.
func (p *payloadPool) get(size int) []byte {
	p.mu.Lock()
	for i := len(p.free) - 1; i >= 0; i-- {
		if b := p.free[i]; cap(b) >= size {
			p.free[i] = p.free[len(p.free)-1]
			p.free = p.free[:len(p.free)-1]
			p.bytes -= cap(b)
			p.mu.Unlock()
			return b[:size]
		}
	}
	p.mu.Unlock()
	return make([]byte, size)
}

// put keeps b for a later get unless the pool is full or b is larger than a chunk can be.
func (p *payloadPool) put(b []byte, maxChunk int) {
	if cap(b) == 0 || cap(b) > maxChunk {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bytes+cap(b) > p.max {
		return
	}
	p.free = append(p.free, b[:0])
	p.bytes += cap(b)
}

// Recycle hands back the payloads of results a caller is done with (it must not read or
// keep them after the call): a later peer fetch reads chunks into them instead of into
// fresh memory. Only fetched payloads are taken (Source Peer); optional. Results of GetWith
// with an alloc are in the caller's buffers and must not be recycled.
func (n *Node) Recycle(results []Result) {
	for _, r := range results {
		if r.Source == Peer {
			n.peers.bufs.put(r.Payload, n.maxChunk)
		}
	}
}

// chunkAlloc is where one fetch reads its chunks: into buffers from the caller's alloc when
// GetWith was given one (a RESP GET's lent value buffer), else from the node's payload pool.
// A chunk read and not delivered goes back to the pool only when the pool gave it: a
// caller's buffer is the caller's, and no later fetch may read into memory it has taken back.
type chunkAlloc struct {
	caller func(size int) []byte
	pool   *payloadPool
}

func (a chunkAlloc) get(size int) []byte {
	if a.caller != nil {
		return a.caller(size)
	}
	return a.pool.get(size)
}

func (a chunkAlloc) drop(b []byte, maxChunk int) {
	if a.caller == nil {
		a.pool.put(b, maxChunk)
	}
}
