package blockdev

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rbctl/rbctl/internal/sys"
	"github.com/rbctl/rbctl/internal/uring"
	"github.com/rbctl/rbctl/placement"
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
		return nil, fmt.Errorf("uring device %s: %w", path, err)
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

// uringBatch adapts a slice of Ops to uring.Batch.
type uringBatch struct {
	d     *UringDevice
	ops   []Op
	items []int32 // indices into ops of the ops to issue
	regs  *uring.BufferTable
	tries []uint8  // EAGAIN/EINTR retries per item
	iov   []uint64 // per item two iovecs (base, length pairs) for ops with a Tail; nil without
}

func (d *UringDevice) newBatch(ops []Op, items []int32, regs *uring.BufferTable, tails bool) *uringBatch {
	b := &uringBatch{d: d, ops: ops, items: items, regs: regs, tries: make([]uint8, len(items))}
	if tails {
		b.iov = make([]uint64, 4*len(items)) // no Go pointers: the kernel reads it at submission
	}
	return b
}

func (b *uringBatch) Len() int { return len(b.items) }

func (b *uringBatch) Prep(i int, sqe uring.SQE) {
	op := &b.ops[b.items[i]]
	if op.N > 0 {
		b.d.resubmits.Add(1)
	}
	off := uint64(op.Off + int64(op.N))
	fd := int32(b.d.fd)
	if b.d.fixedFile {
		fd = 0
	}
	// The rest of the op: Buf[N:] and Tail as one WRITEV while both fit one SQE, else the
	// rest of Buf, then the rest of Tail, each a plain or fixed transfer.
	var p []byte
	switch {
	case len(op.Tail) > 0 && op.N < len(op.Buf) && op.Len()-op.N <= b.d.maxChunk:
		head := op.Buf[op.N:]
		v := b.iov[4*i : 4*i+4]
		v[0], v[1] = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(head)))), uint64(len(head))
		v[2], v[3] = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(op.Tail)))), uint64(len(op.Tail))
		b.d.vectoredOps.Add(1)
		sqe.PrepWritev(fd, v, off)
		b.finish(op, sqe)
		return
	case op.N < len(op.Buf):
		p = op.Buf[op.N:]
	default:
		p = op.Tail[op.N-len(op.Buf):]
	}
	if len(p) > b.d.maxChunk {
		p = p[:b.d.maxChunk]
	}
	if idx, ok := b.regs.Lookup(p); ok {
		b.d.fixedOps.Add(1)
		if op.Write {
			sqe.PrepWriteFixed(fd, p, off, idx)
		} else {
			sqe.PrepReadFixed(fd, p, off, idx)
		}
	} else if b.d.plainOps.Add(1); op.Write {
		sqe.PrepWrite(fd, p, off)
	} else {
		sqe.PrepRead(fd, p, off)
	}
	b.finish(op, sqe)
}

// finish sets what every SQE of op carries: the fixed-file flag and its write stream.
func (b *uringBatch) finish(op *Op, sqe uring.SQE) {
	if b.d.fixedFile {
		sqe.SetFlags(sys.IOSQE_FIXED_FILE)
	}
	if op.Write && op.Handle != placement.None && b.d.streams.Max > 0 {
		// write_stream is the u8 at offset 44, the low byte of the splice_fd_in union
		// (little endian); the three bytes after it must stay zero. Stream s (1..max) is
		// placement handle s-1; Submit has checked the range.
		sqe.Raw().SpliceFdIn = int32(op.Handle) + 1
	}
}

func (b *uringBatch) Complete(i int, c uring.CQE) bool {
	op := &b.ops[b.items[i]]
	switch {
	case c.Res < 0:
		errno := unix.Errno(-c.Res)
		if (errno == unix.EAGAIN || errno == unix.EINTR) && b.tries[i] < 16 {
			b.tries[i]++
			return true
		}
		what := "read"
		if op.Write {
			what = "write"
		}
		op.Err = fmt.Errorf("uring %s of %d bytes at %d on %s: %w", what, op.Len()-op.N, op.Off+int64(op.N), b.d.info.Path, errno)
		return false
	case c.Res == 0:
		op.Err = fmt.Errorf("uring: %w at offset %d of %s", ErrUnexpectedEOF, op.Off+int64(op.N), b.d.info.Path)
		return false
	}
	op.N += int(c.Res)
	return op.N < op.Len() // short transfer: issue the remainder
}

// VectoredWrites implements VectoredWriter: a write with a Tail is one IORING_OP_WRITEV
// (the header from the staging arena, the payload from the caller's memory). WRITEV takes
// no registered buffers, so the kernel pins the pages of such a write for its duration.
func (d *UringDevice) VectoredWrites() bool { return true }

// Submit implements Device.
func (d *UringDevice) Submit(ops []Op) error {
	if d.closed.Load() {
		return fmt.Errorf("uring device %s: closed", d.info.Path)
	}
	items := make([]int32, 0, len(ops))
	tails := false
	var pin runtime.Pinner
	defer pin.Unpin()
	for i := range ops {
		op := &ops[i]
		op.N, op.Err = 0, nil
		if err := CheckOp(d.info, op); err != nil {
			op.Err = err
			continue
		}
		if op.Write && d.readOnly {
			op.Err = fmt.Errorf("uring device %s: opened read-only", d.info.Path)
			continue
		}
		if op.Write && op.Handle != placement.None && d.streams.Max > 0 && (op.Handle < 0 || int(op.Handle) >= d.streams.Max) {
			op.Err = fmt.Errorf("uring device %s: placement handle %d: the device has %d write streams (handles 0..%d)",
				d.info.Path, op.Handle, d.streams.Max, d.streams.Max-1)
			continue
		}
		if op.Len() == 0 {
			continue
		}
		if len(op.Buf) > 0 {
			pin.Pin(&op.Buf[0]) // no-op for Alloc'd (off-heap) memory
		}
		if len(op.Tail) > 0 {
			pin.Pin(&op.Tail[0])
			tails = true
		}
		items = append(items, int32(i))
	}
	regs := d.regs.Load()
	depth := d.execs[0].Depth()
	if len(d.execs) == 1 || len(items) <= depth {
		e := d.execs[int(d.rr.Add(1))%len(d.execs)]
		if err := e.Run(d.newBatch(ops, items, regs, tails)); err != nil {
			return fmt.Errorf("uring device %s: %w", d.info.Path, err)
		}
	} else if err := d.runSplit(ops, items, regs, tails); err != nil {
		return err
	}
	for i := range ops {
		if ops[i].Err != nil {
			return ops[i].Err
		}
	}
	return nil
}

// runSplit spreads a large batch over every ring in contiguous chunks.
func (d *UringDevice) runSplit(ops []Op, items []int32, regs *uring.BufferTable, tails bool) error {
	n := len(d.execs)
	start := int(d.rr.Add(1))
	errs := make([]error, n)
	var wg sync.WaitGroup
	for k := 0; k < n; k++ {
		lo, hi := k*len(items)/n, (k+1)*len(items)/n
		if lo == hi {
			continue
		}
		b := d.newBatch(ops, items[lo:hi], regs, tails)
		e := d.execs[(start+k)%n]
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = e.Run(b)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("uring device %s: %w", d.info.Path, err)
	}
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
