// Package uring is rbctl's own io_uring layer, written on golang.org/x/sys/unix (no cgo, no
// third-party ring library: none of them exposes the SQE128 command area).
//
// Two levels:
//
//   - Ring is one io_uring instance: Setup with a feature probe, the mmap'd SQ/CQ/SQE
//     regions, 64- or 128-byte SQEs (SQE.Cmd gives the 80-byte command area), 16- or
//     32-byte CQEs (CQE.Big gives the two extra words), Submit/SubmitAndWait, Reap, and
//     registered buffers and files. A Ring is not safe for concurrent use.
//   - Executor owns one Ring on one goroutine locked to its OS thread (so SINGLE_ISSUER and
//     DEFER_TASKRUN are legal) and runs Batches handed to it from any goroutine, keeping up to
//     its depth in flight, matching completions through an index into a preallocated op
//     table (user_data never holds a Go pointer), and re-preparing items that ask for it
//     (short transfers). On a DEFER_TASKRUN ring it waits in the Go netpoller on an eventfd
//     registered with the ring, so its thread holds no P while it waits.
//
// Memory the kernel reads or writes asynchronously must not move: use memory from
// blockdev.Alloc (outside the Go heap) or pin it with runtime.Pinner until its CQE arrives.
// Head and tail words shared with the kernel are read and written with sync/atomic.
//
// See docs/io_uring.md for the design and the kernel versions each feature needs.
package uring
