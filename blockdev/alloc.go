package blockdev

import "github.com/rbctl/rbctl/internal/sys"

// Alloc returns n bytes of zeroed, page-aligned memory outside the Go heap (an anonymous
// mmap), suitable for O_DIRECT, io_uring and NVMe passthrough: the kernel may write into it
// asynchronously and the garbage collector never moves it. Release it with Free.
func Alloc(n int) ([]byte, error) { return sys.Alloc(n) }

// Free releases memory from Alloc. The slice must be the one Alloc returned (not a sub-slice).
func Free(b []byte) error { return sys.Free(b) }
