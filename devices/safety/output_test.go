package safety

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOutputRefusals: a result is never written over an input, a cache, a filesystem image,
// a device, a loop device's backing file or a file another writer holds; an ordinary file,
// a new name, /dev/null and stdout pass.
func TestOutputRefusals(t *testing.T) {
	f := newFakeHost(t)
	dir := t.TempDir()
	plain := filepath.Join(dir, "old.json")
	if err := os.WriteFile(plain, []byte(`{"old":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	input := image(t, 1<<20, func([]byte) {})
	link := filepath.Join(dir, "link.img")
	if err := os.Symlink(input, link); err != nil {
		t.Fatal(err)
	}
	ext4 := image(t, 1<<20, func(b []byte) { binary.LittleEndian.PutUint16(b[1080:], 0xEF53) })
	looped := image(t, 1<<20, func([]byte) {})
	f.write("sys/block/loop3/loop/backing_file", looped+"\n")
	f.write("sys/block/loop3/dev", "7:3\n")
	held := image(t, 1<<20, func([]byte) {})
	hf, err := os.Open(held)
	if err != nil {
		t.Fatal(err)
	}
	defer hf.Close()
	if err := unix.Flock(int(hf.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path string
		inputs     []string
		kind       error // nil: allowed
		says       string
	}{
		{"new name", filepath.Join(dir, "new.bin"), []string{input}, nil, ""},
		{"stdout", "-", []string{input}, nil, ""},
		{"ordinary file", plain, []string{input}, nil, ""},
		{"/dev/null", os.DevNull, []string{input}, nil, ""},
		{"own input", input, []string{input}, ErrOwnInput, "own input"},
		{"own input through a symlink", link, []string{input}, ErrOwnInput, "own input"},
		{"own input, emu: spelling", input, []string{"emu:" + input + "?size=1M"}, ErrOwnInput, "own input"},
		{"input named through a symlink", input, []string{link}, ErrOwnInput, "own input"},
		{"filesystem image", ext4, nil, ErrOverwrite, "ext2 filesystem"},
		{"loop backing file", looped, nil, ErrInUse, "it backs " + filepath.Join(f.h.dev, "loop3")},
		{"held by a reader", held, nil, ErrInUse, "in use by"},
	} {
		err := f.h.output("--out", c.path, c.inputs)
		if c.kind == nil {
			if err != nil {
				t.Errorf("%s: refused: %v", c.name, err)
			}
			continue
		}
		if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "refusing to write --out to ") {
			t.Errorf("%s: got %v, want %v saying %q", c.name, err, c.kind, c.says)
		}
	}
	if err := f.h.output("--save", dir, nil); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("directory: %v", err)
	}
	if b, _ := os.ReadFile(plain); string(b) != `{"old":1}` {
		t.Errorf("the check changed a file: %q", b)
	}
}

// TestGateInUseIgnoresSignatures: the half of the gate that --force cannot lift still
// refuses a loop device's backing file, and lets a filesystem image through.
func TestGateInUseIgnoresSignatures(t *testing.T) {
	f := newFakeHost(t)
	img := image(t, 1<<20, func(b []byte) { binary.LittleEndian.PutUint16(b[1080:], 0xEF53) })
	if err := f.h.gate(Format, img, false); err != nil {
		t.Fatalf("a filesystem image under --force: %v", err)
	}
	f.write("sys/block/loop3/loop/backing_file", img+"\n")
	f.write("sys/block/loop3/dev", "7:3\n")
	if err := f.h.gate(Format, img, false); !errors.Is(err, ErrInUse) {
		t.Fatalf("a loop device's backing file under --force: %v", err)
	}
}
