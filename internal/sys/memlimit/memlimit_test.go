package memlimit

import (
	"errors"
	"io/fs"
	"math"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fake is a Source over fixture files.
func fake(files map[string]string, rlimit uint64, goLimit, goHeld int64) Source {
	return Source{
		ReadFile: func(p string) ([]byte, error) {
			if s, ok := files[p]; ok {
				return []byte(s), nil
			}
			return nil, fs.ErrNotExist
		},
		RlimitAS:  func() (uint64, error) { return rlimit, nil },
		GoLimit:   func() int64 { return goLimit },
		GoHeld:    func() int64 { return goHeld },
		CgroupFS:  "/cg",
		ProcSelf:  "/p",
		MemInfoAt: "/mi",
	}
}

const meminfo = "MemTotal:       24684092 kB\nMemFree: 1 kB\nMemAvailable:   24180344 kB\n"

func TestSmallestLimitWinsAndIsNamed(t *testing.T) {
	base := map[string]string{"/mi": meminfo, "/p/status": "Name:\trbctl\nVmSize:\t  102400 kB\nVmRSS: 5 kB\n"}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	v2 := map[string]string{"/p/cgroup": "0::/user.slice/job\n", "/cg/user.slice/job/memory.max": "1073741824\n", "/cg/user.slice/job/memory.current": "268435456\n"}
	v1 := map[string]string{"/p/cgroup": "4:memory:/process_api/x\n1:cpu:/\n0::/\n", "/cg/memory/process_api/x/memory.limit_in_bytes": "536870912\n",
		"/cg/memory/process_api/x/memory.usage_in_bytes": "134217728\n"}
	for _, tc := range []struct {
		name   string
		src    Source
		want   int64
		prefix string
	}{
		{"meminfo only", fake(base, unix.RLIM_INFINITY, math.MaxInt64, 0), 24180344 << 10, "MemAvailable"},
		{"rlimit minus VmSize", fake(base, 3000000<<10, math.MaxInt64, 0), (3000000 - 102400) << 10, "RLIMIT_AS"},
		{"cgroup v2", fake(with(v2), unix.RLIM_INFINITY, math.MaxInt64, 0), 768 << 20, "cgroup /cg/user.slice/job/memory.max"},
		{"cgroup v2, the parent's limit binds", fake(with(map[string]string{"/p/cgroup": "0::/a/b\n", "/cg/a/b/memory.max": "max\n",
			"/cg/a/memory.max": "536870912\n", "/cg/a/memory.current": "0\n"}), unix.RLIM_INFINITY, math.MaxInt64, 0), 512 << 20, "cgroup /cg/a/memory.max"},
		{"cgroup v2 max, no v1", fake(with(map[string]string{"/p/cgroup": "0::/a\n", "/cg/a/memory.max": "max\n"}), unix.RLIM_INFINITY, math.MaxInt64, 0), 24180344 << 10, "MemAvailable"},
		{"cgroup v1 fallback", fake(with(v1), unix.RLIM_INFINITY, math.MaxInt64, 0), 384 << 20, "cgroup /cg/memory/process_api/x/memory.limit_in_bytes"},
		{"cgroup v1 unlimited", fake(with(map[string]string{"/p/cgroup": "4:memory:/x\n", "/cg/memory/x/memory.limit_in_bytes": "9223372036854771712\n"}), unix.RLIM_INFINITY, math.MaxInt64, 0), 24180344 << 10, "MemAvailable"},
		{"GOMEMLIMIT", fake(with(v2), unix.RLIM_INFINITY, 100<<20, 10<<20), 90 << 20, "GOMEMLIMIT"},
		{"exhausted rlimit is zero", fake(base, 50<<20, math.MaxInt64, 0), 0, "RLIMIT_AS"},
	} {
		l, ok := smallest(tc.src.Limits())
		if !ok || l.Bytes != tc.want || !strings.HasPrefix(l.Name, tc.prefix) {
			t.Errorf("%s: smallest %+v (%v), want %d bytes from %s", tc.name, l, ok, tc.want, tc.prefix)
		}
		err := tc.src.Check("the test's table", tc.want+1)
		var me *Error
		if !errors.As(err, &me) || !errors.Is(err, ErrNoMemory) || !strings.Contains(err.Error(), "limit: "+tc.prefix) {
			t.Errorf("%s: Check over the limit: %v", tc.name, err)
		}
		if err := tc.src.Check("the test's table", tc.want); err != nil {
			t.Errorf("%s: Check at the limit: %v", tc.name, err)
		}
	}
	// Nothing readable: nothing refused.
	none := fake(nil, unix.RLIM_INFINITY, math.MaxInt64, 0)
	if ls := none.Limits(); len(ls) != 0 || none.Check("x", math.MaxInt64) != nil {
		t.Fatalf("no limits readable: %v", ls)
	}
}

func TestParsers(t *testing.T) {
	if n, err := ParseMemAvailable([]byte(meminfo)); err != nil || n != 24180344<<10 {
		t.Fatalf("MemAvailable %d %v", n, err)
	}
	for _, bad := range []string{"", "MemTotal: 5 kB\n", "MemAvailable: lots\n", "MemAvailable: -4 kB\n", "MemAvailable: 5\n", "MemAvailable: 99999999999999999999 kB\n"} {
		if _, err := ParseMemAvailable([]byte(bad)); err == nil {
			t.Errorf("MemAvailable of %q: no error", bad)
		}
	}
	if n, err := ParseVmSize([]byte("VmPeak:\t 9 kB\nVmSize:\t    3892 kB\n")); err != nil || n != 3892<<10 {
		t.Fatalf("VmSize %d %v", n, err)
	}
	for _, tc := range []struct{ in, v2, v1 string }{
		{"0::/\n", "/", ""},
		{"9:name=systemd:/\n4:memory:/process_api/a\n0::/\n", "/", "/process_api/a"},
		{"5:cpuacct,memory:/docker/x\n", "", "/docker/x"},
		{"0::/user.slice/user-0.slice/session-3.scope\n", "/user.slice/user-0.slice/session-3.scope", ""},
	} {
		v2, v1, err := ParseProcCgroup([]byte(tc.in))
		if err != nil || v2 != tc.v2 || v1 != tc.v1 {
			t.Errorf("cgroup %q: %q %q %v", tc.in, v2, v1, err)
		}
	}
	for _, bad := range []string{"", "garbage\n", "0::relative\n", "x::/\n", "0::/a/../b\n"} {
		if _, _, err := ParseProcCgroup([]byte(bad)); err == nil {
			t.Errorf("cgroup %q: no error", bad)
		}
	}
	if n, ok, err := ParseCgroupValue([]byte("1073741824\n")); err != nil || !ok || n != 1<<30 {
		t.Fatalf("cgroup value %d %v %v", n, ok, err)
	}
	if _, ok, err := ParseCgroupValue([]byte("max\n")); err != nil || ok {
		t.Fatalf("max: %v %v", ok, err)
	}
	for _, bad := range []string{"", "-1", "12M", "maxx"} {
		if _, _, err := ParseCgroupValue([]byte(bad)); err == nil {
			t.Errorf("cgroup value %q: no error", bad)
		}
	}
}

// TestThisProcess reads the real limits: at least MemAvailable on Linux.
func TestThisProcess(t *testing.T) {
	l, ok := Smallest()
	if !ok || l.Bytes <= 0 {
		t.Fatalf("smallest limit of this process: %+v %v (all: %+v)", l, ok, Limits())
	}
}

func FuzzParseMemAvailable(f *testing.F) {
	f.Add([]byte(meminfo))
	f.Add([]byte("MemAvailable: 9223372036854775807 kB\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if n, err := ParseMemAvailable(b); err == nil && n < 0 {
			t.Fatalf("negative %d", n)
		}
		if n, err := ParseVmSize(b); err == nil && n < 0 {
			t.Fatalf("negative %d", n)
		}
	})
}

func FuzzParseProcCgroup(f *testing.F) {
	f.Add([]byte("9:name=systemd:/\n4:memory:/process_api/a\n0::/\n"))
	f.Add([]byte("0::/user.slice\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v2, v1, err := ParseProcCgroup(b)
		if err != nil {
			return
		}
		for _, p := range []string{v2, v1} {
			if p != "" && (!strings.HasPrefix(p, "/") || strings.Contains(p, "/../") || strings.HasSuffix(p, "/..")) {
				t.Fatalf("path %q escapes the cgroup file system", p)
			}
		}
	})
}

func FuzzParseCgroupValue(f *testing.F) {
	f.Add([]byte("max\n"))
	f.Add([]byte("1073741824\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if n, ok, err := ParseCgroupValue(b); err == nil && (n < 0 || (!ok && n != 0)) {
			t.Fatalf("%d %v", n, ok)
		}
	})
}
