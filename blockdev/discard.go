package blockdev

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// blockDiscards reports whether the block device open on fd takes discards (BLKDISCARD),
// from its queue's discard_max_bytes in sysfs: 0 means the device (a disk without
// discard, a loop device whose backing file cannot punch holes) refuses every one. When
// sysfs cannot tell, it answers true, and a refused discard is an error as before.
func blockDiscards(fd int) bool {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return true
	}
	ok, known := discardsAt(filepath.Join(sysBlockDir, fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))))
	return ok || !known
}

// discardsAt reads discard_max_bytes of the block device whose sysfs entry is dir
// (/sys/dev/block/MAJ:MIN, a link into /sys/devices). A partition has no queue of its own:
// its disk's is the directory above the link's target (a lexical ".." would climb out of
// /sys/dev/block instead). known is false when no queue says.
func discardsAt(dir string) (ok, known bool) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false, false
	}
	q := filepath.Join(real, "queue")
	if _, err := os.Stat(filepath.Join(real, "partition")); err == nil {
		q = filepath.Join(filepath.Dir(real), "queue")
	}
	b, err := os.ReadFile(filepath.Join(q, "discard_max_bytes"))
	if err != nil {
		return false, false
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return false, false
	}
	return n > 0, true
}
