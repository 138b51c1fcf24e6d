package blockdev

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/rbctl/rbctl/placement"
)

// BenchmarkUringSubmitters reads random 64 KiB slots of a written O_DIRECT file from many
// goroutines (b.RunParallel), each Submit a batch of 8, with one ring and with two: the
// C6 shape (several rings, each owned by its own goroutine) against a single ring.
func BenchmarkUringSubmitters(b *testing.B) {
	const size, bs, batch = 64 << 20, 64 << 10, 8
	path := uringTestFile(b, size)
	for _, rings := range []int{1, 2} {
		b.Run(fmt.Sprintf("rings=%d", rings), func(b *testing.B) {
			d := openUringOrSkip(b, path, UringOptions{QueueDepth: 32, Rings: rings})
			fill := uringAlloc(b, size)
			uringPattern(fill, 1)
			if err := WriteAt(d, fill, 0, placement.None); err != nil {
				b.Fatal(err)
			}
			var seed atomic.Uint64
			b.SetBytes(bs * batch)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				rng := rand.New(rand.NewPCG(seed.Add(1), 7))
				buf := uringAlloc(b, bs*batch)
				ops := make([]Op, batch)
				for pb.Next() {
					for i := range ops {
						ops[i] = Op{Off: rng.Int64N(size/bs) * bs, Buf: buf[i*bs : (i+1)*bs]}
					}
					if err := d.Submit(ops); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
