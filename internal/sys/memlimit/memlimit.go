// Package memlimit says how much more memory this process may allocate, and refuses an
// allocation that would not fit with an error naming the limit, before the Go runtime
// would die of it ("fatal error: out of memory" cannot be recovered).
//
// Four limits apply, and the smallest wins:
//
//   - MemAvailable of /proc/meminfo (the machine's free and reclaimable memory);
//   - RLIMIT_AS (ulimit -v) minus the process's VmSize (/proc/self/status): address space,
//     which the runtime needs for every heap arena;
//   - the cgroup's memory.max minus memory.current (cgroup v2: the smallest over the cgroup
//     in /proc/self/cgroup and its ancestors), or memory.limit_in_bytes minus
//     memory.usage_in_bytes (cgroup v1, the memory controller's cgroup);
//   - GOMEMLIMIT (debug.SetMemoryLimit) minus the memory the Go runtime holds now.
//
// A limit that cannot be read is left out; when none can, nothing is refused.
package memlimit

import (
	"errors"
	"fmt"
	"math"
	"path"
	"runtime/debug"
	"runtime/metrics"

	"golang.org/x/sys/unix"

	"github.com/rbctl/rbctl/internal/sys"
	"github.com/rbctl/rbctl/units"
)

// Limit is one bound on further allocation.
type Limit struct {
	Name  string // what it is, as a person reads it: "RLIMIT_AS (ulimit -v) minus VmSize"
	Bytes int64  // bytes that may still be allocated under it (0 when exhausted)
}

// ErrNoMemory marks an allocation refused for a limit.
var ErrNoMemory = errors.New("not enough memory")

// Error is an allocation refused because it exceeds the smallest limit.
type Error struct {
	What  string // what was to be allocated
	Need  int64  // its estimated bytes
	Limit Limit
}

func (e *Error) Unwrap() error { return ErrNoMemory }

func (e *Error) Error() string {
	return fmt.Sprintf("%s needs about %s of memory, but only %s may be allocated (limit: %s)",
		e.What, units.FormatSize(e.Need), units.FormatSize(e.Limit.Bytes), e.Limit.Name)
}

// Source reads the limits; the fields are replaced in tests.
type Source struct {
	ReadFile  func(path string) ([]byte, error)
	RlimitAS  func() (cur uint64, err error)
	GoLimit   func() int64 // GOMEMLIMIT; math.MaxInt64 when unset
	GoHeld    func() int64 // bytes the Go runtime holds from the OS
	CgroupFS  string       // mount point of the cgroup file systems, normally /sys/fs/cgroup
	ProcSelf  string       // normally /proc/self
	MemInfoAt string       // normally /proc/meminfo
}

// System reads the limits of this process.
var System = Source{
	ReadFile: func(p string) ([]byte, error) { return sys.ReadFileBounded(p, 1<<20) },
	RlimitAS: func() (uint64, error) {
		var r unix.Rlimit
		err := unix.Getrlimit(unix.RLIMIT_AS, &r)
		return r.Cur, err
	},
	GoLimit:   func() int64 { return debug.SetMemoryLimit(-1) },
	GoHeld:    goHeld,
	CgroupFS:  "/sys/fs/cgroup",
	ProcSelf:  "/proc/self",
	MemInfoAt: "/proc/meminfo",
}

// goHeld is the memory the Go runtime has mapped and not released to the OS.
func goHeld() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(min(s[0].Value.Uint64()-min(s[1].Value.Uint64(), s[0].Value.Uint64()), math.MaxInt64))
}

// Limits returns every limit of this process that can be read.
func Limits() []Limit { return System.Limits() }

// Smallest returns the smallest limit of this process (false when none can be read).
func Smallest() (Limit, bool) { return smallest(System.Limits()) }

// Check refuses (with an *Error) an allocation of need bytes for what when it exceeds the
// smallest limit of this process; it passes when no limit can be read.
func Check(what string, need int64) error { return System.Check(what, need) }

// Check is the package's Check against s's limits.
func (s Source) Check(what string, need int64) error {
	l, ok := smallest(s.Limits())
	if !ok || need <= l.Bytes {
		return nil
	}
	return &Error{What: what, Need: need, Limit: l}
}

func smallest(ls []Limit) (Limit, bool) {
	if len(ls) == 0 {
		return Limit{}, false
	}
	m := ls[0]
	for _, l := range ls[1:] {
		if l.Bytes < m.Bytes {
			m = l
		}
	}
	return m, true
}

// Limits returns every limit s can read, in the order of the package comment.
func (s Source) Limits() []Limit {
	var out []Limit
	if b, err := s.ReadFile(s.MemInfoAt); err == nil {
		if n, err := ParseMemAvailable(b); err == nil {
			out = append(out, Limit{Name: "MemAvailable in " + s.MemInfoAt, Bytes: n})
		}
	}
	if cur, err := s.RlimitAS(); err == nil && cur != unix.RLIM_INFINITY && cur <= math.MaxInt64 {
		var vm int64
		if b, err := s.ReadFile(s.ProcSelf + "/status"); err == nil {
			vm, _ = ParseVmSize(b)
		}
		out = append(out, Limit{Name: fmt.Sprintf("RLIMIT_AS (ulimit -v) %s minus VmSize %s", units.FormatSize(int64(cur)), units.FormatSize(vm)),
			Bytes: max(int64(cur)-vm, 0)})
	}
	if l, ok := s.cgroupLimit(); ok {
		out = append(out, l)
	}
	if lim := s.GoLimit(); lim >= 0 && lim < math.MaxInt64 {
		held := s.GoHeld()
		out = append(out, Limit{Name: fmt.Sprintf("GOMEMLIMIT %s minus %s the Go runtime holds", units.FormatSize(lim), units.FormatSize(held)),
			Bytes: max(lim-held, 0)})
	}
	return out
}

// cgroupLimit reads the memory limit of the process's cgroup: v2 (memory.max,
// memory.current) first, then v1's memory controller (memory.limit_in_bytes,
// memory.usage_in_bytes). No limit ("max", or v1's page-rounded 2^63) is no Limit.
func (s Source) cgroupLimit() (Limit, bool) {
	b, err := s.ReadFile(s.ProcSelf + "/cgroup")
	if err != nil {
		return Limit{}, false
	}
	v2, v1, err := ParseProcCgroup(b)
	if err != nil {
		return Limit{}, false
	}
	try := func(dir, maxFile, curFile string) (Limit, bool) {
		mb, err := s.ReadFile(path.Join(dir, maxFile))
		if err != nil {
			return Limit{}, false
		}
		lim, ok, err := ParseCgroupValue(mb)
		if err != nil || !ok || lim >= math.MaxInt64/2 {
			return Limit{}, false
		}
		var cur int64
		if cb, err := s.ReadFile(path.Join(dir, curFile)); err == nil {
			if c, ok, err := ParseCgroupValue(cb); err == nil && ok {
				cur = c
			}
		}
		return Limit{Name: fmt.Sprintf("cgroup %s %s minus %s %s", path.Join(dir, maxFile), units.FormatSize(lim), curFile, units.FormatSize(cur)),
			Bytes: max(lim-cur, 0)}, true
	}
	if v2 != "" {
		// A parent's limit binds its children too: the smallest on the way up wins.
		var best Limit
		found := false
		for dir := path.Clean(v2); ; dir = path.Dir(dir) {
			if l, ok := try(path.Join(s.CgroupFS, dir), "memory.max", "memory.current"); ok && (!found || l.Bytes < best.Bytes) {
				best, found = l, true
			}
			if dir == "/" {
				break
			}
		}
		if found {
			return best, true
		}
	}
	if v1 != "" {
		return try(path.Join(s.CgroupFS, "memory", v1), "memory.limit_in_bytes", "memory.usage_in_bytes")
	}
	return Limit{}, false
}
