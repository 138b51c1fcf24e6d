package bench

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/emu"
)

// A bench formats its device, so a second bench on the file the first one left would be
// refused by the safety gate ("it holds a raw-block cache"). Bench therefore marks a regular
// file it has finished with (a DEV file, or an emulated SSD's data file) with an extended
// attribute holding the file's identity as bench left it: device, inode, size and
// modification time. A later bench whose file still carries a matching mark skips the
// signature half of the gate: the cache there is the one bench left. Any other write since
// (rbctl format, put, another program) changes the modification time and voids the mark, so
// that cache needs the force override like any other. Block devices are never marked; a file
// system without user extended attributes leaves files unmarked (each rerun needs the override).

// ownAttr is the extended attribute of the mark. Its value is ownStamp's text.
const ownAttr = "user.rbctl.bench"

// markFile is the regular file a bench on path leaves its mark on ("" for none: a block
// device, /dev/ngXnY, mem:, emu:mem).
func markFile(path string) string {
	if emu.IsSpec(path) {
		sp, err := emu.ParseSpec(path)
		if err != nil || sp.Path == "" {
			return ""
		}
		path = sp.Path
	}
	if strings.HasPrefix(path, devices.MemPrefix) {
		return ""
	}
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
		return ""
	}
	return path
}

// ownStamp is the identity of file as a mark records it.
func ownStamp(file string) (string, error) {
	st, err := os.Stat(file)
	if err != nil {
		return "", err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return "", errors.New("no stat_t")
	}
	return fmt.Sprintf("v1 dev=%d ino=%d size=%d mtime=%d", sys.Dev, sys.Ino, st.Size(), st.ModTime().UnixNano()), nil
}

// markOwn records that bench left file as it is now. A file system without user extended
// attributes is no error: the file stays unmarked.
func markOwn(file string) {
	if file == "" {
		return
	}
	if s, err := ownStamp(file); err == nil {
		_ = unix.Setxattr(file, ownAttr, []byte(s), 0)
	}
}

// isOwn says whether the bench target path is a file an earlier bench left and nothing has
// written since.
func isOwn(path string) bool {
	file := markFile(path)
	if file == "" {
		return false
	}
	buf := make([]byte, 256)
	n, err := unix.Getxattr(file, ownAttr, buf)
	if err != nil || n <= 0 {
		return false
	}
	s, err := ownStamp(file)
	return err == nil && s == string(buf[:n])
}
