package torture

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/rbctl/rbctl/internal/blockdev"
)

// fileDev is the harness's own minimal posix Device over a regular file (pread/pwrite,
// punch-hole deallocate, fdatasync flush). It keeps the harness independent of the
// blockdev backends under test elsewhere; buffered I/O is what a SIGKILL test needs (the
// page cache survives the kill, so what the kernel acknowledged is on "the device").
type fileDev struct {
	f    *os.File
	info blockdev.Info
}

func openFileDev(path string) (*fileDev, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &fileDev{f: f, info: blockdev.Info{
		Path: path, Kind: blockdev.KindFile, Size: st.Size(), LogicalBlock: 4096, Deallocate: true,
	}}, nil
}

func (d *fileDev) Info() blockdev.Info { return d.info }

func (d *fileDev) Submit(ops []blockdev.Op) error {
	var first error
	for i := range ops {
		op := &ops[i]
		op.N, op.Err = 0, blockdev.CheckOp(d.info, op)
		if op.Err == nil {
			if op.Write {
				op.N, op.Err = d.f.WriteAt(op.Buf, op.Off)
			} else {
				op.N, op.Err = d.f.ReadAt(op.Buf, op.Off)
			}
		}
		if op.Err != nil && first == nil {
			first = op.Err
		}
	}
	return first
}

func (d *fileDev) Deallocate(rs []blockdev.Range) error {
	for _, r := range rs {
		if err := unix.Fallocate(int(d.f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, r.Off, r.Len); err != nil {
			return fmt.Errorf("punch hole [%d,+%d): %w", r.Off, r.Len, err)
		}
	}
	return nil
}

func (d *fileDev) Flush() error { return unix.Fdatasync(int(d.f.Fd())) }
func (d *fileDev) Close() error { return d.f.Close() }

// memCopy reads a device file into a fresh in-memory device, so the verifier can recover,
// fill and corrupt it without touching the file the next writer opens.
func memCopy(path string) (*blockdev.Mem, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := blockdev.NewMem(int64(len(b)), 0) // buffered, like the writer's fileDev
	copy(m.Bytes(), b)
	return m, nil
}
