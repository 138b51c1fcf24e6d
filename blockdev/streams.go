package blockdev

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Kernel write streams (Linux 6.16): a block device whose queue/max_write_streams is above
// 0 accepts a stream number 1..max on each write (io_uring's sqe.write_stream); the NVMe
// driver sends stream s as a data-placement directive with the PID of the namespace's
// s-th placement handle (RUH status index s-1). The io_uring backend maps placement
// handle h to stream h+1 (UringDevice). A kernel before 6.16 has no such attribute and
// silently ignores the SQE byte, so the attribute's absence is what tells them apart.

var (
	// ErrWriteStreamsKernel: the running kernel has no block-layer write streams; errors.Is
	// with ErrNotSupported holds too.
	ErrWriteStreamsKernel error = notSupported("kernel write streams not supported, needs Linux 6.16")
	// ErrNoWriteStreams: the kernel has write streams, this device has none (no FDP, FDP
	// with several reclaim groups, a partition, a file); errors.Is with ErrNotSupported holds.
	ErrNoWriteStreams error = notSupported("no write streams on this device")
)

// notSupported is an error of its own text that also matches ErrNotSupported.
type notSupported string

func (e notSupported) Error() string        { return string(e) }
func (e notSupported) Is(target error) bool { return target == ErrNotSupported }

// WriteStreams is what a block device offers.
type WriteStreams struct {
	Max         int   // streams 1..Max (queue/max_write_streams)
	Granularity int64 // bytes (queue/write_stream_granularity: the reclaim unit size on NVMe FDP)
}

// sysBlockDir is /sys/dev/block, where the block device attributes are read (streams,
// discard support, a loop device's backing file); a variable for tests.
var sysBlockDir = "/sys/dev/block"

// BlockWriteStreams reports the write streams of the block device at path, or an error
// wrapping ErrWriteStreamsKernel (kernel before 6.16) or ErrNoWriteStreams (not a block
// device). Max 0 means the kernel has write streams and this device has none.
func BlockWriteStreams(path string) (WriteStreams, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return WriteStreams{}, fmt.Errorf("write streams of %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return WriteStreams{}, fmt.Errorf("%s: %w (not a block device)", path, ErrNoWriteStreams)
	}
	return blockWriteStreams(st.Rdev, path)
}

func blockWriteStreams(rdev uint64, path string) (WriteStreams, error) {
	dir := filepath.Join(sysBlockDir, fmt.Sprintf("%d:%d", unix.Major(rdev), unix.Minor(rdev)))
	if _, err := os.Stat(filepath.Join(dir, "partition")); err == nil {
		// Partitions have no queue of their own, and the kernel gives them no streams.
		return WriteStreams{}, nil
	}
	return readWriteStreams(filepath.Join(dir, "queue"), path)
}

// readWriteStreams reads max_write_streams and write_stream_granularity in a queue
// directory. The values are bounded: the stream number is one byte on the SQE.
func readWriteStreams(queue, path string) (WriteStreams, error) {
	read := func(name string, limit int64) (int64, error) {
		b, err := os.ReadFile(filepath.Join(queue, name))
		if err != nil {
			return 0, err
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || v < 0 || v > limit {
			return 0, fmt.Errorf("%s: queue/%s = %q: want 0..%d", path, name, strings.TrimSpace(string(b)), limit)
		}
		return v, nil
	}
	max, err := read("max_write_streams", 255)
	if errors.Is(err, os.ErrNotExist) {
		if _, qerr := os.Stat(queue); qerr != nil {
			return WriteStreams{}, fmt.Errorf("write streams of %s: %w", path, qerr)
		}
		return WriteStreams{}, fmt.Errorf("%s: %w (this kernel, %s, has no queue/max_write_streams)", path, ErrWriteStreamsKernel, kernelRelease())
	}
	if err != nil {
		return WriteStreams{}, err
	}
	ws := WriteStreams{Max: int(max)}
	if max > 0 {
		if ws.Granularity, err = read("write_stream_granularity", 1<<62); err != nil && !errors.Is(err, os.ErrNotExist) {
			return WriteStreams{}, err
		}
	}
	return ws, nil
}

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return "Linux " + unix.ByteSliceToString(u.Release[:])
}
