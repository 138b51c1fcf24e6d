package blockdev_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rbctl/rbctl/engine/enginetest"
	"github.com/rbctl/rbctl/internal/blockdev"
	"github.com/rbctl/rbctl/internal/uring"
)

// TestEngineSuiteOnUring runs the engine's behaviour suite on the io_uring backend
// (O_DIRECT file, two rings, registered buffers when the engine registers its pool).
func TestEngineSuiteOnUring(t *testing.T) {
	enginetest.RunEngineSuite(t, func(t *testing.T) blockdev.Device {
		p := filepath.Join(t.TempDir(), "engine-uring.img")
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, enginetest.MinDeviceBytes); err != nil {
			t.Fatal(err)
		}
		d, err := blockdev.OpenUring(p, blockdev.UringOptions{QueueDepth: 16, Rings: 2})
		if errors.Is(err, uring.ErrNotSupported) {
			t.Skipf("kernel lacks io_uring: %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
}
