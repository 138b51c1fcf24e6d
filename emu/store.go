package emu

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/rbctl/rbctl/blockdev"
)

// store holds the namespace's data: a sparse file or sparse memory. Unwritten and
// deallocated ranges read as zeroes (Identify Namespace DLFEAT = 1).
type store interface {
	ReadAt(p []byte, off int64) error
	WriteAt(p []byte, off int64) error
	// Deallocate makes [off, off+n) read as zeroes and releases its space where possible.
	Deallocate(off, n int64) error
	Sync() error
	// Extents calls f for each range that may hold data (to rebuild the FTL map on open).
	Extents(f func(off, n int64)) error
	Close() error
}

// fileStore keeps data in a sparse file; deallocate punches holes.
type fileStore struct {
	f    *os.File
	path string
	size int64
}

// dataFile is a data file opened and locked, not yet checked against the spec's size.
type dataFile struct {
	f    *os.File
	path string
	size int64 // 0: a new device (created now, or an empty file given to Create)
	made bool  // this open created the file (O_EXCL): removed again if the device is not made
}

// abandon closes the data file of a device that could not be made, and removes the file
// when this open created it: a failed command leaves no empty file behind.
func (d *dataFile) abandon() {
	d.f.Close()
	if d.made {
		os.Remove(d.path)
	}
}

// openDataFile opens a device's data file and takes its lock: exclusive to write, shared
// to read (blockdev.LockFD), before anything is read from it or from PATH.fdp. Only Create
// makes a missing file (blockdev.DataFileMode); otherwise a missing or empty data file
// means there is no device, an error wrapping fs.ErrNotExist.
// ErrNoDevice (with fs.ErrNotExist): an emu: spec names a data file that does not exist or
// is empty; only creating the device (a format, or serving it) makes one.
var ErrNoDevice = errors.New("no emulated device there")

func openDataFile(path string, opt OpenOptions) (*dataFile, error) {
	flags := os.O_RDWR
	if opt.ReadOnly {
		flags = os.O_RDONLY
	}
	create := opt.Create && !opt.ReadOnly
	f, err := os.OpenFile(path, flags|unix.O_CLOEXEC, 0)
	made := false
	if errors.Is(err, fs.ErrNotExist) && create {
		f, err = os.OpenFile(path, flags|os.O_CREATE|os.O_EXCL|unix.O_CLOEXEC, blockdev.DataFileMode)
		made = err == nil
		if errors.Is(err, fs.ErrExist) { // made by someone else meanwhile: open theirs
			f, err = os.OpenFile(path, flags|unix.O_CLOEXEC, 0)
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("emu: %s: %w (%w)", path, ErrNoDevice, fs.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("emu: open data file: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("emu: %s is not a regular file; the emulator keeps its data in a (sparse) file", path)
	}
	if err := blockdev.LockFD(int(f.Fd()), path, !opt.ReadOnly); err != nil {
		f.Close()
		return nil, fmt.Errorf("emu: %w", err)
	}
	if st, err = f.Stat(); err != nil { // the size as the lock holder left it
		f.Close()
		return nil, err
	}
	if st.Size() == 0 && !create {
		f.Close()
		return nil, fmt.Errorf("emu: %s is empty: %w (%w)", path, ErrNoDevice, fs.ErrNotExist)
	}
	return &dataFile{f: f, path: path, size: st.Size(), made: made}, nil
}

// store sizes a new data file, or checks an existing one against the spec, and returns it
// as the device's store. It closes the file on error.
func (d *dataFile) store(size int64) (*fileStore, error) {
	switch {
	case d.size == 0:
		if err := d.f.Truncate(size); err != nil {
			d.abandon()
			return nil, fmt.Errorf("emu: size data file: %w", err)
		}
	case d.size != size:
		d.f.Close()
		return nil, fmt.Errorf("%w: %s is %d bytes but the spec asks for %d; give size=%d or use another file", ErrSpec, d.path, d.size, size, d.size)
	}
	return &fileStore{f: d.f, path: d.path, size: size}, nil
}

func (s *fileStore) ReadAt(p []byte, off int64) error {
	_, err := s.f.ReadAt(p, off)
	if errors.Is(err, io.EOF) {
		return nil // the file is pre-sized; EOF cannot cut a checked range
	}
	return err
}

func (s *fileStore) WriteAt(p []byte, off int64) error {
	_, err := s.f.WriteAt(p, off)
	return err
}

func (s *fileStore) Deallocate(off, n int64) error {
	err := unix.Fallocate(int(s.f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return err
	}
	// No hole punching on this filesystem: write zeroes.
	z := make([]byte, min(n, 1<<20))
	for n > 0 {
		k := min(n, int64(len(z)))
		if _, err := s.f.WriteAt(z[:k], off); err != nil {
			return err
		}
		off, n = off+k, n-k
	}
	return nil
}

func (s *fileStore) Sync() error { return unix.Fdatasync(int(s.f.Fd())) }

func (s *fileStore) Extents(f func(off, n int64)) error {
	fd := int(s.f.Fd())
	for off := int64(0); off < s.size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil // no data after off
		}
		if err != nil {
			// No SEEK_DATA: treat the whole file as written.
			f(0, s.size)
			return nil
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			hole = s.size
		}
		hole = min(hole, s.size)
		if hole > data {
			f(data, hole-data)
		}
		off = hole
	}
	return nil
}

func (s *fileStore) Close() error { return s.f.Close() }

// memStore keeps data in an anonymous private mapping: the kernel supplies zero pages on
// first touch, so an unwritten device costs no memory, and deallocate gives whole pages back
// (MADV_DONTNEED). The lock only orders I/O against Close (which unmaps).
type memStore struct {
	mu   sync.RWMutex
	data []byte
	size int64
}

func newMemStore(size int64) (*memStore, error) {
	b, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("emu: map %d bytes of memory: %w", size, err)
	}
	return &memStore{data: b, size: size}, nil
}

func (s *memStore) ReadAt(p []byte, off int64) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.data == nil {
		return errClosed
	}
	copy(p, s.data[off:])
	return nil
}

func (s *memStore) WriteAt(p []byte, off int64) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.data == nil {
		return errClosed
	}
	copy(s.data[off:], p)
	return nil
}

func (s *memStore) Deallocate(off, n int64) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.data == nil {
		return errClosed
	}
	const page = 4096
	first, last := (off+page-1)/page*page, (off+n)/page*page
	if last <= first {
		clear(s.data[off : off+n])
		return nil
	}
	clear(s.data[off:first])
	clear(s.data[last : off+n])
	return unix.Madvise(s.data[first:last], unix.MADV_DONTNEED)
}

func (s *memStore) Sync() error { return nil }

// Extents reports every 64 KiB piece that is not all zeroes (scanning; used only when a
// file-backed device reopens, never for memory devices, but kept correct).
func (s *memStore) Extents(f func(off, n int64)) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	const piece = 64 << 10
	for off := int64(0); off < s.size; off += piece {
		b := s.data[off:min(off+piece, s.size)]
		for _, v := range b {
			if v != 0 {
				f(off, int64(len(b)))
				break
			}
		}
	}
	return nil
}

func (s *memStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.data == nil {
		return nil
	}
	err := unix.Munmap(s.data)
	s.data = nil
	return err
}
