package enginetest

import (
	"path/filepath"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/internal/looptest"
)

func TestSuiteOnMem(t *testing.T) {
	RunEngineSuite(t, func(t *testing.T) blockdev.Device { return blockdev.NewMem(MinDeviceBytes, 0) })
}

func TestSuiteOnDirectMem(t *testing.T) {
	RunEngineSuite(t, func(t *testing.T) blockdev.Device { return blockdev.NewMem(MinDeviceBytes, 4096) })
}

func fileDev(t *testing.T, direct bool) blockdev.Device {
	p := filepath.Join(t.TempDir(), "dev.img")
	if err := blockdev.CreateFile(p, MinDeviceBytes); err != nil {
		t.Fatal(err)
	}
	d, err := blockdev.OpenFile(p, blockdev.FileOptions{Direct: direct, QueueDepth: 8})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestSuiteOnFile(t *testing.T) {
	RunEngineSuite(t, func(t *testing.T) blockdev.Device { return fileDev(t, false) })
}

func TestSuiteOnFileDirect(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: the direct-file run repeats TestSuiteOnFile with O_DIRECT")
	}
	RunEngineSuite(t, func(t *testing.T) blockdev.Device { return fileDev(t, true) })
}

// TestSuiteOnLoopDeviceDirect runs the whole suite on a real loop device opened with
// O_DIRECT and O_EXCL (root only; CI is root).
func TestSuiteOnLoopDeviceDirect(t *testing.T) {
	RunEngineSuite(t, func(t *testing.T) blockdev.Device {
		loop := looptest.New(t, MinDeviceBytes, looptest.Options{})
		d, err := blockdev.OpenFile(loop, blockdev.DefaultFileOptions())
		if err != nil {
			t.Fatal(err)
		}
		if info := d.Info(); info.Kind != blockdev.KindBlock || !info.Direct {
			t.Fatalf("loop device info = %+v", info)
		}
		return d
	})
}
