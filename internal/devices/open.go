// Package devices opens any device path the CLI is given as a blockdev.Device: regular
// files and block devices through the posix backend today; other engines (io_uring, NVMe
// passthrough, the emulated FDP SSD) add a case to Open.
package devices

import (
	"fmt"

	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/internal/blockdev"
	"github.com/rbctl/rbctl/nvme"
)

// Options chooses how a device path is opened.
type Options struct {
	IOEngine   string // "posix" (default), "uring", "passthru"
	Direct     bool   // O_DIRECT (posix, uring)
	QueueDepth int    // ops in flight per Submit (0: backend default)
	ReadOnly   bool   // open read-only (inspect, recover --dry-run)
	Exclusive  bool   // O_EXCL on block devices
}

// DefaultOptions: posix, O_DIRECT, exclusive, queue depth 32.
func DefaultOptions() Options {
	return Options{IOEngine: "posix", Direct: true, QueueDepth: 32, Exclusive: true}
}

// Open opens path with opt.
func Open(path string, opt Options) (blockdev.Device, error) {
	if path == "" {
		return nil, fmt.Errorf("no device path given")
	}
	if emu.IsSpec(path) {
		// The emulated FDP SSD, through the NVMe passthrough device (docs/emulator.md).
		d, _, err := emu.OpenDeviceWith(path, nvme.DeviceOptions{ReadOnly: opt.ReadOnly})
		if err != nil {
			return nil, err
		}
		return d, nil
	}
	if isNVMeGeneric(path) && opt.IOEngine != "passthru" && opt.IOEngine != "nvme" {
		opt.IOEngine = "passthru" // /dev/ngXnY is reachable only through NVMe passthrough
	}
	switch opt.IOEngine {
	case "passthru", "nvme":
		return openPassthru(path, opt)
	case "uring", "io_uring":
		return blockdev.OpenUring(path, blockdev.UringOptions{
			QueueDepth: opt.QueueDepth,
			Buffered:   !opt.Direct,
			ReadOnly:   opt.ReadOnly,
			Exclusive:  opt.Exclusive,
		})
	case "", "posix":
		return blockdev.OpenFile(path, blockdev.FileOptions{
			Direct:     opt.Direct,
			ReadOnly:   opt.ReadOnly,
			Exclusive:  opt.Exclusive,
			QueueDepth: opt.QueueDepth,
		})
	}
	return nil, fmt.Errorf("io engine %q is not available for %s; use posix", opt.IOEngine, path)
}
