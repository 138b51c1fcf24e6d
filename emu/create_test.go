package emu

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// A device whose geometry is refused leaves no data file behind, unless the file was there
// before (it is not this call's to remove); an empty data file is no device, so Create makes
// one there.
func TestCreateLeavesOnlyWhatItMade(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "e.img")
	bad := "emu:" + img + "?size=64M&ru=3M&ruhs=4" // too little over-provisioning
	if _, err := Create(bad); err == nil {
		t.Fatal("Create accepted an infeasible geometry")
	}
	if _, err := os.Stat(img); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused Create left %s: %v", img, err)
	}
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(bad); err == nil {
		t.Fatal("Create accepted an infeasible geometry")
	}
	if st, err := os.Stat(img); err != nil || st.Size() != 0 {
		t.Fatalf("a refused Create removed or changed a file it did not make: %v", err)
	}
	made, err := Create("emu:" + img + "?size=64M&ru=1M&ruhs=4")
	if err != nil || !made {
		t.Fatalf("Create on an empty data file: made %v, %v", made, err)
	}
	if st, err := os.Stat(img); err != nil || st.Size() != 64<<20 {
		t.Fatalf("data file after Create: %v %v", st, err)
	}
	if made, err := Create("emu:" + img + "?size=64M&ru=1M&ruhs=4"); err != nil || made {
		t.Fatalf("Create on an existing device: made %v, %v", made, err)
	}
}
