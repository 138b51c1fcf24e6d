package flagsets

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --create SIZE: create if missing, extend if smaller, never shrink, 0600, never a device.
func TestCreateIfMissing(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.img")
	size := func() int64 {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	if err := CreateIfMissing(p, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("an empty --create made %s: %v", p, err)
	}
	if err := CreateIfMissing(p, "1M"); err != nil || size() != 1<<20 {
		t.Fatalf("create: %v, size %d", err, size())
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	if err := CreateIfMissing(p, "2M"); err != nil || size() != 2<<20 {
		t.Fatalf("extend: %v, size %d", err, size())
	}
	if err := CreateIfMissing(p, "1M"); err == nil || size() != 2<<20 {
		t.Fatalf("shrink allowed: %v, size %d", err, size())
	}
	for _, tc := range []struct{ path, size, want string }{
		{"/dev/null", "1M", "only a regular file can be created"},
		{"emu:" + filepath.Join(dir, "e.img") + "?size=1G", "1M", "an emu: device is created with the size its spec gives"},
		{p, "lots", "--create"},
	} {
		if err := CreateIfMissing(tc.path, tc.size); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CreateIfMissing(%q, %q) = %v, want %q", tc.path, tc.size, err, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "e.img")); !os.IsNotExist(err) {
		t.Errorf("the emu: refusal created its data file: %v", err)
	}
}
