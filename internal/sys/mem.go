package sys

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// HugePage is the transparent huge page size Alloc aligns large buffers to.
const HugePage = 2 << 20

var pageSize = os.Getpagesize()

// Alloc returns n bytes of zeroed, page-aligned memory outside the Go heap (an anonymous
// private mmap). The kernel may read or write it asynchronously (O_DIRECT, io_uring, NVMe
// passthrough) and the garbage collector never moves it. Release it with Free.
//
// Buffers of HugePage bytes or more start on a HugePage boundary, are mapped in whole huge
// pages (their tail too) and are advised MADV_HUGEPAGE, so that where the kernel grants
// transparent huge pages a transfer is physically contiguous: a 1 MiB write from 4 KiB pages is 256 segments, more than a
// virtio disk takes in one request (max_segments 254), and the block layer splits it in
// two; from one huge page it is one segment and one request. Without huge pages (THP off,
// or none free) the memory is the same as before.
func Alloc(n int) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("alloc: size %d must be positive", n)
	}
	length := mappedLen(n)
	extra := 0
	if n >= HugePage {
		extra = HugePage // room to slide the start to a huge page boundary
	}
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(length+extra), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("alloc %d bytes: mmap: %w", n, err)
	}
	if extra > 0 {
		head := (HugePage - int(uintptr(p)%HugePage)) % HugePage // bytes before the boundary
		// Give back what lies outside [boundary, boundary+length).
		if head > 0 {
			if err := unix.MunmapPtr(p, uintptr(head)); err != nil {
				unix.MunmapPtr(p, uintptr(length+extra))
				return nil, fmt.Errorf("alloc %d bytes: trimming the mapping: %w", n, err)
			}
		}
		p = unsafe.Add(p, head)
		if tail := extra - head; tail > 0 {
			if err := unix.MunmapPtr(unsafe.Add(p, length), uintptr(tail)); err != nil {
				unix.MunmapPtr(p, uintptr(length))
				return nil, fmt.Errorf("alloc %d bytes: trimming the mapping: %w", n, err)
			}
		}
	}
	if extra > 0 {
		_ = unix.Madvise(unsafe.Slice((*byte)(p), length), unix.MADV_HUGEPAGE) // advice: EINVAL without THP
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// Free releases memory from Alloc: the slice Alloc returned, not a sub-slice.
func Free(b []byte) error {
	if b == nil {
		return nil
	}
	return unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(mappedLen(cap(b))))
}

// mappedLen is the length of Alloc's mapping for n bytes: whole pages, and from HugePage
// bytes on whole huge pages, so that the buffer's last bytes lie in a huge page too. A
// 3.75 MiB buffer mapped to the page had its last 1.75 MiB in 4 KiB pages (the kernel backs
// only whole aligned 2 MiB runs with a huge page), and writes from there reached the disk
// as a segment per page (docs/io_uring.md, "engine-put 64 KiB: the ring kept full").
func mappedLen(n int) int {
	if n >= HugePage {
		return roundUp(n, HugePage)
	}
	return roundUp(n, pageSize)
}

func roundUp(n, to int) int { return (n + to - 1) / to * to }
