package sys

import (
	"io"
	"os"
	"strconv"
	"strings"
)

// ReadFileBounded reads at most max bytes of a kernel file (procfs, sysfs): their sizes are
// not known up front, and one that grows (a /proc/locks on a busy host) must not be read
// without bound.
func ReadFileBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max))
}

// CPUTicks is the CPU time (user + system, in clock ticks of USER_HZ, 100 per second on
// Linux) process pid has used, from /proc/PID/stat; -1 when it cannot be read. The comm
// field may hold spaces and parentheses, so the fields are counted after its last ") ".
func CPUTicks(pid int) int64 {
	if pid <= 0 {
		return -1
	}
	b, err := ReadFileBounded("/proc/"+strconv.Itoa(pid)+"/stat", 4096)
	if err != nil {
		return -1
	}
	i := strings.LastIndex(string(b), ") ")
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 13 {
		return -1
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return u + s
}
