package sys

import (
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
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

// MachineTicks is the time all CPUs of the machine have spent busy and in all, in clock
// ticks of USER_HZ, from /proc/stat's first line (busy: everything but idle and iowait;
// guest time is inside user time and not counted twice); ok false when it cannot be read.
func MachineTicks() (busy, total int64, ok bool) {
	b, err := ReadFileBounded("/proc/stat", 4096)
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return parseCPULine(line)
}

// parseCPULine reads /proc/stat's "cpu" line: user nice system idle iowait irq softirq
// steal [guest guest_nice].
func parseCPULine(line string) (busy, total int64, ok bool) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, false
	}
	var v [8]int64
	for i := range v {
		n, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil || n < 0 {
			return 0, 0, false
		}
		v[i] = n
		total += n
	}
	return total - v[3] - v[4], total, true
}

// LoadAvg is the machine's load average over 1, 5 and 15 minutes, as /proc/loadavg gives
// them ("0.37 1.40 1.76"); ok false when it cannot be read.
func LoadAvg() (string, bool) {
	b, err := ReadFileBounded("/proc/loadavg", 256)
	if err != nil {
		return "", false
	}
	return parseLoadAvg(string(b))
}

// LoadAvgText is LoadAvg for a line beside a figure: the three averages, or "not read".
func LoadAvgText() string {
	if l, ok := LoadAvg(); ok {
		return l
	}
	return "not read"
}

// parseLoadAvg takes /proc/loadavg's first three fields, each a non-negative number.
func parseLoadAvg(s string) (string, bool) {
	f := strings.Fields(s)
	if len(f) < 3 {
		return "", false
	}
	for _, x := range f[:3] {
		if v, err := strconv.ParseFloat(x, 64); err != nil || v < 0 {
			return "", false
		}
	}
	return strings.Join(f[:3], " "), true
}

// KernelRelease is uname's release ("6.18.44"), or "" when it cannot be read.
func KernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}
