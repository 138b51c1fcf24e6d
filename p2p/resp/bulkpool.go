package resp

import (
	"bytes"
	"math/bits"
	"sync"
)

// pooledBulk is the length from which a SET's or MSET's value is read into a buffer lent by
// bulkPools instead of a new allocation. A 256 KiB value allocated per SET cost the
// runtime's zeroing of it, fresh pages and a garbage collection every few hundred SETs: a
// third of a SET's CPU on a memory-backed device (perf, docs/resp.md).
const pooledBulk = 64 << 10

// bulkBuf is one lent buffer; the pools hold the struct so that giving one back allocates
// nothing.
type bulkBuf struct{ b []byte }

// bulkPools are size classes of four steps per power of two (a buffer is at most a quarter
// longer than its value: 256 KiB values take 256 KiB buffers, 1 MiB + 4 KiB ones 1.25 MiB).
// A class's idle buffers are the Go heap's: a sync.Pool drops them over two garbage
// collections, and what is lent is taken from the server's request budget (Reader.take).
var bulkPools [4 * 64]sync.Pool

// bulkClass is the class of an l-byte value (l >= pooledBulk) and its buffers' length.
func bulkClass(l int64) (class int, size int64) {
	e := bits.Len64(uint64(l-1)) - 1 // 2^e < l <= 2^(e+1)
	step := int64(1) << e / 4
	q := (l + step - 1) / step // 5..8 steps of 2^e / 4
	return e*4 + int(q-5), q * step
}

func lendBulk(l int64) *bulkBuf {
	c, size := bulkClass(l)
	if v := bulkPools[c].Get(); v != nil {
		bb := v.(*bulkBuf)
		bb.b = bb.b[:l]
		return bb
	}
	return &bulkBuf{b: make([]byte, l, size)}
}

func returnBulk(bb *bulkBuf) {
	c, _ := bulkClass(int64(cap(bb.b)))
	bulkPools[c].Put(bb)
}

// valueArg reports whether argument i of a request whose first argument is name is a value
// SET or MSET stores: the only arguments read into lent buffers, because the store is done
// with them when the command returns (it writes them to the device, or copies them). Keys
// and other arguments may be kept past the request (a recording, a client's name).
func valueArg(name []byte, i int) bool {
	switch {
	case i < 2:
		return false
	case len(name) == 3 && bytes.EqualFold(name, []byte("SET")):
		return i == 2
	case len(name) == 4 && bytes.EqualFold(name, []byte("MSET")):
		return i%2 == 0
	}
	return false
}
