package nvmetcp

import (
	"math/bits"
	"sync"
)

// Data buffers for commands: powers of two from 4 KiB to the largest transfer, reused so a
// steady stream of writes and reads allocates nothing. Write data is read from the socket
// straight into one of these (never into a PDU buffer copied afterwards), and only when it
// starts to arrive: an R2T the host never answers costs budget, not memory.
const (
	minBufShift = 12
	maxBufShift = 20 // 1 MiB: maxTransferCap, the largest transfer the target allows
)

var bufPools [maxBufShift - minBufShift + 1]sync.Pool

func bufClass(n int) int {
	if n <= 1<<minBufShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minBufShift
}

// getBuf returns a buffer of n bytes (1 <= n <= 1 MiB), zeroed when zero is set: a reply
// buffer is, so that a backend that fills less than it returns never hands a host bytes of
// an earlier command; write data overwrites all of it before use.
func getBuf(n int, zero bool) []byte {
	c := bufClass(n)
	if p, ok := bufPools[c].Get().(*[]byte); ok {
		b := (*p)[:n]
		if zero {
			clear(b)
		}
		return b
	}
	return make([]byte, n, 1<<(c+minBufShift))
}

// putBuf hands a getBuf buffer back; the caller must not use it afterwards.
func putBuf(b []byte) {
	c := bufClass(cap(b))
	if cap(b) != 1<<(c+minBufShift) {
		return // not one of ours
	}
	bufPools[c].Put(&b)
}
