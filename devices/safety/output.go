package safety

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/emu"
)

var (
	// ErrOwnInput: an output path names a file the command reads (its cache, its trace).
	ErrOwnInput = errors.New("output is the command's own input")
	// ErrOverwrite: an output path names a device or a file holding data (a cache, a
	// filesystem image); no flag lifts it (remove the file first).
	ErrOverwrite = errors.New("output would destroy data")
)

// Output checks a path a command is about to write a result to — a payload (-o), a saved
// report, a figure, a generated trace — before anything runs. It returns nil when writing
// there loses nothing but an ordinary file, and otherwise an error saying what is there:
//
//	refusing to write --out to c.img: it is this command's own input (c.img)
//	refusing to write --save to other.img: it holds a raw-block cache; remove it first or choose another name
//
// What is refused, always (a result is never worth a cache): the command's own inputs (any
// DEV spelling in inputs, the data file of an emu: spec included; compared by device and
// inode, so a symlink or a second name does not get past it); a block device or an NVMe
// generic character device; a file backing a loop device; a file another process holds
// under rbctl's single-writer lock; a file carrying a recognised signature (a cache, a
// filesystem image, a partition table, ...). A path that does not exist, a FIFO, a
// terminal, /dev/null and an ordinary file pass. flag names the option in the message.
func Output(flag, path string, inputs []string) error { return system.output(flag, path, inputs) }

func (h host) output(flag, path string, inputs []string) error {
	if path == "" || path == "-" {
		return nil // stdout
	}
	refusing := fmt.Sprintf("refusing to write %s to %s", flag, path)
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("%s %s: %w", flag, path, err)
	}
	for _, in := range inputs {
		if sameFile(&st, inputFile(in)) {
			return refuse(ErrOwnInput, "%s: it is this command's own input (%s)", refusing, in)
		}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFBLK:
		return refuse(ErrOverwrite, "%s: it is a block device; results are written to files", refusing)
	case unix.S_IFCHR:
		if isNVMeGeneric(path) {
			return refuse(ErrOverwrite, "%s: it is an NVMe namespace; results are written to files", refusing)
		}
		return nil // a terminal, /dev/null, ...
	case unix.S_IFDIR:
		return fmt.Errorf("%s %s: is a directory; a file name is needed", flag, path)
	default:
		return nil // a FIFO or a socket: nothing stored there is lost
	}
	if st.Size == 0 {
		return nil
	}
	if u := h.fileInUse(path); u != "" {
		return refuse(ErrInUse, "%s: %s", refusing, u)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%s: cannot read it to check for existing data: %w", path, err)
	}
	defer f.Close()
	if err := blockdev.LockFD(int(f.Fd()), path, true); err != nil {
		if errors.Is(err, blockdev.ErrLocked) {
			return refuse(ErrInUse, "%s: %s", refusing, trimPathPrefix(err.Error(), path))
		}
		return err // a filesystem without locks: say so rather than guess
	}
	sigs, err := Detect(f, st.Size)
	if err != nil {
		return fmt.Errorf("%s: reading for signatures: %w", path, err)
	}
	if len(sigs) > 0 {
		return refuse(ErrOverwrite, "%s: it holds %s; remove it first or choose another name", refusing, sigs[0].Describe())
	}
	return nil
}

// inputFile is the file behind a DEV spelling: the data file of an emu: spec, else itself.
func inputFile(dev string) string {
	if emu.IsSpec(dev) {
		if sp, err := emu.ParseSpec(dev); err == nil {
			return sp.Path
		}
		return ""
	}
	return dev
}

// sameFile says whether path (which may not exist) is the file st describes.
func sameFile(st *unix.Stat_t, path string) bool {
	if path == "" {
		return false
	}
	var o unix.Stat_t
	if unix.Stat(filepath.Clean(path), &o) != nil {
		return false
	}
	return o.Dev == st.Dev && o.Ino == st.Ino
}

// trimPathPrefix drops "path: " from a message that starts with it.
func trimPathPrefix(msg, path string) string {
	if p := path + ": "; len(msg) > len(p) && msg[:len(p)] == p {
		return msg[len(p):]
	}
	return msg
}
