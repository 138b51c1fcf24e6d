package engine

import (
	"hash/crc32"
	"runtime"
)

// The data path's payload checksums: the same CRC-32C (Castagnoli) as payloadCRC, the value
// the slot header and the checkpoint store, computed so that the CRC instructions read
// cache-hot bytes.
//
// A payload a load has just read with O_DIRECT is not in the CPU cache (the device wrote it
// to memory), and hash/crc32's SSE4.2 loop stalls on each cache miss: on the 2-vCPU VM
// of docs/io_uring.md it checks such a payload at 5–6 GB/s against 22 GB/s for cached
// bytes, which made the CRC the largest CPU cost of a load. Loading one byte of every
// 64-byte line of the next crcChunk bytes first, from four places at once, lets the CPU
// fetch those lines in parallel; the CRC then runs over cached bytes. Measured there:
// 7–8.5 GB/s over payloads just read from the disk. A put copies the payload into its
// staging buffer and checksums it chunk by chunk while the chunk is still cached.

// crcChunk is the span brought into the cache before the CRC runs over it (well inside L2).
const crcChunk = 32 << 10

// touchLines loads one byte of every 64-byte line of p, in four interleaved streams, and
// returns their sum (the caller keeps it alive, so the loads are not dropped; a shared
// global sink would be a data race between concurrent loads).
func touchLines(p []byte) uint8 {
	q := len(p) / 4
	a, b, c, d := p[:q], p[q:2*q], p[2*q:3*q], p[3*q:]
	var s uint8
	for i := 0; i < q; i += 64 {
		s += a[i] + b[i] + c[i] + d[i]
	}
	if len(d) > q { // the tail of an odd length: its last line
		s += d[len(d)-1]
	}
	return s
}

// coldCRC is payloadCRC(p) for bytes that are likely not in the CPU cache: a payload just
// read from the device, or a caller's payload a put writes without copying it.
func coldCRC(p []byte) uint32 {
	var c uint32
	var touched uint8
	for len(p) > 0 {
		n := min(crcChunk, len(p))
		touched += touchLines(p[:n])
		c = crc32.Update(c, castagnoli, p[:n])
		p = p[n:]
	}
	runtime.KeepAlive(touched)
	return c
}

// copyCRC copies src into dst (len(dst) >= len(src)) and returns the payloadCRC of the
// copy (what a put writes, even if the caller changes src meanwhile), checksumming each
// chunk of it while it is cached.
func copyCRC(dst, src []byte) uint32 {
	var c uint32
	for o := 0; o < len(src); o += crcChunk {
		e := min(o+crcChunk, len(src))
		copy(dst[o:e], src[o:e])
		c = crc32.Update(c, castagnoli, dst[o:e])
	}
	return c
}
