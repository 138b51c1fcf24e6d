package blockdev

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Alloc returns n bytes of zeroed, page-aligned memory outside the Go heap (an anonymous
// mmap), suitable for O_DIRECT, io_uring and NVMe passthrough: the kernel may write into it
// asynchronously and the garbage collector never moves it. Release it with Free.
func Alloc(n int) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("blockdev.Alloc: size %d must be positive", n)
	}
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("blockdev.Alloc(%d): mmap: %w", n, err)
	}
	return b, nil
}

// Free releases memory from Alloc. The slice must be the one Alloc returned (not a sub-slice).
func Free(b []byte) error {
	if b == nil {
		return nil
	}
	return unix.Munmap(b)
}
