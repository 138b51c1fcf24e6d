package safety

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func image(t *testing.T, size int64, patch func(b []byte)) string {
	t.Helper()
	b := make([]byte, size)
	patch(b)
	p := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckFormatTargetSignatures(t *testing.T) {
	const size = 1 << 20
	for _, c := range []struct {
		name  string
		patch func(b []byte)
		want  string // "" = allowed
	}{
		{"zeroed image is allowed", func(b []byte) {}, ""},
		{"random data is allowed", func(b []byte) {
			for i := range b {
				b[i] = byte(i*31 + 7)
			}
			b[510], b[511] = 0, 0
			binary.LittleEndian.PutUint16(b[1080:], 0)
		}, ""},
		{"ext4 is refused", func(b []byte) {
			binary.LittleEndian.PutUint16(b[1080:], 0xEF53)
			binary.LittleEndian.PutUint32(b[1024+96:], 0x40)
		}, "ext4"},
		{"ext3 is refused", func(b []byte) {
			binary.LittleEndian.PutUint16(b[1080:], 0xEF53)
			binary.LittleEndian.PutUint32(b[1024+92:], 0x4)
		}, "ext3"},
		{"ext2 is refused", func(b []byte) { binary.LittleEndian.PutUint16(b[1080:], 0xEF53) }, "ext2"},
		{"xfs is refused", func(b []byte) { copy(b, "XFSB") }, "xfs"},
		{"btrfs is refused", func(b []byte) { copy(b[65600:], "_BHRfS_M") }, "btrfs"},
		{"swap is refused", func(b []byte) { copy(b[4086:], "SWAPSPACE2") }, "swap"},
		{"LVM2 is refused", func(b []byte) { copy(b[512:], "LABELONE"); copy(b[512+24:], "LVM2 001") }, "LVM2"},
		{"LUKS is refused", func(b []byte) { copy(b, "LUKS\xba\xbe") }, "LUKS"},
		{"GPT is refused", func(b []byte) { b[510], b[511] = 0x55, 0xAA; copy(b[512:], "EFI PART") }, "GPT"},
		{"MBR is refused", func(b []byte) { b[510], b[511] = 0x55, 0xAA }, "MBR"},
		{"md RAID 1.2 is refused", func(b []byte) { binary.LittleEndian.PutUint32(b[4096:], 0xa92b4efc) }, "md RAID"},
		{"md RAID 0.90 at the end is refused", func(b []byte) { binary.LittleEndian.PutUint32(b[size-64<<10:], 0xa92b4efc) }, "md RAID"},
		{"existing cache is refused", func(b []byte) { copy(b, "LMCIDX01") }, "raw-block cache"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckFormatTarget(image(t, size, c.patch))
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrHasData) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--force") {
				t.Fatalf("err = %v, want ErrHasData naming %q and --force", err, c.want)
			}
		})
	}
}

func TestCheckFormatTargetMissingAndEmpty(t *testing.T) {
	dir := t.TempDir()
	if err := CheckFormatTarget(filepath.Join(dir, "new")); err != nil {
		t.Fatalf("missing path: %v", err)
	}
	p := filepath.Join(dir, "empty")
	os.WriteFile(p, nil, 0o644)
	if err := CheckFormatTarget(p); err != nil {
		t.Fatalf("empty file: %v", err)
	}
}

func TestFindMount(t *testing.T) {
	info := `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
36 22 7:3 / /mnt/my\040cache rw - ext4 /dev/loop3 rw
`
	for _, c := range []struct {
		name string
		devs map[string]string
		want string
	}{
		{"unmounted device", map[string]string{"7:4": "/dev/loop4"}, ""},
		{"mounted device", map[string]string{"7:3": "/dev/loop3"}, "/mnt/my cache"},
		{"mounted partition of the disk", map[string]string{"8:0": "/dev/sda", "8:1": "/dev/sda1"}, "/"},
	} {
		m, ok := FindMount(strings.NewReader(info), c.devs)
		if (c.want != "") != ok || m.MountPoint != c.want {
			t.Errorf("%s: got %+v %v, want %q", c.name, m, ok, c.want)
		}
	}
}
