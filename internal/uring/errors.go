package uring

import (
	"errors"
	"fmt"
	"syscall"
)

// ErrNotSupported is matched (errors.Is) by every NotSupportedError.
var ErrNotSupported = errors.New("io_uring feature not supported by this kernel")

// ErrClosed is returned for work handed to a closed Ring or Executor.
var ErrClosed = errors.New("io_uring: closed")

// NotSupportedError says which feature the running kernel lacks and the first kernel that
// has it, so callers (and tests) can decide whether to skip.
type NotSupportedError struct {
	Feature   string // e.g. "IORING_SETUP_SQE128", "IORING_OP_URING_CMD"
	MinKernel string // e.g. "5.19"
	Err       error  // the errno that revealed it, if any
}

func (e *NotSupportedError) Error() string {
	s := fmt.Sprintf("io_uring: %s needs Linux %s or newer", e.Feature, e.MinKernel)
	if e.Err != nil {
		s += " (" + e.Err.Error() + ")"
	}
	return s
}

func (e *NotSupportedError) Is(target error) bool { return target == ErrNotSupported }
func (e *NotSupportedError) Unwrap() error        { return e.Err }

// errnoRes converts a negative CQE result to an error (nil for res >= 0).
func errnoRes(res int32) error {
	if res >= 0 {
		return nil
	}
	return syscall.Errno(-res)
}
