package blockdev

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rbctl/rbctl/internal/sys"
	"github.com/rbctl/rbctl/internal/uring"
	"golang.org/x/sys/unix"
)

// UringOptions configure OpenUring.
type UringOptions struct {
	QueueDepth int  // ops in flight per ring (default 32)
	Rings      int  // rings, each owned by its own goroutine (default min(GOMAXPROCS, 4))
	Buffered   bool // open without O_DIRECT (default: O_DIRECT)
	ReadOnly   bool
	Exclusive  bool // O_EXCL on block devices: fail if mounted or otherwise claimed
	SQPoll     bool // kernel SQ polling thread per ring (costs a CPU each)
	// NoFixedFile disables registering the device fd with each ring (IOSQE_FIXED_FILE).
	NoFixedFile bool
	// Ring overrides the ring setup (nil: SINGLE_ISSUER|DEFER_TASKRUN where the kernel has
	// them, or SQPOLL with SQPoll). Entries is raised to fit QueueDepth.
	Ring *uring.Options
	// WriteStreams requires kernel write streams: OpenUring fails with an error wrapping
	// ErrWriteStreamsKernel (Linux < 6.16) or ErrNoWriteStreams (the device has none)
	// instead of opening a device whose placement handles would be dropped. Without it a
	// block device with write streams still uses them (Info.Handles > 0), and one without
	// opens with Info.Handles = 0.
	WriteStreams bool
	// NoWriteStreams opens a block device without using its write streams (Handles = 0).
	NoWriteStreams bool
}

// uringMaxChunk caps one SQE's length (len is 32 bits); longer ops continue like short ones.
const uringMaxChunk = 1 << 30

// UringDevice is a Device on io_uring: O_DIRECT reads and writes on a file or block device,
// spread over a few rings each owned by one goroutine (see uring.Executor). Submit puts all
// ops of a batch into as few io_uring_enter calls as the queue depth allows, keeps up to
// QueueDepth ops in flight per ring, resubmits short transfers, and uses fixed (registered)
// buffers for ops whose Buf lies inside a buffer given to RegisterBuffers.
type UringDevice struct {
	f         *os.File
	fd        int
	info      Info
	execs     []*uring.Executor
	rr        atomic.Uint32
	fixedFile bool
	readOnly  bool
	exclusive bool     // an O_EXCL claim on a block device, released by Close
	backing   *os.File // the file behind a loop device, open for its lock (lockLoopBacking)
	maxChunk  int      // largest single SQE transfer (uringMaxChunk; smaller in tests)

	streams   WriteStreams // the block device's write streams (Max 0: none used)
	streamErr error        // why there are none (nil when streams are in use)

	fixedOps, plainOps, vectoredOps, resubmits atomic.Int64

	regMu  sync.Mutex                        // serialises RegisterBuffers
	regs   atomic.Pointer[uring.BufferTable] // immutable once published
	closed atomic.Bool
}

var (
	_ Device          = (*UringDevice)(nil)
	_ BufferRegistrar = (*UringDevice)(nil)
	_ Starter         = (*UringDevice)(nil)
)

// OpenUring opens path (a pre-sized regular file or a block device) for I/O through io_uring.
func OpenUring(path string, opt UringOptions) (*UringDevice, error) {
	if opt.QueueDepth <= 0 {
		opt.QueueDepth = 32
	}
	if opt.Rings <= 0 {
		opt.Rings = min(runtime.GOMAXPROCS(0), 4)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err) // the path, not our I/O engine, is what is wrong
	}
	isBlock := st.Mode&unix.S_IFMT == unix.S_IFBLK
	if !isBlock && st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("uring device %s: not a regular file or block device (use the NVMe transport for /dev/ng*)", path)
	}
	flags := unix.O_CLOEXEC | os.O_RDWR
	if opt.ReadOnly {
		flags = unix.O_CLOEXEC | os.O_RDONLY
	}
	if !opt.Buffered {
		flags |= unix.O_DIRECT
	}
	if isBlock && opt.Exclusive {
		flags |= unix.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		if errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("uring device %s: in use (mounted or claimed); unmount it or open without exclusive: %w", path, err)
		}
		if errors.Is(err, unix.EINVAL) && !opt.Buffered {
			return nil, fmt.Errorf("uring device %s: O_DIRECT refused by the filesystem (tmpfs?); put the file elsewhere or use buffered I/O: %w", path, err)
		}
		return nil, fmt.Errorf("uring device %s: %w", path, err)
	}
	var backing *os.File
	if !isBlock {
		if err := LockFD(int(f.Fd()), path, !opt.ReadOnly); err != nil { // as OpenFile
			f.Close()
			return nil, err
		}
	} else if backing, err = lockLoopBacking(path, st.Rdev, !opt.ReadOnly); err != nil {
		f.Close()
		return nil, err
	}
	d := &UringDevice{f: f, fd: int(f.Fd()), readOnly: opt.ReadOnly, maxChunk: uringMaxChunk, exclusive: isBlock && opt.Exclusive, backing: backing}
	d.info, err = uringGeometry(f, path, isBlock, !opt.Buffered)
	if err != nil {
		f.Close()
		return nil, err
	}
	if isBlock && !opt.NoWriteStreams {
		d.streams, d.streamErr = blockWriteStreams(st.Rdev, path)
		if d.streamErr == nil && d.streams.Max == 0 {
			d.streamErr = fmt.Errorf("%s: %w (queue/max_write_streams is 0)", path, ErrNoWriteStreams)
		}
		if d.streamErr != nil {
			d.streams = WriteStreams{}
		}
		d.info.Handles = d.streams.Max
	} else {
		d.streamErr = fmt.Errorf("%s: %w", path, ErrNoWriteStreams)
		if !isBlock {
			d.streamErr = fmt.Errorf("%s: %w (not a block device)", path, ErrNoWriteStreams)
		}
	}
	if opt.WriteStreams && d.streamErr != nil {
		f.Close()
		return nil, d.streamErr
	}
	ropt := uring.Options{SingleIssuer: true, DeferTaskrun: true, BestEffort: true}
	if opt.SQPoll {
		ropt = uring.Options{SQPoll: true}
	}
	if opt.Ring != nil {
		ropt = *opt.Ring
	}
	for i := 0; i < opt.Rings; i++ {
		e, err := uring.NewExecutor(ropt, opt.QueueDepth)
		if err != nil {
			d.Close()
			if errors.Is(err, uring.ErrNotSupported) {
				return nil, fmt.Errorf("uring device %s: %w (%w)", path, err, ErrNotSupported)
			}
			return nil, fmt.Errorf("uring device %s: %w", path, err)
		}
		d.execs = append(d.execs, e)
	}
	if !opt.NoFixedFile {
		d.fixedFile = true
		for _, e := range d.execs {
			if err := e.Do(func(r *uring.Ring) error { return r.RegisterFiles([]int32{int32(d.fd)}) }); err != nil {
				d.fixedFile = false // harmless: ops name the fd directly
				break
			}
		}
	}
	return d, nil
}

func uringGeometry(f *os.File, path string, isBlock, direct bool) (Info, error) {
	info := Info{Path: path, Kind: KindFile, Direct: direct, Deallocate: true, LogicalBlock: 512}
	fd := int(f.Fd())
	if isBlock {
		info.Kind = KindBlock
		size, err := unix.IoctlGetUint64(fd, unix.BLKGETSIZE64)
		if err != nil {
			return info, fmt.Errorf("uring device %s: BLKGETSIZE64: %w", path, err)
		}
		lbs, err := unix.IoctlGetInt(fd, unix.BLKSSZGET)
		if err != nil {
			return info, fmt.Errorf("uring device %s: BLKSSZGET: %w", path, err)
		}
		info.Size, info.LogicalBlock = int64(size), lbs
		info.Deallocate = blockDiscards(fd)
	} else {
		var sx unix.Statx_t
		if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_SIZE|unix.STATX_DIOALIGN, &sx); err != nil {
			return info, fmt.Errorf("uring device %s: statx: %w", path, err)
		}
		info.Size = int64(sx.Size)
		switch {
		case sx.Mask&unix.STATX_DIOALIGN != 0 && sx.Dio_offset_align > 0:
			info.LogicalBlock = int(max(sx.Dio_offset_align, sx.Dio_mem_align))
		case direct:
			info.LogicalBlock = 4096 // unknown: the safe choice on every filesystem
		}
		if info.Size == 0 {
			return info, fmt.Errorf("uring device %s: %w; create it pre-sized (fallocate -l SIZE %s)", path, ErrEmptyFile, path)
		}
	}
	if !direct {
		info.LogicalBlock = max(info.LogicalBlock, 1)
	}
	return info, nil
}

// Info implements Device.
func (d *UringDevice) Info() Info { return d.info }

// WriteStreams returns the block device's write streams in use (placement handle h is
// stream h+1), or the reason there are none: an error wrapping ErrWriteStreamsKernel or
// ErrNoWriteStreams.
func (d *UringDevice) WriteStreams() (WriteStreams, error) { return d.streams, d.streamErr }

// Rings is the number of rings (owner goroutines) the device runs.
func (d *UringDevice) Rings() int { return len(d.execs) }

// RingFlags are the IORING_SETUP_* flags in effect on the device's rings.
func (d *UringDevice) RingFlags() uint32 { return d.execs[0].Flags() }

// UringStats count SQEs a UringDevice issued.
type UringStats struct {
	FixedOps    int64 // READ_FIXED / WRITE_FIXED (Buf inside a registered buffer)
	PlainOps    int64 // READ / WRITE
	VectoredOps int64 // WRITEV: an op's Buf and Tail in one request
	Resubmits   int64 // SQEs issued for the remainder of a short (or >1 GiB) transfer
}

// Stats returns the device's SQE counters.
func (d *UringDevice) Stats() UringStats {
	return UringStats{FixedOps: d.fixedOps.Load(), PlainOps: d.plainOps.Load(), VectoredOps: d.vectoredOps.Load(), Resubmits: d.resubmits.Load()}
}

// Occupancy sums the rings' occupancy integrals (uring.Executor.Occupancy): over a window
// between two readings, ΔInflightNs/ΔElapsedNs is the mean number of ops in flight on the
// whole device, out of QueueDepth × Rings. ElapsedNs is the first ring's.
func (d *UringDevice) Occupancy() uring.Occupancy {
	var o uring.Occupancy
	for i, e := range d.execs {
		x := e.Occupancy()
		o.InflightNs += x.InflightNs
		if i == 0 {
			o.ElapsedNs = x.ElapsedNs
		}
	}
	return o
}

// RingTiming is where a device's batches of ops spent their time (uring.Timing): queued for
// the ring's thread, running (the device and the completion's way back), and waking the
// caller.
type RingTiming = uring.Timing

// RingTimed is a device that can say where its io_uring batches spent their time; ok is
// false for one that runs none (an NVMe device over the ioctl transport), whose figures
// were not measured rather than 0.
type RingTimed interface {
	RingTiming() (t RingTiming, ok bool)
}

// RingTiming sums the rings' Timing (uring.Executor.Timing).
func (d *UringDevice) RingTiming() (RingTiming, bool) {
	var t RingTiming
	for _, e := range d.execs {
		t = t.Plus(e.Timing())
	}
	return t, true
}

// FixedFile reports whether the device fd is registered with every ring.
func (d *UringDevice) FixedFile() bool { return d.fixedFile }

// RegisterBuffers implements BufferRegistrar: it registers bufs with every ring (replacing an
// earlier registration) so ops whose Buf lies inside one — sub-ranges allowed — use
// IORING_OP_READ_FIXED/WRITE_FIXED. Buffers must come from Alloc and outlive the device.
func (d *UringDevice) RegisterBuffers(bufs [][]byte) error {
	if d.closed.Load() {
		return fmt.Errorf("uring device %s: closed", d.info.Path)
	}
	table, err := uring.NewBufferTable(bufs)
	if err != nil {
		return fmt.Errorf("uring device %s: %w", d.info.Path, err)
	}
	d.regMu.Lock()
	defer d.regMu.Unlock()
	d.regs.Store(nil) // new Submits stop using the old indices
	for _, e := range d.execs {
		if err := e.Do(table.Register); err != nil {
			return fmt.Errorf("uring device %s: %w", d.info.Path, err)
		}
	}
	d.regs.Store(table)
	return nil
}

// Deallocate implements Device: BLKDISCARD on block devices, a punched hole in files.
func (d *UringDevice) Deallocate(ranges []Range) error {
	if d.closed.Load() {
		return fmt.Errorf("uring device %s: closed", d.info.Path)
	}
	return deallocateFD(int(d.fd), d.info, ranges)
}

// Allocate implements Allocator: fallocate on a regular file.
func (d *UringDevice) Allocate(off, n int64) error {
	if d.closed.Load() {
		return fmt.Errorf("uring device %s: closed", d.info.Path)
	}
	if d.readOnly {
		return nil
	}
	return allocateFD(d.fd, d.info, off, n)
}

// uringFsync is a one-item batch issuing IORING_OP_FSYNC (datasync).
type uringFsync struct {
	fd  int32
	err error
}

func (f *uringFsync) Len() int { return 1 }
func (f *uringFsync) Prep(_ int, sqe uring.SQE) {
	sqe.PrepFsync(f.fd, sys.IORING_FSYNC_DATASYNC)
}
func (f *uringFsync) Complete(_ int, c uring.CQE) bool {
	if c.Res == -int32(unix.EINTR) || c.Res == -int32(unix.EAGAIN) {
		return true
	}
	f.err = c.Err()
	return false
}

// Flush implements Device with an fdatasync issued through the ring.
func (d *UringDevice) Flush() error {
	if d.closed.Load() {
		return fmt.Errorf("uring device %s: closed", d.info.Path)
	}
	b := &uringFsync{fd: int32(d.fd)}
	if err := d.execs[0].Run(b); err != nil {
		return fmt.Errorf("uring device %s: flush: %w", d.info.Path, err)
	}
	if b.err != nil {
		return fmt.Errorf("uring device %s: fdatasync: %w", d.info.Path, b.err)
	}
	return nil
}

// Close implements Device. It waits for in-flight operations.
func (d *UringDevice) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	for _, e := range d.execs {
		e.Close()
	}
	// The rings' reference to the file outlives Close (a kernel worker drops it after the
	// teardown), and the flock lives with the file: give the lock back now, with no I/O
	// left in flight, so that a writer that opens the file next is not told it is in use
	// by this process.
	unix.Flock(int(d.f.Fd()), unix.LOCK_UN)
	if d.backing != nil {
		d.backing.Close()
	}
	err := d.f.Close()
	if d.exclusive {
		waitUnclaimed(d.info.Path, time.Second)
	}
	return err
}

// waitUnclaimed returns once path can be opened with O_EXCL (or after limit, or when the
// open fails for another reason). The rings' reference to a registered device file is
// dropped by a kernel worker after the ring is torn down, and an exclusive claim ends only
// with the last reference: without the wait, a command run right after this one (rbctl
// format, then rbctl bench) could find the device "in use". Observed on Linux 6.1 under
// QEMU TCG, where TestUringLoopDevice's exclusive reopen right after Close failed once.
func waitUnclaimed(path string, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_EXCL|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
			return
		}
		if err != unix.EBUSY || time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
