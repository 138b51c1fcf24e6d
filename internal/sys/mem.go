package sys

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Alloc returns n bytes of zeroed, page-aligned memory outside the Go heap (an anonymous
// private mmap). The kernel may read or write it asynchronously (O_DIRECT, io_uring, NVMe
// passthrough) and the garbage collector never moves it. Release it with Free.
func Alloc(n int) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("alloc: size %d must be positive", n)
	}
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("alloc %d bytes: mmap: %w", n, err)
	}
	return b, nil
}

// Free releases memory from Alloc: the slice Alloc returned, not a sub-slice.
func Free(b []byte) error {
	if b == nil {
		return nil
	}
	return unix.Munmap(b)
}
