// Package torture is rbctl's crash-torture harness: a writer process drives the engine
// (puts, deletes, loads, lock/unlock, checkpoints) on a file-backed device and logs every
// intent and acknowledgement to an fsync'ed side file; the harness SIGKILLs it at random
// points, recovers the device image and checks that recovery never serves wrong bytes, never
// owns a slot twice, never leaks a slot, and keeps every key acknowledged before the last
// completed checkpoint. See docs/reliability.md.
package torture

import (
	"encoding/binary"

	"github.com/rbctl/rbctl/engine"
)

// keyModel is the model name of every torture key; keys are told apart by their index.
const keyModel = "rbctl/torture"

// fillBase is the first index of the keys the verifier uses to fill the cache (leak check);
// writer keys stay below it.
const fillBase = 1 << 40

// KeyFor returns the engine key of torture key idx. The index is the chunk hash (8 bytes,
// big-endian) so it can be parsed back from the encoded key.
func KeyFor(idx uint64) engine.Key {
	var h [8]byte
	binary.BigEndian.PutUint64(h[:], idx)
	salt := ""
	if idx%3 == 0 {
		salt = "tenant-a"
	}
	return engine.ObjectKey(keyModel, uint32(idx%4), h[:], salt)
}

// IndexOf parses a torture key back to its index.
func IndexOf(k engine.Key) (uint64, bool) {
	p, ok := k.Parts()
	if !ok || p.Model != keyModel || len(p.ChunkHash) != 8 {
		return 0, false
	}
	idx := binary.BigEndian.Uint64(p.ChunkHash)
	if KeyFor(idx).String() != k.String() {
		return 0, false
	}
	return idx, true
}

func mix(x uint64) uint64 { // splitmix64 finaliser
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// PayloadSize is the payload length of version ver of key idx: between 16 bytes and max.
// About a quarter of the versions of 4 KiB or more are rounded down to whole 4 KiB blocks,
// so the engine writes them in place (zero-copy puts, a vectored write) where the device
// takes it; the others are copied behind their header.
func PayloadSize(idx, ver uint64, max int) int {
	if max <= 16 {
		return max
	}
	h := mix(idx*0x100000001b3 ^ ver)
	n := 16 + int(h%uint64(max-16+1))
	if h>>62 == 0 && n >= 4096 {
		n -= n % 4096
	}
	return n
}

// FillPayload writes the payload of version ver of key idx into p (len(p) is its size):
// the index and version (LE) followed by a stream determined by both, so any byte served for
// the wrong key, the wrong version, or torn from another write is detected.
func FillPayload(p []byte, idx, ver uint64) {
	var hdr [16]byte
	binary.LittleEndian.PutUint64(hdr[0:], idx)
	binary.LittleEndian.PutUint64(hdr[8:], ver)
	n := copy(p, hdr[:])
	s := mix(idx ^ mix(ver))
	for ; n+8 <= len(p); n += 8 {
		s = mix(s)
		binary.LittleEndian.PutUint64(p[n:], s)
	}
	if n < len(p) {
		var t [8]byte
		binary.LittleEndian.PutUint64(t[:], mix(s))
		copy(p[n:], t[:])
	}
}

// Payload returns the payload of version ver of key idx, PayloadSize(idx, ver, max) bytes.
func Payload(idx, ver uint64, max int) []byte {
	p := make([]byte, PayloadSize(idx, ver, max))
	FillPayload(p, idx, ver)
	return p
}
