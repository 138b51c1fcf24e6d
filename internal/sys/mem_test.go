package sys

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

func vmSizeKiB(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmSize:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	t.Skip("no VmSize")
	return 0
}

// Alloc: zeroed, writable over its whole length, page aligned, huge-page aligned from
// HugePage bytes on; Free gives back the whole mapping (the trimmed head and tail were
// never kept), so allocating and freeing in a loop does not grow the address space.
func TestAllocAlignmentAndFree(t *testing.T) {
	for _, n := range []int{1, 4095, 4096, HugePage - 1, HugePage, 3*HugePage + 5, 64 << 20} {
		b, err := Alloc(n)
		if err != nil {
			t.Fatalf("Alloc(%d): %v", n, err)
		}
		addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		if len(b) != n || cap(b) != n {
			t.Errorf("Alloc(%d): len %d cap %d", n, len(b), cap(b))
		}
		if addr%uintptr(pageSize) != 0 || n >= HugePage && addr%HugePage != 0 {
			t.Errorf("Alloc(%d) at %#x: not aligned", n, addr)
		}
		if !bytes.Equal(b, make([]byte, n)) {
			t.Errorf("Alloc(%d): not zeroed", n)
		}
		for i := range b {
			b[i] = byte(i)
		}
		if err := Free(b); err != nil {
			t.Fatalf("Free(%d): %v", n, err)
		}
	}
	if err := Free(nil); err != nil {
		t.Fatal(err)
	}
	before := vmSizeKiB(t)
	for range 200 {
		b, err := Alloc(3*HugePage + 5)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)-1] = 1
		if err := Free(b); err != nil {
			t.Fatal(err)
		}
	}
	if grew := vmSizeKiB(t) - before; grew > 16<<10 {
		t.Fatalf("the address space grew by %d KiB over 200 Alloc/Free pairs: Free leaves mappings behind", grew)
	}
	if _, err := Alloc(0); err == nil {
		t.Fatal("Alloc(0) succeeded")
	}
}

// A buffer of HugePage bytes or more is mapped in whole huge pages: its tail lies in one
// too (the mapping that holds it reaches the next huge page boundary).
func TestAllocMapsWholeHugePages(t *testing.T) {
	n := 3*HugePage + HugePage*3/4 + 5
	b, err := Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer Free(b)
	start := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip(err)
	}
	for _, l := range strings.Split(string(maps), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		a, err1 := strconv.ParseUint(lo, 16, 64)
		z, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || start < a || start >= z {
			continue
		}
		if want := start + 4*HugePage; z < want {
			t.Fatalf("the mapping of a %d-byte buffer at %#x ends at %#x, before %#x (whole huge pages)", n, start, z, want)
		}
		return
	}
	t.Fatalf("no mapping holds %#x", start)
}

// Where the kernel grants transparent huge pages for madvised memory, a large buffer gets
// them (AnonHugePages of its mapping in smaps). Logged, not asserted: THP can be off or out
// of free huge pages.
func TestAllocHugePages(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || bytes.Contains(mode, []byte("[never]")) {
		t.Skipf("transparent huge pages off (%s, %v)", bytes.TrimSpace(mode), err)
	}
	b, err := Alloc(8 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer Free(b)
	for i := 0; i < len(b); i += pageSize {
		b[i] = 1
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	start := strconv.FormatUint(uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))), 16)
	in := false
	for _, l := range strings.Split(string(smaps), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.Contains(f[0], "-") {
			in = strings.HasPrefix(f[0], start+"-")
			continue
		}
		if in && strings.HasPrefix(l, "AnonHugePages:") {
			t.Logf("8 MiB buffer: %s (THP %s)", strings.Join(strings.Fields(l), " "), bytes.TrimSpace(mode))
			return
		}
	}
	t.Logf("mapping at %s not found in smaps", start)
}
