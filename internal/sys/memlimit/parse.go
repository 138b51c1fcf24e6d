package memlimit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Parsers of the kernel's text files. They take bytes a kernel (or a fuzzer) wrote and
// never panic; a malformed file is an error, never a made-up limit.

// ParseMemAvailable finds "MemAvailable: N kB" in /proc/meminfo text.
func ParseMemAvailable(b []byte) (int64, error) { return kbField(b, "MemAvailable", "/proc/meminfo") }

// ParseVmSize finds "VmSize: N kB" in /proc/PID/status text.
func ParseVmSize(b []byte) (int64, error) { return kbField(b, "VmSize", "/proc/self/status") }

func kbField(b []byte, field, file string) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		v := strings.TrimSpace(rest)
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(v, "kB")), 10, 64)
		if err != nil || kb < 0 || kb > math.MaxInt64>>10 || !strings.HasSuffix(v, "kB") {
			return 0, fmt.Errorf("%s: %s %q is not a size in kB", file, field, v)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	return 0, fmt.Errorf("%s has no %s", file, field)
}

// ParseProcCgroup reads /proc/PID/cgroup: the cgroup v2 path (the "0::PATH" line) and the
// cgroup v1 memory controller's path (a "N:...memory...:PATH" line); either may be "".
func ParseProcCgroup(b []byte) (v2, v1 string, err error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	lines := 0
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		id, rest, ok1 := strings.Cut(line, ":")
		ctrls, p, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 || !strings.HasPrefix(p, "/") || strings.Contains(p, "/../") || strings.HasSuffix(p, "/..") {
			return "", "", fmt.Errorf("/proc/self/cgroup: malformed line %q", line)
		}
		if _, err := strconv.ParseUint(id, 10, 32); err != nil {
			return "", "", fmt.Errorf("/proc/self/cgroup: malformed hierarchy ID in %q", line)
		}
		lines++
		if id == "0" && ctrls == "" {
			v2 = p
			continue
		}
		for _, c := range strings.Split(ctrls, ",") {
			if c == "memory" {
				v1 = p
			}
		}
	}
	if err := sc.Err(); err != nil {
		return "", "", fmt.Errorf("/proc/self/cgroup: %w", err)
	}
	if lines == 0 {
		return "", "", errors.New("/proc/self/cgroup is empty")
	}
	return v2, v1, nil
}

// ParseCgroupValue reads a cgroup memory file holding one number of bytes or "max"
// (no limit: ok false).
func ParseCgroupValue(b []byte) (n int64, ok bool, err error) {
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, false, nil
	}
	n, err = strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, false, fmt.Errorf("cgroup memory value %q is not a number of bytes or max", s)
	}
	return n, true, nil
}
