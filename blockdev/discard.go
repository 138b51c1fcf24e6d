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
	ok, known := discardsAt(fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev))))
	return ok || !known
}

// discardsAt reads discard_max_bytes of the block device whose sysfs directory is dir (a
// partition's queue is its disk's, one level up); known is false when neither has it.
func discardsAt(dir string) (ok, known bool) {
	for _, q := range []string{filepath.Join(dir, "queue"), filepath.Join(dir, "..", "queue")} {
		b, err := os.ReadFile(filepath.Join(q, "discard_max_bytes"))
		if err != nil {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return false, false
		}
		return n > 0, true
	}
	return false, false
}
