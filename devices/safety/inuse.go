package safety

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rbctl/rbctl/internal/sys"
)

// InUse describes how the block device or regular file at path is in use — "it is mounted
// at /mnt", "partition /dev/sda1 is mounted at /", "it is held by dm-0", "it backs
// /dev/loop3 (mounted at /mnt)" — or returns "" when it is not (or path is something else).
func InUse(path string) string {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return ""
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		return system.blockInUse(path, majMin(st.Rdev))
	case unix.S_IFREG:
		return system.fileInUse(path)
	}
	return ""
}

// blockInUse checks the block device name (major:minor dev) and its partitions for
// holders (device-mapper, md, ...), mounts and active swap.
func (h host) blockInUse(name, dev string) string {
	devs := map[string]string{dev: name}
	if real, err := filepath.EvalSymlinks(filepath.Join(h.sys, "dev", "block", dev)); err == nil {
		if hs, _ := os.ReadDir(filepath.Join(real, "holders")); len(hs) > 0 {
			return "it is held by " + hs[0].Name() + " (device-mapper/LVM/md/...)"
		}
		// Partitions are sub-directories with a "partition" file.
		ents, _ := os.ReadDir(real)
		for _, e := range ents {
			dir := filepath.Join(real, e.Name())
			if _, err := os.Stat(filepath.Join(dir, "partition")); err != nil {
				continue
			}
			part := filepath.Join(h.dev, e.Name())
			if b, err := os.ReadFile(filepath.Join(dir, "dev")); err == nil {
				devs[strings.TrimSpace(string(b))] = part
			}
			if hs, _ := os.ReadDir(filepath.Join(dir, "holders")); len(hs) > 0 {
				return "partition " + part + " is held by " + hs[0].Name() + " (device-mapper/LVM/md/...)"
			}
		}
	}
	if f, err := os.Open(filepath.Join(h.proc, "self", "mountinfo")); err == nil {
		defer f.Close()
		if m, ok := FindMount(f, devs); ok {
			if m.Device == name {
				return "it is mounted at " + m.MountPoint
			}
			return "partition " + m.Device + " is mounted at " + m.MountPoint
		}
	}
	if b, err := sys.ReadFileBounded(filepath.Join(h.proc, "swaps"), 1<<20); err == nil {
		lines := strings.Split(string(b), "\n")
		for _, line := range lines[min(1, len(lines)):] {
			fs := strings.Fields(line)
			if len(fs) == 0 {
				continue
			}
			var s unix.Stat_t
			if unix.Stat(fs[0], &s) == nil && s.Mode&unix.S_IFMT == unix.S_IFBLK {
				if _, ok := devs[majMin(s.Rdev)]; ok {
					return fs[0] + " is active swap"
				}
			}
		}
	}
	return ""
}

// fileInUse reports the loop device a regular file backs (the kernel's loop driver takes
// no lock on it, so nothing else would notice), and where that loop device is mounted.
func (h host) fileInUse(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	var st unix.Stat_t
	if unix.Stat(abs, &st) != nil {
		return ""
	}
	ents, _ := os.ReadDir(filepath.Join(h.sys, "block"))
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "loop") {
			continue
		}
		dir := filepath.Join(h.sys, "block", e.Name())
		b, err := sys.ReadFileBounded(filepath.Join(dir, "loop", "backing_file"), 8192)
		if err != nil {
			continue
		}
		backing := strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)")
		var bs unix.Stat_t
		if backing != abs && (unix.Stat(backing, &bs) != nil || bs.Dev != st.Dev || bs.Ino != st.Ino) {
			continue
		}
		loop := filepath.Join(h.dev, e.Name())
		d, err := sys.ReadFileBounded(filepath.Join(dir, "dev"), 64)
		if err != nil {
			return "it backs " + loop
		}
		if u := h.blockInUse(loop, strings.TrimSpace(string(d))); u != "" {
			return fmt.Sprintf("it backs %s (%s)", loop, strings.TrimPrefix(u, "it is "))
		}
		return "it backs " + loop
	}
	return ""
}

// Mount is one mountinfo line that matched.
type Mount struct {
	Device, MountPoint string
}

// FindMount scans mountinfo content for a mount of any device in devs ("major:minor" →
// display name). It also matches the mount source by name, for filesystems whose mountinfo
// device number is an anonymous one (btrfs).
func FindMount(r io.Reader, devs map[string]string) (Mount, bool) {
	byName := map[string]string{}
	for _, name := range devs {
		byName[filepath.Base(name)] = name
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 5 {
			continue
		}
		if name, ok := devs[fs[2]]; ok {
			return Mount{Device: name, MountPoint: unescapeMount(fs[4])}, true
		}
		for i := 5; i+2 < len(fs); i++ {
			if fs[i] != "-" {
				continue
			}
			if src := unescapeMount(fs[i+2]); strings.HasPrefix(src, "/dev/") {
				if name, ok := byName[filepath.Base(src)]; ok {
					return Mount{Device: name, MountPoint: unescapeMount(fs[4])}, true
				}
			}
			break
		}
	}
	return Mount{}, false
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b bytes.Buffer
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range s[i+1 : i+4] {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + byte(c-'0')
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
