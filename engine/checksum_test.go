package engine

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// The data path's checksums must equal payloadCRC (the on-disk value) for every length:
// chunk boundaries, lengths not divisible by four, the empty payload.
func TestDataPathCRCMatchesPayloadCRC(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 4, 5, 63, 64, 65, 255, 4095, 4096, 4097,
		crcChunk - 1, crcChunk, crcChunk + 1, 2*crcChunk + 3, 100<<10 + 7, 61440, 1<<20 - 4096, 1 << 20} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		want := payloadCRC(src)
		if got := coldCRC(src); got != want {
			t.Errorf("len %d: coldCRC %08x, payloadCRC %08x", n, got, want)
		}
		dst := bytes.Repeat([]byte{0xA5}, n+9)
		if got := copyCRC(dst, src); got != want {
			t.Errorf("len %d: copyCRC %08x, payloadCRC %08x", n, got, want)
		}
		if !bytes.Equal(dst[:n], src) || !bytes.Equal(dst[n:], bytes.Repeat([]byte{0xA5}, 9)) {
			t.Errorf("len %d: copyCRC copied wrong bytes or wrote past len(src)", n)
		}
		if n > 0 { // one flipped bit anywhere changes the checksum
			src[rng.IntN(n)] ^= 1 << rng.IntN(8)
			if coldCRC(src) == want {
				t.Errorf("len %d: a flipped bit left coldCRC unchanged", n)
			}
		}
	}
}

func FuzzDataPathCRC(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("LMCBLK01"))
	f.Add(bytes.Repeat([]byte{0xFF}, crcChunk+5))
	f.Fuzz(func(t *testing.T, p []byte) {
		want := payloadCRC(p)
		dst := make([]byte, len(p))
		if coldCRC(p) != want || copyCRC(dst, p) != want || !bytes.Equal(dst, p) {
			t.Fatalf("len %d: data-path checksum differs from payloadCRC", len(p))
		}
	})
}

func BenchmarkDataPathCRC(b *testing.B) {
	for _, n := range []int{61440, 1<<20 - 4096} {
		// 256 MiB of buffers, cycled: like payloads just read with O_DIRECT, not cached.
		const span = 256 << 20
		mem := make([]byte, span)
		for i := range mem {
			mem[i] = byte(i * 7)
		}
		k := span / n
		b.Run(sizeLabel(n)+"/stdlib", func(b *testing.B) {
			b.SetBytes(int64(n))
			i := 0
			for b.Loop() {
				payloadCRC(mem[i*n : (i+1)*n])
				i = (i + 1) % k
			}
		})
		b.Run(sizeLabel(n)+"/loaded", func(b *testing.B) {
			b.SetBytes(int64(n))
			i := 0
			for b.Loop() {
				coldCRC(mem[i*n : (i+1)*n])
				i = (i + 1) % k
			}
		})
	}
}

func sizeLabel(n int) string {
	if n >= 1<<20-4096 {
		return "1MiB-slot"
	}
	return "64KiB-slot"
}
