// Package devices opens any device path the CLI is given as a blockdev.Device: regular
// files and block devices through the posix backend today; other engines (io_uring, NVMe
// passthrough, the emulated FDP SSD) add a case to Open.
package devices

import (
	"fmt"

	"github.com/rbctl/rbctl/internal/blockdev"
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
	switch opt.IOEngine {
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
