package blockdev

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FileOptions configures the posix backend. A regular file is always locked (LockFD):
// exclusively when opened for writing, shared when ReadOnly.
type FileOptions struct {
	Direct     bool // O_DIRECT: buffers, offsets and lengths aligned to Info.LogicalBlock
	ReadOnly   bool // O_RDONLY and a shared lock; writes fail
	Exclusive  bool // O_EXCL on block devices: fail if mounted or claimed by another holder
	QueueDepth int  // ops of one Submit run concurrently on up to this many goroutines (default 32)
}

// DefaultFileOptions: O_DIRECT on, read-write, exclusive, queue depth 32.
func DefaultFileOptions() FileOptions {
	return FileOptions{Direct: true, Exclusive: true, QueueDepth: 32}
}

// File is the posix backend: pread/pwrite on a regular pre-sized file, a loop device or any
// block device.
type File struct {
	f    *os.File
	fd   int
	info Info
	qd   int
	ro   bool
	// backing is the file behind a loop device, open only for its lock (lockLoopBacking).
	backing *os.File
	closed  atomic.Bool
	mu      sync.RWMutex // Close waits for in-flight Submits
}

var _ Device = (*File)(nil)

// ErrEmptyFile: a regular file of size 0 cannot hold a cache.
var ErrEmptyFile = errors.New("file is empty")

var (
	// ErrNotRegular: only a regular file can be created or extended (a device has its own
	// size).
	ErrNotRegular = errors.New("only a regular file can be created or extended")
	// ErrNoDirect: the file's filesystem refuses O_DIRECT (tmpfs).
	ErrNoDirect = errors.New("the filesystem refuses O_DIRECT")
	// ErrNeedsPassthrough: a character device (NVMe generic /dev/ngXnY) is driven by the
	// NVMe passthrough engine only; it also wraps ErrNotSupported.
	ErrNeedsPassthrough = errors.New("a character device needs the passthrough engine")
)

// DataFileMode is the permission of every data file rbctl creates: KV-cache contents are
// readable by their owner only (a user who wants more runs chmod).
const DataFileMode = 0o600

// CreateFile creates (or extends) a regular file of size bytes, sparse where the
// filesystem allows, with DataFileMode. It refuses to shrink an existing file, and to
// extend one another process has open through rbctl.
func CreateFile(path string, size int64) error {
	if size <= 0 {
		return fmt.Errorf("create %s: size %d must be positive", path, size)
	}
	if err := CheckNotDevNode(path); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, DataFileMode)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("create %s: not a regular file (%w; a block device has its own size)", path, ErrNotRegular)
	}
	if err := LockFD(int(f.Fd()), path, true); err != nil {
		return err
	}
	if st.Size() > size {
		return fmt.Errorf("create %s: file already has %d bytes, more than %d; remove it first or pass its size", path, st.Size(), size)
	}
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("create %s: truncate to %d: %w", path, size, err)
	}
	return nil
}

// ErrMissingDevNode: a path under /dev that does not exist is not created as a file.
var ErrMissingDevNode = errors.New("no such device node")

// CheckNotDevNode refuses to create a new file under /dev: a missing /dev/sdX or
// /dev/nvmeXnY is a typo or an absent device, and a regular file made there would fill a
// RAM-backed filesystem and look like that device to the next command.
func CheckNotDevNode(path string) error {
	if _, err := os.Lstat(path); err == nil {
		return nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		abs = filepath.Join(dir, filepath.Base(abs))
	}
	if abs == "/dev" || strings.HasPrefix(abs, "/dev/") {
		return fmt.Errorf("create %s: %w (files are not created under /dev)", path, ErrMissingDevNode)
	}
	return nil
}

// OpenFile opens a regular file or block device for the posix backend.
func OpenFile(path string, opt FileOptions) (*File, error) {
	if opt.QueueDepth <= 0 {
		opt.QueueDepth = 32
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	isBlock := st.Mode&unix.S_IFMT == unix.S_IFBLK
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG, unix.S_IFBLK:
	case unix.S_IFCHR:
		return nil, fmt.Errorf("open %s: %w: %w (NVMe generic /dev/ngXnY?)", path, ErrNotSupported, ErrNeedsPassthrough)
	default:
		return nil, fmt.Errorf("open %s: not a regular file or block device", path)
	}
	flags := unix.O_CLOEXEC | unix.O_RDWR
	if opt.ReadOnly {
		flags = unix.O_CLOEXEC | unix.O_RDONLY
	}
	if opt.Direct {
		flags |= unix.O_DIRECT
	}
	if isBlock && opt.Exclusive {
		flags |= unix.O_EXCL
	}
	fd, err := unix.Open(path, flags, 0)
	if err != nil {
		switch {
		case errors.Is(err, unix.EBUSY):
			return nil, fmt.Errorf("open %s: device is busy (mounted, or held by another program); unmount it first: %w", path, err)
		case errors.Is(err, unix.EINVAL) && opt.Direct:
			return nil, fmt.Errorf("open %s: %w (tmpfs?); put the file on another filesystem or open it without O_DIRECT: %w", path, ErrNoDirect, err)
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	var backing *os.File
	if !isBlock {
		// Block devices are claimed by O_EXCL; files by their lock.
		if err := LockFD(fd, path, !opt.ReadOnly); err != nil {
			unix.Close(fd)
			return nil, err
		}
	} else if backing, err = lockLoopBacking(path, st.Rdev, !opt.ReadOnly); err != nil {
		unix.Close(fd)
		return nil, err
	}
	d := &File{f: os.NewFile(uintptr(fd), path), fd: fd, qd: opt.QueueDepth, ro: opt.ReadOnly, backing: backing}
	d.info = Info{Path: path, Kind: KindFile, Direct: opt.Direct, Deallocate: true, LogicalBlock: 1}
	if isBlock {
		d.info.Kind = KindBlock
		size, err := unix.IoctlGetUint64(fd, unix.BLKGETSIZE64)
		if err != nil {
			d.f.Close()
			return nil, fmt.Errorf("open %s: BLKGETSIZE64: %w", path, err)
		}
		lbs, err := unix.IoctlGetInt(fd, unix.BLKSSZGET)
		if err != nil {
			d.f.Close()
			return nil, fmt.Errorf("open %s: BLKSSZGET: %w", path, err)
		}
		d.info.Size, d.info.LogicalBlock = int64(size), lbs
		d.info.Deallocate = blockDiscards(fd)
	} else {
		var sx unix.Statx_t
		if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_SIZE|unix.STATX_DIOALIGN, &sx); err != nil {
			d.f.Close()
			return nil, fmt.Errorf("open %s: statx: %w", path, err)
		}
		d.info.Size = int64(sx.Size)
		if opt.Direct {
			d.info.LogicalBlock = 4096 // unknown alignment: safe on every filesystem
			if sx.Mask&unix.STATX_DIOALIGN != 0 && sx.Dio_offset_align > 0 {
				d.info.LogicalBlock = int(max(sx.Dio_offset_align, sx.Dio_mem_align))
			}
		}
		if d.info.Size == 0 {
			d.f.Close()
			return nil, fmt.Errorf("open %s: %w; create it pre-sized (e.g. truncate -s SIZE)", path, ErrEmptyFile)
		}
	}
	return d, nil
}

// Info implements Device.
func (d *File) Info() Info { return d.info }

// VectoredWrites implements VectoredWriter: a write with a Tail is one pwritev.
func (d *File) VectoredWrites() bool { return true }

// Submit implements Device: one op runs inline; a batch runs on up to QueueDepth goroutines.
func (d *File) Submit(ops []Op) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if len(ops) == 0 {
		return nil
	}
	if d.closed.Load() {
		for i := range ops {
			ops[i].Err = fmt.Errorf("%s: closed", d.info.Path)
		}
		return ops[0].Err
	}
	if len(ops) == 1 {
		d.do(&ops[0])
		return ops[0].Err
	}
	workers := min(len(ops), d.qd)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(ops) {
					return
				}
				d.do(&ops[i])
			}
		}()
	}
	wg.Wait()
	for i := range ops {
		if ops[i].Err != nil {
			return ops[i].Err
		}
	}
	return nil
}

// check resets op's outcome and says why the device cannot take op (nil: it can).
func (d *File) check(op *Op) error {
	op.N, op.Err = 0, nil
	if err := CheckOp(d.info, op); err != nil {
		return err
	}
	if op.Write && d.ro {
		return fmt.Errorf("%s: write on a read-only device", d.info.Path)
	}
	if d.info.Direct && (!Aligned(op.Buf, d.info.LogicalBlock) || !Aligned(op.Tail, d.info.LogicalBlock)) {
		return fmt.Errorf("%w: buffer address not aligned to %d (use blockdev.Alloc)", ErrMisaligned, d.info.LogicalBlock)
	}
	return nil
}

// do runs one op, resuming short transfers; a transfer of 0 bytes is ErrUnexpectedEOF.
func (d *File) do(op *Op) {
	if op.Err = d.check(op); op.Err != nil {
		return
	}
	for op.N < op.Len() {
		var n int
		var err error
		off := op.Off + int64(op.N)
		switch {
		case op.N < len(op.Buf) && len(op.Tail) > 0:
			n, err = unix.Pwritev(d.fd, [][]byte{op.Buf[op.N:], op.Tail}, off)
		case op.N >= len(op.Buf): // the rest of a tail
			n, err = unix.Pwrite(d.fd, op.Tail[op.N-len(op.Buf):], off)
		case op.Write:
			n, err = unix.Pwrite(d.fd, op.Buf[op.N:], off)
		default:
			n, err = unix.Pread(d.fd, op.Buf[op.N:], off)
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			op.Err = fmt.Errorf("%s: %s at %d: %w", d.info.Path, map[bool]string{true: "pwrite", false: "pread"}[op.Write], off, err)
			return
		}
		if n == 0 {
			op.Err = fmt.Errorf("%w at offset %d of %s", ErrUnexpectedEOF, off, d.info.Path)
			return
		}
		op.N += n
	}
}

// Deallocate implements Device: BLKDISCARD on block devices, a punched hole in files.
func (d *File) Deallocate(ranges []Range) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.ro {
		return fmt.Errorf("%s: deallocate on a read-only device", d.info.Path)
	}
	return deallocateFD(d.fd, d.info, ranges)
}

// Allocate implements Allocator: fallocate on a regular file.
func (d *File) Allocate(off, n int64) error {
	if d.ro {
		return nil
	}
	return allocateFD(d.fd, d.info, off, n)
}

// Flush implements Device (fdatasync).
func (d *File) Flush() error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.ro {
		return nil
	}
	for {
		err := unix.Fdatasync(d.fd)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: fdatasync: %w", d.info.Path, err)
		}
		return nil
	}
}

// Close implements Device.
func (d *File) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.backing != nil {
		d.backing.Close()
	}
	return d.f.Close()
}

// allocateFD reserves [off, off+n) of a regular file (fallocate mode 0, the size kept);
// nothing to do on a block device.
func allocateFD(fd int, info Info, off, n int64) error {
	if info.Kind != KindFile || n <= 0 {
		return nil
	}
	if off < 0 || off+n > info.Size {
		return fmt.Errorf("%w: allocate [%d, %d) on a %d-byte file", ErrOutOfRange, off, off+n, info.Size)
	}
	err := unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, off, n)
	for errors.Is(err, unix.EINTR) {
		err = unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, off, n)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Errorf("%s: allocate: %w (%w)", info.Path, ErrNotSupported, err)
	case errors.Is(err, unix.ENOSPC):
		return fmt.Errorf("%s: the filesystem has no room to reserve bytes [%d, %d) of the file (%w); free space there or use a smaller cache", info.Path, off, off+n, err)
	}
	return fmt.Errorf("%s: allocate [%d, %d): %w", info.Path, off, off+n, err)
}

// deallocateFD tells the kernel the ranges of fd hold no live data: BLKDISCARD on a block
// device, a punched hole (keeping the size) in a file. Shared by the posix and io_uring
// backends, which both hold a plain fd for this.
func deallocateFD(fd int, info Info, ranges []Range) error {
	for _, r := range ranges {
		if r.Off < 0 || r.Len < 0 || r.Off+r.Len > info.Size {
			return fmt.Errorf("%w: deallocate [%d, %d) on a %d-byte device", ErrOutOfRange, r.Off, r.Off+r.Len, info.Size)
		}
		if r.Len == 0 {
			continue
		}
		var err error
		if info.Kind == KindBlock {
			rg := [2]uint64{uint64(r.Off), uint64(r.Len)}
			if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.BLKDISCARD, uintptr(unsafe.Pointer(&rg))); errno != 0 {
				err = errno
			}
		} else {
			err = unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, r.Off, r.Len)
		}
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTTY) {
			return fmt.Errorf("%s: deallocate: %w (%w)", info.Path, ErrNotSupported, err)
		}
		if err != nil {
			return fmt.Errorf("%s: deallocate [%d, %d): %w", info.Path, r.Off, r.Off+r.Len, err)
		}
	}
	return nil
}

// Space is what a regular device file may still need from its filesystem: Unallocated is
// the part of its size no block backs yet (a sparse file), Available what the filesystem
// has left for it. Writes to an unallocated part fail with ENOSPC once Available runs out.
type Space struct {
	Size, Unallocated, Available int64
}

// Short reports whether the filesystem cannot hold the file's unallocated part.
func (s Space) Short() bool { return s.Unallocated > s.Available }

// FileSpace returns path's Space; ok is false for anything but a regular file.
func FileSpace(path string) (s Space, ok bool, err error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return Space{}, false, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return Space{}, false, nil
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil {
		return Space{}, false, err
	}
	s.Size = st.Size
	s.Unallocated = max(0, st.Size-st.Blocks*512)
	s.Available = int64(fs.Bavail) * int64(fs.Bsize)
	return s, true, nil
}
