package safety

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// How the gate tells data it does not recognise from a blank target: it reads all of a
// target up to fullScan bytes; of a larger one the first headBytes, the last probeBytes, probeBlocks blocks spread evenly between them and, in a
// regular file, the start of each of its first probeExtents data extents (SEEK_DATA: what
// was written into a sparse file is found wherever it is). A target whose every byte read
// is zero passes; anything else is data and formatting destroys it.
const (
	probeBytes   = 4 << 10
	probeBlocks  = 256
	probeExtents = 256
	fullScan     = 16 << 20
)

// firstData returns the offset of a non-zero byte in r (size bytes), or -1 when every byte
// the probes read is zero.
func firstData(r io.ReaderAt, size int64) (int64, error) {
	if size <= 0 {
		return -1, nil
	}
	buf := make([]byte, min(size, headBytes))
	read := func(off int64, n int64) (int64, error) {
		if off < 0 || off >= size {
			return -1, nil
		}
		b := buf[:min(n, size-off, int64(len(buf)))]
		k, err := r.ReadAt(b, off)
		if err != nil && !errors.Is(err, io.EOF) {
			return -1, err
		}
		for i, c := range b[:k] {
			if c != 0 {
				return off + int64(i), nil
			}
		}
		return -1, nil
	}
	offs := []int64{0}
	if size <= fullScan {
		for off := int64(headBytes); off < size; off += headBytes {
			offs = append(offs, off)
		}
	} else {
		offs = append(offs, (size-probeBytes)&^(probeBytes-1))
		step := (size - headBytes) / (probeBlocks + 1)
		for i := int64(1); i <= probeBlocks && step >= probeBytes; i++ {
			offs = append(offs, (headBytes+i*step)&^(probeBytes-1))
		}
	}
	offs = append(offs, extentStarts(r, size)...)
	for i, off := range offs {
		n := int64(probeBytes)
		if i == 0 || size <= fullScan {
			n = headBytes
		}
		at, err := read(off, n)
		if err != nil || at >= 0 {
			return at, err
		}
	}
	return -1, nil
}

// extentStarts is where a regular file's first data extents begin (nothing for a device,
// or where SEEK_DATA is not supported).
func extentStarts(r io.ReaderAt, size int64) []int64 {
	f, ok := r.(*os.File)
	if !ok {
		return nil
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	var offs []int64
	fd := int(f.Fd())
	for off := int64(0); off < size && len(offs) < probeExtents; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if err != nil || data >= size {
			break // ENXIO: no data after off
		}
		offs = append(offs, data)
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil || hole <= data {
			break
		}
		off = hole
	}
	return offs
}
