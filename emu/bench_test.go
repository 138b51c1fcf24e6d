package emu

import (
	"path/filepath"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/nvme"
	"github.com/rbctl/rbctl/placement"
)

// benchWrites measures 256 KiB writes through the whole host stack (nvme.Device → command
// encoding → controller → FTL model → store), cycling over the device and two handles.
func benchWrites(b *testing.B, spec string) {
	dev, _, err := openDevice(spec, nvme.DeviceOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer dev.Close()
	buf, _ := blockdev.Alloc(256 << 10)
	defer blockdev.Free(buf)
	slots := dev.Info().Size / int64(len(buf))
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := int64(i*7919) % slots
		if err := blockdev.WriteAt(dev, buf, s*int64(len(buf)), placement.Handle(i&1)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWriteMem(b *testing.B) { benchWrites(b, "emu:mem?size=256M&ru=4M&ruhs=2&op=0.2") }

func BenchmarkWriteFile(b *testing.B) {
	benchWrites(b, "emu:"+filepath.Join(b.TempDir(), "b.img")+"?size=256M&ru=4M&ruhs=2&op=0.2")
}
