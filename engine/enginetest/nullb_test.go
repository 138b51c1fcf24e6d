package enginetest

import (
	"os"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
)

// window exposes only the first size bytes of a larger device, so the suite's slot-count
// expectations hold on a 1 GiB null_blk device.
type window struct {
	blockdev.Device
	size int64
}

// VectoredWrites passes the device's vectored writes on (zero-copy puts reach null_blk).
func (w window) VectoredWrites() bool { return blockdev.WritesTail(w.Device) }

func (w window) Info() blockdev.Info {
	info := w.Device.Info()
	info.Size = w.size
	return info
}

// TestEngineSuiteNullb runs the whole engine suite on a real kernel block device, null_blk
// (memory_backed=1 discard=1), with O_DIRECT: inside the QEMU VM test (RBCTL_TEST_NULLB).
// Each subtest starts from a discarded (hence zeroed) window of MinDeviceBytes.
func TestEngineSuiteNullb(t *testing.T) {
	path := os.Getenv("RBCTL_TEST_NULLB")
	if path == "" {
		t.Skip("RBCTL_TEST_NULLB not set (runs inside the QEMU VM test, make vmtest)")
	}
	RunEngineSuite(t, func(t *testing.T) blockdev.Device {
		d, err := blockdev.OpenFile(path, blockdev.DefaultFileOptions())
		if err != nil {
			t.Fatalf("open %s: %v", path, err)
		}
		info := d.Info()
		if info.Kind != blockdev.KindBlock || !info.Direct {
			t.Fatalf("%s: Info = %+v, want an O_DIRECT block device", path, info)
		}
		if info.Size < MinDeviceBytes {
			t.Fatalf("%s: %d bytes, need %d", path, info.Size, MinDeviceBytes)
		}
		if err := d.Deallocate([]blockdev.Range{{Off: 0, Len: MinDeviceBytes}}); err != nil {
			t.Fatalf("discard the test window of %s: %v", path, err)
		}
		return window{Device: d, size: MinDeviceBytes}
	})
}
