// Package safety decides whether a path may be formatted: it refuses mounted devices (or
// devices with a mounted partition or a holder such as device-mapper or md), active swap,
// and anything carrying a filesystem, partition table, LVM, RAID, LUKS or cache signature.
// `rbctl format --force` skips these checks.
package safety

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

var (
	// ErrInUse: the device is mounted, used as swap, or held by another device.
	ErrInUse = errors.New("device in use")
	// ErrHasData: the device carries a recognised signature.
	ErrHasData = errors.New("device holds data")
)

// Signature is a recognised on-disk format.
type Signature struct {
	Name   string // "ext4", "xfs", "gpt", "rbctl/LMCache cache", ...
	Offset int64
}

// CheckFormatTarget returns nil when path may be formatted, or an error naming what is there
// and how to proceed.
func CheckFormatTarget(path string) error {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // nothing there yet (format --create makes it)
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFBLK {
		if err := checkBlockInUse(path, st.Rdev); err != nil {
			return err
		}
	}
	if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == 0 {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%s: cannot read it to check for existing data: %w", path, err)
	}
	defer f.Close()
	size := st.Size
	if st.Mode&unix.S_IFMT == unix.S_IFBLK {
		if n, err := unix.IoctlGetUint64(int(f.Fd()), unix.BLKGETSIZE64); err == nil {
			size = int64(n)
		}
	}
	sigs, err := Detect(f, size)
	if err != nil {
		return fmt.Errorf("%s: reading for signatures: %w", path, err)
	}
	if len(sigs) > 0 {
		names := make([]string, len(sigs))
		for i, s := range sigs {
			names[i] = fmt.Sprintf("%s (at byte %d)", s.Name, s.Offset)
		}
		hint := "wipe it first (wipefs -a " + path + ") or pass --force"
		if sigs[0].Name == cacheSig {
			hint = "inspect it (rbctl inspect " + path + "), or pass --force to reformat and lose its entries"
		}
		return fmt.Errorf("%w: %s has %s; %s", ErrHasData, path, strings.Join(names, ", "), hint)
	}
	return nil
}

const cacheSig = "an rbctl/LMCache raw-block cache (LMCIDX01)"

// Detect returns the signatures found in r (a device or image of size bytes).
func Detect(r io.ReaderAt, size int64) ([]Signature, error) {
	head := make([]byte, min(size, 128<<10))
	if _, err := r.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	at := func(off int64, magic string) bool {
		return off >= 0 && off+int64(len(magic)) <= int64(len(head)) && string(head[off:off+int64(len(magic))]) == magic
	}
	var sigs []Signature
	add := func(name string, off int64) { sigs = append(sigs, Signature{name, off}) }
	if at(0, "LMCIDX01") {
		add(cacheSig, 0)
	}
	if len(head) >= 1082 && binary.LittleEndian.Uint16(head[1080:]) == 0xEF53 {
		add(extName(head), 1080)
	}
	if at(0, "XFSB") {
		add("xfs", 0)
	}
	if at(65600, "_BHRfS_M") {
		add("btrfs", 65600)
	}
	for _, off := range []int64{4086, 8182, 16374, 65526} {
		if at(off, "SWAPSPACE2") || at(off, "SWAP-SPACE") {
			add("swap", off)
			break
		}
	}
	for s := int64(0); s < 4; s++ {
		if at(s*512, "LABELONE") && at(s*512+24, "LVM2 001") {
			add("LVM2 physical volume", s*512)
			break
		}
	}
	if at(0, "LUKS\xba\xbe") {
		add("LUKS", 0)
	}
	if at(512, "EFI PART") || at(4096, "EFI PART") {
		off := int64(512)
		if !at(512, "EFI PART") {
			off = 4096
		}
		add("GPT partition table", off)
	} else if len(head) >= 512 && head[510] == 0x55 && head[511] == 0xAA {
		add("MBR partition table / boot sector", 510)
	}
	const mdMagic = 0xa92b4efc
	mdAt := func(off int64) bool {
		if off < 0 || off+4 > size {
			return false
		}
		var b [4]byte
		if off+4 <= int64(len(head)) {
			copy(b[:], head[off:])
		} else if _, err := r.ReadAt(b[:], off); err != nil {
			return false
		}
		return binary.LittleEndian.Uint32(b[:]) == mdMagic
	}
	for _, off := range []int64{0, 4096, (size &^ (64<<10 - 1)) - 64<<10, ((size/512 - 16) &^ 7) * 512} {
		if size > 128<<10 || off < int64(len(head)) {
			if mdAt(off) {
				add("Linux md RAID member", off)
				break
			}
		}
	}
	return sigs, nil
}

func extName(sb []byte) string {
	// superblock at 1024: feature_compat at +92, feature_incompat at +96.
	compat := binary.LittleEndian.Uint32(sb[1024+92:])
	incompat := binary.LittleEndian.Uint32(sb[1024+96:])
	switch {
	case incompat&0x40 != 0 || incompat&0x200 != 0: // extents / flex_bg
		return "ext4"
	case compat&0x4 != 0: // has_journal
		return "ext3"
	}
	return "ext2"
}

// checkBlockInUse refuses a block device that is mounted, has a mounted partition, is active
// swap, or has holders (device-mapper, md, ...).
func checkBlockInUse(path string, rdev uint64) error {
	maj, min := unix.Major(rdev), unix.Minor(rdev)
	devs := map[string]string{fmt.Sprintf("%d:%d", maj, min): path}
	sysdir := fmt.Sprintf("/sys/dev/block/%d:%d", maj, min)
	if real, err := filepath.EvalSymlinks(sysdir); err == nil {
		// partitions are sub-directories with a "partition" file
		ents, _ := os.ReadDir(real)
		for _, e := range ents {
			if _, err := os.Stat(filepath.Join(real, e.Name(), "partition")); err == nil {
				if b, err := os.ReadFile(filepath.Join(real, e.Name(), "dev")); err == nil {
					devs[strings.TrimSpace(string(b))] = "/dev/" + e.Name()
				}
			}
		}
		for _, name := range devs {
			dir := real
			if name != path {
				dir = filepath.Join(real, filepath.Base(name))
			}
			if hs, _ := os.ReadDir(filepath.Join(dir, "holders")); len(hs) > 0 {
				return fmt.Errorf("%w: %s is held by %s (device-mapper/LVM/md/...); remove that first or pass --force", ErrInUse, name, hs[0].Name())
			}
		}
	}
	if f, err := os.Open("/proc/self/mountinfo"); err == nil {
		defer f.Close()
		if m, ok := FindMount(f, devs); ok {
			return fmt.Errorf("%w: %s is mounted at %s; unmount it first or pass --force", ErrInUse, m.Device, m.MountPoint)
		}
	}
	if b, err := os.ReadFile("/proc/swaps"); err == nil {
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) == 0 {
				continue
			}
			var s unix.Stat_t
			if unix.Stat(fs[0], &s) == nil && s.Mode&unix.S_IFMT == unix.S_IFBLK {
				if _, ok := devs[fmt.Sprintf("%d:%d", unix.Major(s.Rdev), unix.Minor(s.Rdev))]; ok {
					return fmt.Errorf("%w: %s is active swap; swapoff %s first or pass --force", ErrInUse, fs[0], fs[0])
				}
			}
		}
	}
	return nil
}

// Mount is one mountinfo line that matched.
type Mount struct {
	Device, MountPoint string
}

// FindMount scans mountinfo content for a mount of any device in devs ("major:minor" →
// display name).
func FindMount(r io.Reader, devs map[string]string) (Mount, bool) {
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
