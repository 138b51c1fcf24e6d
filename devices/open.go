// Package devices opens any device path the CLI is given as a blockdev.Device: regular
// files and block devices (posix or io_uring), NVMe namespaces (passthrough) and the
// emulated FDP SSD. Whatever the spelling, a device opened for writing has one writer by
// construction: files and emu data files are locked (blockdev.LockFD), block devices are
// opened O_EXCL, and /dev/ngXnY claims its namespace's block device O_EXCL. Open never
// creates anything (format and bench create their targets first).
package devices

import (
	"fmt"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/nvme"
)

// Options chooses how a device path is opened.
type Options struct {
	IOEngine   string // "posix" (default), "uring", "passthru"
	Direct     bool   // O_DIRECT (posix, uring)
	QueueDepth int    // ops in flight per Submit (0: backend default)
	ReadOnly   bool   // open read-only, sharing the device with other readers (inspect, recover --dry-run)
	Exclusive  bool   // O_EXCL on block devices (and on the block device of /dev/ngXnY)
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
		// The emulated FDP SSD, through the NVMe passthrough device (docs/emulator.md). It
		// must exist: a missing data file is fs.ErrNotExist, and nothing is created.
		c, err := emu.OpenWith(path, emu.OpenOptions{ReadOnly: opt.ReadOnly})
		if err != nil {
			return nil, err
		}
		d, _, err := emu.NewDevice(c, path, nvme.DeviceOptions{ReadOnly: opt.ReadOnly})
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
