package devices

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDistinct(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.img")
	if err := os.WriteFile(a, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.img")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "new.img")
	same := [][]string{
		{a, a},
		{a, link},
		{a, filepath.Join(dir, ".", "a.img")},
		{a, "emu:" + a},
		{missing, filepath.Join(dir, "..", filepath.Base(dir), "new.img")},
	}
	for _, paths := range same {
		if err := Distinct(paths); !errors.Is(err, ErrSameDevice) {
			t.Errorf("Distinct(%q) = %v; want ErrSameDevice", paths, err)
		}
	}
	if err := Distinct([]string{a, missing, "mem:8M", "mem:8M", "emu:mem?size=8M", "emu:mem?size=8M"}); err != nil {
		t.Errorf("distinct devices refused: %v", err)
	}
	err := Distinct([]string{a, link})
	if err == nil || !strings.Contains(err.Error(), a) || !strings.Contains(err.Error(), link) {
		t.Errorf("the error should name both spellings: %v", err)
	}
}
