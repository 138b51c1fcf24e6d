// Package blockdev is the device layer the engine writes through: regular files, loop and
// other block devices, and (through adapters in other packages) NVMe passthrough and the
// emulated FDP SSD. Every backend implements Device; the engine sees nothing else.
package blockdev

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/rbctl/rbctl/placement"
)

// Kind says what sort of device a path turned out to be.
type Kind string

const (
	KindFile     Kind = "file"      // regular, pre-sized file
	KindBlock    Kind = "block"     // any block device: loop, null_blk, /dev/nvmeXnY
	KindNVMeChar Kind = "nvme-char" // NVMe generic char device /dev/ngXnY (passthrough)
	KindEmulated Kind = "emulated"  // the in-process emulated FDP SSD
	KindMemory   Kind = "memory"    // test-only memory device
)

// Info describes a device as the engine needs it.
type Info struct {
	Path         string
	Kind         Kind
	Size         int64 // usable bytes
	LogicalBlock int   // bytes; offsets and lengths given to the device are multiples of it when Direct
	MaxTransfer  int   // largest single transfer in bytes the backend issues (0: no limit)
	Direct       bool  // O_DIRECT or passthrough: buffers, offsets and lengths must be aligned
	Handles      int   // placement handles usable with Op.Handle (0: no placement support)
	Deallocate   bool  // Deallocate reaches the medium (DSM, BLKDISCARD where the queue's discard_max_bytes > 0, or punch-hole)
}

// Op is one transfer in a batch given to Device.Submit.
type Op struct {
	Write  bool
	Off    int64
	Buf    []byte           // for Direct devices: aligned (see Alloc) and a multiple of LogicalBlock
	Handle placement.Handle // writes only; placement.None for no directive
	// Tail, when not empty, is written right after Buf as part of the same op: one
	// vectored request (header and payload from different memory, without a copy). Writes
	// only, and only on devices whose VectoredWrites reports true (see VectoredWriter);
	// aligned like Buf on Direct devices. N counts the bytes of Buf and Tail together.
	Tail []byte

	// Set by Submit.
	N   int   // bytes transferred
	Err error // nil when the whole of Buf was transferred
}

// Range is a byte range given to Deallocate.
type Range struct {
	Off, Len int64
}

// Device is a block-addressed store. Implementations are safe for concurrent use: the engine
// calls Submit from several workers at once, and a backend keeps as many operations in flight
// as it is configured for (queue depth), resuming short transfers itself.
type Device interface {
	Info() Info
	// Submit performs every op in the batch and returns when all have completed. Ops in one
	// batch may run concurrently and complete in any order. Each op's outcome is in its Err;
	// the returned error is the first op error (or a failure of the batch as a whole).
	Submit(ops []Op) error
	// Deallocate tells the device the ranges hold no live data (NVMe DSM deallocate,
	// BLKDISCARD, or punching a hole in a file). Devices without support return ErrNotSupported.
	Deallocate(ranges []Range) error
	// Flush makes completed writes durable.
	Flush() error
	Close() error
}

// Len is the op's transfer length: Buf and Tail together.
func (op *Op) Len() int { return len(op.Buf) + len(op.Tail) }

// VectoredWriter is implemented by devices whose Submit takes write ops with a Tail. The
// engine checks VectoredWrites before it hands a device such an op; a wrapper that embeds
// a device and inspects op.Buf must not pass the method on unless it handles Tail too.
type VectoredWriter interface {
	VectoredWrites() bool
}

// Starter is a device that runs a batch in the background: Start queues ops and returns at
// once, and Wait on what it returns blocks until every op has completed and returns what
// Submit would have (Submit is Start followed by Wait). The ops, and their buffers, belong
// to the device until Wait returns; Wait must be called exactly once. The engine uses it to
// checksum and verify payloads while the device works on the rest of a batch. As with
// VectoredWriter, a wrapper that embeds a device and intercepts Submit must not pass Start on.
type Starter interface {
	Start(ops []Op) Started
}

// Started is a batch a Starter is running.
type Started interface {
	Wait() error
}

// Allocator is a device that reserves the space of a byte range ahead of its writes: a
// regular file (fallocate), so that writes there cannot fail with ENOSPC later. The engine
// allocates the metadata region at format and open: a checkpoint that cannot be written
// loses every key acknowledged since the last one.
type Allocator interface {
	Allocate(off, n int64) error
}

// Allocate reserves [off, off+n) of d when d is an Allocator (nil otherwise: a block
// device has its space). An error wraps ErrNotSupported when the filesystem cannot reserve
// space, or the errno (ENOSPC) when it has not enough.
func Allocate(d Device, off, n int64) error {
	if a, ok := d.(Allocator); ok {
		return a.Allocate(off, n)
	}
	return nil
}

// WritesTail reports whether d takes write ops with a Tail.
func WritesTail(d Device) bool {
	v, ok := d.(VectoredWriter)
	return ok && v.VectoredWrites()
}

// BufferRegistrar is implemented by backends that can pre-register the engine's buffer pool
// with the kernel (io_uring fixed buffers). Buffers must come from Alloc and stay alive until Close.
type BufferRegistrar interface {
	RegisterBuffers(bufs [][]byte) error
}

var (
	// ErrNotSupported: the device or kernel cannot do what was asked.
	ErrNotSupported = errors.New("not supported by this device")
	// ErrUnexpectedEOF: a read or write reached the end of the device.
	ErrUnexpectedEOF = errors.New("unexpected EOF")
	// ErrOutOfRange: an op does not lie within the device.
	ErrOutOfRange = errors.New("offset out of device range")
	// ErrMisaligned: an op on a Direct device is not aligned to the logical block size.
	ErrMisaligned = errors.New("misaligned transfer")
	// ErrAioUnavailable: OpenAio could not set up a native AIO context (io_setup failed: no
	// AIO in the kernel, fs.aio-max-nr reached, a policy forbidding it); the file itself
	// opened, and another engine may open it.
	ErrAioUnavailable = errors.New("native AIO unavailable")
)

// ReadAt reads len(p) bytes at off through d.
func ReadAt(d Device, p []byte, off int64) error {
	ops := []Op{{Off: off, Buf: p, Handle: placement.None}}
	return d.Submit(ops)
}

// WriteAt writes p at off through d with placement handle h.
func WriteAt(d Device, p []byte, off int64, h placement.Handle) error {
	ops := []Op{{Write: true, Off: off, Buf: p, Handle: h}}
	return d.Submit(ops)
}

// CheckOp validates an op against a device's geometry; backends call it before issuing I/O.
// A Tail is refused on reads (ErrNotSupported); backends that take tails call it as well.
func CheckOp(info Info, op *Op) error {
	n := int64(op.Len())
	if op.Off < 0 || op.Off+n > info.Size {
		return fmt.Errorf("%w: [%d, %d) on a %d-byte device", ErrOutOfRange, op.Off, op.Off+n, info.Size)
	}
	if len(op.Tail) > 0 && !op.Write {
		return fmt.Errorf("%w: a read with a Tail (tails are for vectored writes)", ErrNotSupported)
	}
	if info.Direct && info.LogicalBlock > 0 {
		lb := int64(info.LogicalBlock)
		if op.Off%lb != 0 || int64(len(op.Buf))%lb != 0 || int64(len(op.Tail))%lb != 0 {
			return fmt.Errorf("%w: offset %d length %d+%d, logical block %d", ErrMisaligned, op.Off, len(op.Buf), len(op.Tail), lb)
		}
	}
	return nil
}

// Aligned reports whether p starts on an n-byte boundary (n <= 1: always).
func Aligned(p []byte, n int) bool {
	return n <= 1 || len(p) == 0 || uintptr(unsafe.Pointer(unsafe.SliceData(p)))%uintptr(n) == 0
}
