package safety

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/internal/looptest"
)

func image(t *testing.T, size int64, patch func(b []byte)) string {
	t.Helper()
	b := make([]byte, size)
	patch(b)
	p := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestGateSignatures(t *testing.T) {
	const size = 1 << 20
	for _, c := range []struct {
		name  string
		patch func(b []byte)
		want  string // "" = allowed
	}{
		{"zeroed image is allowed", func(b []byte) {}, ""},
		{"data it does not recognise is refused", func(b []byte) {
			for i := range b {
				b[i] = byte(i*31 + 7)
			}
			b[510], b[511] = 0, 0
			binary.LittleEndian.PutUint16(b[1080:], 0)
		}, "it holds data rbctl does not recognise (a non-zero byte at byte 0;"},
		{"text at byte 0 of zeros is refused", func(b []byte) { copy(b, "IMPORTANT USER DATA") }, "(a non-zero byte at byte 0;"},
		{"one byte beyond the first 128 KiB is found", func(b []byte) { b[200<<10+17] = 1 }, "data rbctl does not recognise"},
		{"the last byte is found", func(b []byte) { b[size-1] = 1 }, fmt.Sprintf("(a non-zero byte at byte %d;", size-1)},
		{"ext4 is refused, with its label", func(b []byte) {
			binary.LittleEndian.PutUint16(b[1080:], 0xEF53)
			binary.LittleEndian.PutUint32(b[1024+96:], 0x40)
			copy(b[1024+120:], "data")
		}, `it holds an ext4 filesystem (label "data")`},
		{"ext3 is refused", func(b []byte) {
			binary.LittleEndian.PutUint16(b[1080:], 0xEF53)
			binary.LittleEndian.PutUint32(b[1024+92:], 0x4)
		}, "an ext3 filesystem"},
		{"ext2 is refused", func(b []byte) { binary.LittleEndian.PutUint16(b[1080:], 0xEF53) }, "an ext2 filesystem"},
		{"a hostile label is escaped", func(b []byte) {
			binary.LittleEndian.PutUint16(b[1080:], 0xEF53)
			copy(b[1024+120:], "a\x1b[2Jb\"")
		}, `(label "a?[2Jb\"")`},
		{"xfs is refused", func(b []byte) { copy(b, "XFSB"); copy(b[108:], "scratch") }, `an xfs filesystem (label "scratch")`},
		{"btrfs is refused", func(b []byte) { copy(b[65600:], "_BHRfS_M") }, "btrfs"},
		{"swap is refused", func(b []byte) { copy(b[4086:], "SWAPSPACE2"); copy(b[1052:], "sw0") }, `a swap area (label "sw0")`},
		{"LVM2 is refused", func(b []byte) { copy(b[512:], "LABELONE"); copy(b[512+24:], "LVM2 001") }, "LVM2"},
		{"LUKS is refused", func(b []byte) { copy(b, "LUKS\xba\xbe\x00\x02"); copy(b[24:], "vault") }, `a LUKS encrypted volume (label "vault")`},
		{"GPT is refused", func(b []byte) { b[510], b[511] = 0x55, 0xAA; copy(b[512:], "EFI PART") }, "GPT"},
		{"MBR is refused", func(b []byte) { b[510], b[511] = 0x55, 0xAA }, "MBR"},
		{"md RAID 1.2 is refused", func(b []byte) { binary.LittleEndian.PutUint32(b[4096:], 0xa92b4efc) }, "md RAID"},
		{"md RAID 0.90 at the end is refused", func(b []byte) { binary.LittleEndian.PutUint32(b[size-64<<10:], 0xa92b4efc) }, "md RAID"},
		{"existing cache is refused", func(b []byte) { copy(b, "LMCIDX01") }, "raw-block cache (metadata container at byte 0); inspect it (rbctl inspect "},
		{"a cache with container 0 wiped is refused", func(b []byte) { copy(b[512<<10:], "LMCIDX01") }, "raw-block cache (second metadata container at byte 524288)"},
		{"a signature and a partition table are both named", func(b []byte) {
			copy(b, "XFSB")
			b[510], b[511] = 0x55, 0xAA
		}, "it holds an xfs filesystem and an MBR partition table"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := image(t, size, c.patch)
			err := Gate(Format, p)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrHasData) || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "refusing to format "+p+": ") {
				t.Fatalf("err = %v, want ErrHasData %q", err, c.want)
			}
		})
	}
}

func TestGateActions(t *testing.T) {
	cache := image(t, 1<<20, func(b []byte) { copy(b, "LMCIDX01") })
	if err := Gate(Recover, cache); err != nil {
		t.Errorf("recover over a cache: %v", err)
	}
	if err := Gate(Bench, cache); !errors.Is(err, ErrHasData) || !strings.HasPrefix(err.Error(), "refusing to run bench on ") {
		t.Errorf("bench over a cache: %v", err)
	}
	fs := image(t, 1<<20, func(b []byte) { binary.LittleEndian.PutUint16(b[1080:], 0xEF53) })
	if err := Gate(Recover, fs); !errors.Is(err, ErrHasData) || !strings.Contains(err.Error(), "refusing to write a repaired checkpoint to "+fs+": it holds an ext2 filesystem, not a raw-block cache") {
		t.Errorf("recover over a filesystem: %v", err)
	}
}

func TestGateMissingEmptyAndMemory(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "empty")
	os.WriteFile(p, nil, 0o600)
	for _, dev := range []string{filepath.Join(dir, "new"), p, "emu:mem?size=1G", "emu:" + filepath.Join(dir, "new.img") + "?size=1G"} {
		if err := Gate(Format, dev); err != nil {
			t.Errorf("%s: %v", dev, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the gate created files: %v", ents)
	}
}

// TestGateEmuChecksTheDataFile: emu:PATH is checked by its data file, not by the spec string.
func TestGateEmuChecksTheDataFile(t *testing.T) {
	p := image(t, 16<<20, func(b []byte) { copy(b, "LMCIDX01") })
	err := Gate(Format, "emu:"+p+"?size=16M&ru=1M")
	if !errors.Is(err, ErrHasData) || !strings.Contains(err.Error(), "refusing to format "+p+" (the emulated SSD's data file): it holds an rbctl/LMCache raw-block cache") {
		t.Fatalf("emu over a cache: %v", err)
	}
	if err := Gate(Format, "emu:"+p+"?size=nonsense"); err == nil {
		t.Error("a bad spec passed")
	}
}

// TestGateRealExt4 formats an image with mkfs.ext4 when it is installed.
func TestGateRealExt4(t *testing.T) {
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		t.Skip("mkfs.ext4 not installed; the synthetic superblocks above cover the check")
	}
	p := image(t, 32<<20, func([]byte) {})
	if out, err := exec.Command(mkfs, "-q", "-F", "-L", "data", p).CombinedOutput(); err != nil {
		t.Skipf("mkfs.ext4: %v: %s", err, out)
	}
	err = Gate(Format, p)
	if want := "refusing to format " + p + `: it holds an ext4 filesystem (label "data")`; err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}

func TestFindMount(t *testing.T) {
	info := `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
36 22 7:3 / /mnt/my\040cache rw - ext4 /dev/loop3 rw
40 22 0:52 / /srv rw,relatime shared:9 - btrfs /dev/nvme1n1 rw,ssd
`
	for _, c := range []struct {
		name string
		devs map[string]string
		want string
	}{
		{"unmounted device", map[string]string{"7:4": "/dev/loop4"}, ""},
		{"mounted device", map[string]string{"7:3": "/dev/loop3"}, "/mnt/my cache"},
		{"mounted partition of the disk", map[string]string{"8:0": "/dev/sda", "8:1": "/dev/sda1"}, "/"},
		{"btrfs, whose mountinfo device is anonymous", map[string]string{"259:5": "/dev/nvme1n1"}, "/srv"},
	} {
		m, ok := FindMount(strings.NewReader(info), c.devs)
		if (c.want != "") != ok || m.MountPoint != c.want {
			t.Errorf("%s: got %+v %v, want %q", c.name, m, ok, c.want)
		}
	}
}

// fakeHost builds a sysfs, proc and dev tree under a temp dir.
type fakeHost struct {
	t    *testing.T
	root string
	h    host
}

func newFakeHost(t *testing.T) *fakeHost {
	root := t.TempDir()
	f := &fakeHost{t: t, root: root, h: host{sys: filepath.Join(root, "sys"), proc: filepath.Join(root, "proc"), dev: filepath.Join(root, "dev")}}
	f.write("proc/self/mountinfo", "22 1 253:0 / / rw - ext4 /dev/vda rw\n")
	f.write("proc/swaps", "Filename Type Size Used Priority\n")
	return f
}

func (f *fakeHost) write(rel, content string) {
	f.t.Helper()
	p := filepath.Join(f.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeHost) symlink(rel, target string) {
	f.t.Helper()
	p := filepath.Join(f.root, rel)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.Symlink(target, p); err != nil {
		f.t.Fatal(err)
	}
}

// disk adds a block device: its devices/ directory under parent, /sys/class/block and
// /sys/dev/block links, and a /dev node that is a plain file with content.
func (f *fakeHost) disk(parent, name, dev string, content []byte) {
	f.t.Helper()
	dir := filepath.Join("sys/devices", parent, name)
	f.write(filepath.Join(dir, "dev"), dev+"\n")
	os.MkdirAll(filepath.Join(f.root, dir, "holders"), 0o755)
	f.symlink("sys/class/block/"+name, filepath.Join(f.root, dir))
	f.symlink("sys/dev/block/"+dev, filepath.Join(f.root, dir))
	if err := os.MkdirAll(f.h.dev, 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.h.dev, name), content, 0o600); err != nil {
		f.t.Fatal(err)
	}
}

// ngDevice adds /sys/class/nvme-generic/name hanging off parent.
func (f *fakeHost) ngDevice(name, parent string) {
	f.t.Helper()
	os.MkdirAll(filepath.Join(f.root, "sys/devices", parent), 0o755)
	f.symlink("sys/class/nvme-generic/"+name+"/device", filepath.Join(f.root, "sys/devices", parent))
}

func TestNGBlockResolution(t *testing.T) {
	f := newFakeHost(t)
	// Plain controller: ng0n1 and nvme0n1 both hang off nvme0.
	f.disk("pci0000:00/0000:00:04.0/nvme/nvme0", "nvme0n1", "259:0", nil)
	f.ngDevice("ng0n1", "pci0000:00/0000:00:04.0/nvme/nvme0")
	// Native multipath: the per-path ng1n1 of controller 1 hangs off nvme1, beside the
	// hidden disk nvme2c1n1; the head nvme2n1 hangs off the subsystem.
	f.disk("pci0000:00/0000:00:05.0/nvme/nvme1", "nvme2c1n1", "259:7", nil)
	f.disk("virtual/nvme-subsystem/nvme-subsys2", "nvme2n1", "259:8", nil)
	f.ngDevice("ng1n1", "pci0000:00/0000:00:05.0/nvme/nvme1")
	f.ngDevice("ng2n1", "virtual/nvme-subsystem/nvme-subsys2")
	// A namespace the block layer cannot drive: a generic device and no disk.
	f.ngDevice("ng3n1", "pci0000:00/0000:00:06.0/nvme/nvme3")
	for _, c := range []struct{ ng, name, dev string }{
		{"/dev/ng0n1", "nvme0n1", "259:0"},
		{"/dev/ng1n1", "nvme2n1", "259:8"},
		{"/dev/ng2n1", "nvme2n1", "259:8"},
		{"/dev/ng3n1", "", ""},
	} {
		name, dev, err := f.h.ngBlock(c.ng)
		if err != nil || name != c.name || dev != c.dev {
			t.Errorf("%s: got %q %q %v, want %q %q", c.ng, name, dev, err, c.name, c.dev)
		}
	}
	if _, _, err := f.h.ngBlock("/dev/ng9n1"); err == nil || !strings.Contains(err.Error(), "nvme-generic") {
		t.Errorf("unknown ng device: %v", err)
	}
}

// TestGateNGChecksItsBlockDevice: a namespace mounted through /dev/nvme0n1 cannot be
// formatted through /dev/ng0n1, and the signatures of the namespace are found through it.
func TestGateNGChecksItsBlockDevice(t *testing.T) {
	f := newFakeHost(t)
	ext4 := make([]byte, 1<<20)
	binary.LittleEndian.PutUint16(ext4[1080:], 0xEF53)
	binary.LittleEndian.PutUint32(ext4[1024+96:], 0x40)
	copy(ext4[1024+120:], "data")
	f.disk("pci0000:00/0000:00:04.0/nvme/nvme0", "nvme0n1", "259:0", ext4)
	f.ngDevice("ng0n1", "pci0000:00/0000:00:04.0/nvme/nvme0")
	before, _ := os.ReadFile(filepath.Join(f.h.dev, "nvme0n1"))

	f.write("proc/self/mountinfo", "22 1 253:0 / / rw - ext4 /dev/vda rw\n51 22 259:0 / /mnt/data rw - ext4 /dev/nvme0n1 rw\n")
	err := f.h.gate(Format, "/dev/ng0n1", true)
	want := "refusing to format /dev/ng0n1: its namespace's block device " + filepath.Join(f.h.dev, "nvme0n1") + " is mounted at /mnt/data; unmount it first"
	if !errors.Is(err, ErrInUse) || err.Error() != want {
		t.Fatalf("mounted through its block device:\ngot  %v\nwant %s", err, want)
	}

	f.write("proc/self/mountinfo", "22 1 253:0 / / rw - ext4 /dev/vda rw\n")
	err = f.h.gate(Format, "/dev/ng0n1", true)
	if !errors.Is(err, ErrHasData) || !strings.Contains(err.Error(), `refusing to format /dev/ng0n1: it holds an ext4 filesystem (label "data")`) {
		t.Fatalf("unmounted, holding ext4: %v", err)
	}

	os.MkdirAll(filepath.Join(f.root, "sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1/holders/dm-0"), 0o755)
	if err := f.h.gate(Bench, "/dev/ng0n1", true); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "held by dm-0") {
		t.Fatalf("held by device-mapper: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(f.h.dev, "nvme0n1")); !bytes.Equal(before, after) {
		t.Fatal("the gate changed the namespace")
	}
}

// TestGateLoopBackingFile: a file attached to a loop device (and mounted through it) is in use.
func TestGateLoopBackingFile(t *testing.T) {
	f := newFakeHost(t)
	img := image(t, 1<<20, func([]byte) {})
	f.write("sys/block/loop3/loop/backing_file", img+"\n")
	f.write("sys/block/loop3/dev", "7:3\n")
	if err := f.h.gate(Format, img, true); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "it backs "+filepath.Join(f.h.dev, "loop3")) {
		t.Fatalf("loop backing file: %v", err)
	}
	f.write("proc/self/mountinfo", "36 22 7:3 / /mnt/img rw - ext4 /dev/loop3 rw\n")
	if err := f.h.gate(Format, img, true); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "(mounted at /mnt/img)") {
		t.Fatalf("mounted through a loop device: %v", err)
	}
	other := image(t, 1<<20, func([]byte) {})
	if err := f.h.gate(Format, other, true); err != nil {
		t.Fatalf("a file no loop device uses: %v", err)
	}
}

// FuzzDetect: Detect reads bytes from devices and files anyone may have written.
func FuzzDetect(f *testing.F) {
	f.Add([]byte("LMCIDX01"), int64(8))
	sb := make([]byte, 2048)
	binary.LittleEndian.PutUint16(sb[1080:], 0xEF53)
	f.Add(sb, int64(1<<30))
	f.Add([]byte("LUKS\xba\xbe\x00\x02"), int64(100))
	f.Fuzz(func(t *testing.T, b []byte, size int64) {
		if size < 0 || size > 1<<40 {
			return
		}
		sigs, err := Detect(bytes.NewReader(b), size)
		if err != nil {
			return
		}
		for _, s := range sigs {
			if d := s.Describe(); d == "" || len(s.Label) > 4*64 {
				t.Fatalf("signature %+v", s)
			}
		}
		at, err := firstData(bytes.NewReader(b), size)
		if err != nil {
			return
		}
		if at >= size || at >= int64(len(b)) || (at >= 0 && b[at] == 0) {
			t.Fatalf("firstData = %d of %d bytes (size %d)", at, len(b), size)
		}
		if at < 0 && size <= fullScan && bytes.ContainsFunc(b[:min(int64(len(b)), size)], func(r rune) bool { return r != 0 }) {
			t.Fatalf("firstData found nothing in %q", b)
		}
	})
}

// TestGateRealLoopBackingFile attaches an image to a real loop device when root can.
func TestGateRealLoopBackingFile(t *testing.T) {
	img := image(t, 8<<20, func([]byte) {})
	loop := looptest.Attach(t, img, looptest.Options{})
	if err := Gate(Format, img); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "it backs "+loop) {
		t.Fatalf("file backing %s: %v", loop, err)
	}
}

// TestGateFindsDataInASparseFile: a few bytes written anywhere in a large sparse file are
// found through its data extents, though no evenly spread probe lands on them; a file of
// written zeros and a sparse file with nothing written pass.
func TestGateFindsDataInASparseFile(t *testing.T) {
	dir := t.TempDir()
	mk := func(name string, write func(f *os.File) error) string {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(8 << 30); err != nil {
			t.Fatal(err)
		}
		if err := write(f); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const at = 5<<30 + 12345
	data := mk("data", func(f *os.File) error { _, err := f.WriteAt([]byte("x"), at); return err })
	if err := Gate(Bench, data); !errors.Is(err, ErrHasData) || !strings.Contains(err.Error(), fmt.Sprintf("a non-zero byte at byte %d", at)) {
		t.Errorf("one byte at %d of a sparse file: %v", int64(at), err)
	}
	if err := Gate(Recover, data); err != nil {
		t.Errorf("recover looks for a cache, not for data: %v", err)
	}
	if err := GateInUse(Format, data); err != nil {
		t.Errorf("the in-use half (under --force): %v", err)
	}
	sparse := mk("sparse", func(*os.File) error { return nil })
	if err := Gate(Format, sparse); err != nil {
		t.Errorf("a sparse file with nothing written: %v", err)
	}
	zeros := mk("zeros", func(f *os.File) error { _, err := f.WriteAt(make([]byte, 1<<20), 3<<30); return err })
	if err := Gate(Format, zeros); err != nil {
		t.Errorf("written zeros: %v", err)
	}
}
