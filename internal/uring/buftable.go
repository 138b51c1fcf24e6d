package uring

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kernel limits on registered buffers (IORING_REGISTER_BUFFERS).
const (
	MaxBuffers     = 1 << 14 // buffers per ring
	MaxBufferBytes = 1 << 30 // bytes per buffer
)

// BufferTable is one set of registered (fixed) buffers and the lookup from a data slice
// to the buffer that holds it: what a read or write names as its buffer index. Every user
// of fixed buffers (the blockdev io_uring backend, NVMe passthrough) shares this one
// definition. A table is immutable once made; a nil table holds nothing.
type BufferTable struct {
	bufs  [][]byte
	spans []bufSpan // sorted by start
}

type bufSpan struct {
	start, end uintptr
	idx        uint16
}

// NewBufferTable checks bufs against the kernel's limits and indexes them: buffer i is
// fixed buffer i. The buffers must stay mapped (and not move: memory from sys.Alloc) for
// as long as any ring has them registered.
func NewBufferTable(bufs [][]byte) (*BufferTable, error) {
	if len(bufs) == 0 {
		return nil, errors.New("io_uring: no buffers to register")
	}
	if len(bufs) > MaxBuffers {
		return nil, fmt.Errorf("io_uring: %d buffers, the kernel registers at most %d", len(bufs), MaxBuffers)
	}
	t := &BufferTable{bufs: slices.Clone(bufs), spans: make([]bufSpan, 0, len(bufs))}
	for i, b := range bufs {
		if len(b) == 0 || len(b) > MaxBufferBytes {
			return nil, fmt.Errorf("io_uring: buffer %d has %d bytes; registered buffers hold 1 byte to 1 GiB", i, len(b))
		}
		s := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		t.spans = append(t.spans, bufSpan{start: s, end: s + uintptr(len(b)), idx: uint16(i)})
	}
	slices.SortFunc(t.spans, func(a, b bufSpan) int {
		switch {
		case a.start < b.start:
			return -1
		case a.start > b.start:
			return 1
		}
		return 0
	})
	return t, nil
}

// Len is the number of buffers.
func (t *BufferTable) Len() int {
	if t == nil {
		return 0
	}
	return len(t.bufs)
}

// Lookup returns the index of a buffer that holds all of p.
func (t *BufferTable) Lookup(p []byte) (uint16, bool) {
	if t == nil || len(p) == 0 {
		return 0, false
	}
	s := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	// The last buffer starting at or before s.
	i, found := slices.BinarySearchFunc(t.spans, s, func(b bufSpan, s uintptr) int {
		switch {
		case b.start < s:
			return -1
		case b.start > s:
			return 1
		}
		return 0
	})
	if !found {
		i--
	}
	if i < 0 || s+uintptr(len(p)) > t.spans[i].end {
		return 0, false
	}
	return t.spans[i].idx, true
}

// Holds reports whether buffer idx holds all of p (a caller-chosen index, checked before
// it goes into an SQE).
func (t *BufferTable) Holds(idx int, p []byte) bool {
	if t == nil || idx < 0 || idx >= len(t.bufs) || len(p) == 0 {
		return false
	}
	b := t.bufs[idx]
	base := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	s := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	return s >= base && s+uintptr(len(p)) <= base+uintptr(len(b))
}

// Register makes the table the ring's fixed buffers, replacing any registered before.
func (t *BufferTable) Register(r *Ring) error {
	if err := r.UnregisterBuffers(); err != nil && !errors.Is(err, unix.ENXIO) {
		return err
	}
	return r.RegisterBuffers(t.bufs)
}
