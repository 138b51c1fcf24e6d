package devices

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rbctl/rbctl/devices/safety"
	"github.com/rbctl/rbctl/emu"
)

// ErrSameDevice: two devices of one list name the same storage (one cache cannot have two
// shards on one device).
var ErrSameDevice = errors.New("the same device is given twice")

// Distinct refuses paths of which two name the same storage, whatever their spelling: the
// same regular file (device and inode: through a link, a relative path, or an emu: spec's
// data file), the same block or character device (its device number), an NVMe namespace
// as /dev/ngXnY and as its block device, or one path not yet created twice. It reads nothing but metadata. Memory
// devices (mem:SIZE, emu:mem) are new on every open, so never the same.
func Distinct(paths []string) error {
	seen := make(map[string]string, len(paths))
	for _, p := range paths {
		id, err := identity(p)
		if err != nil {
			return err
		}
		if id == "" {
			continue
		}
		if q, ok := seen[id]; ok {
			if q == p {
				return fmt.Errorf("%s is given twice: %w", p, ErrSameDevice)
			}
			return fmt.Errorf("%s and %s are the same device (%s): %w", q, p, id, ErrSameDevice)
		}
		seen[id] = p
	}
	return nil
}

// identity names the storage behind p ("" for a memory device).
func identity(p string) (string, error) {
	target := p
	switch {
	case strings.HasPrefix(p, MemPrefix):
		return "", nil
	case emu.IsSpec(p):
		sp, err := emu.ParseSpec(p)
		if err != nil {
			return "", err
		}
		if sp.Path == "" {
			return "", nil
		}
		target = sp.Path
	}
	// /dev/ngXnY and /dev/nvmeXnY reach one namespace: compare the block device.
	if blk, err := safety.NGBlockDevice(target); err == nil && blk != "" {
		target = blk
	}
	var st unix.Stat_t
	if err := unix.Stat(target, &st); err != nil {
		if !errors.Is(err, unix.ENOENT) {
			return "", &os.PathError{Op: "stat", Path: target, Err: err}
		}
		abs, err := filepath.Abs(target)
		if err != nil {
			return "", err
		}
		if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
			abs = filepath.Join(dir, filepath.Base(abs))
		}
		return "path " + abs, nil
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		return fmt.Sprintf("block device %d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev)), nil
	case unix.S_IFCHR:
		return fmt.Sprintf("character device %d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev)), nil
	}
	return fmt.Sprintf("inode %d of device %d:%d", st.Ino, unix.Major(st.Dev), unix.Minor(st.Dev)), nil
}

// InMemory says whether p spells a memory device (mem:SIZE, emu:mem?...): one that lives
// only inside the process that opens it, new on every open and gone when that process
// exits. A spec that does not parse is not one (opening it says what is wrong).
func InMemory(p string) bool {
	if strings.HasPrefix(p, MemPrefix) {
		return true
	}
	sp, err := emu.ParseSpec(p)
	return err == nil && sp.Path == ""
}
