package flagsets

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/workloads"
)

// Device is the device-opening flags every engine command takes.
type Device struct {
	IOEngine   string
	Direct     bool
	QueueDepth int
	Cache      Cache          // --namespace and recovery choices (cache.go)
	cmd        *cobra.Command // to tell defaults from choices
}

// Add defines --io-engine, --direct and --queue-depth on cmd.
func (f *Device) Add(cmd *cobra.Command) {
	f.cmd = cmd
	cmd.Flags().StringVar(&f.IOEngine, "io-engine", "uring", "I/O engine: uring (posix where the kernel has no io_uring), posix or passthru (NVMe /dev/ngXnY); emu:... paths open the emulated FDP SSD")
	cmd.Flags().BoolVar(&f.Direct, "direct", true, "open with O_DIRECT (aligned I/O, bypasses the page cache; by default a filesystem that refuses it gets buffered I/O)")
	cmd.Flags().IntVar(&f.QueueDepth, "queue-depth", 32, "operations in flight per batch")
}

// Open opens path through devices. Left at their defaults, --io-engine falls back to posix
// without io_uring and --direct to buffered I/O on a filesystem that refuses O_DIRECT.
func (f *Device) Open(path string, readOnly bool) (blockdev.Device, error) {
	if f.QueueDepth < 1 {
		return nil, fmt.Errorf("--queue-depth %d: must be at least 1", f.QueueDepth)
	}
	chosen := func(name string) bool { return f.cmd != nil && f.cmd.Flags().Changed(name) }
	opt := devices.Options{IOEngine: f.IOEngine, Direct: f.Direct, QueueDepth: f.QueueDepth,
		ReadOnly: readOnly, Exclusive: !readOnly, BufferedFallback: !chosen("direct")}
	if !chosen("io-engine") {
		opt.IOEngine = devices.EngineAuto
	}
	return devices.Open(path, opt)
}

// OpenEngine opens the cache on path with its layout detected from the checkpoint and its
// writes placed by pf's policy (nil pf or "none": no directives), built for the device's
// handles. After recovery the policy's salt → handle assignment is seeded from the handles
// the cache's entries were written with, so cache-salt keeps each salt on its handle from
// one command to the next.
func (f *Device) OpenEngine(pf *Placement, path string, readOnly bool, tweak func(*engine.Config)) (*engine.Engine, error) {
	dev, err := f.Open(path, readOnly)
	if err != nil {
		return nil, err
	}
	cfg, layoutSource, err := f.Cache.Detect(dev, readOnly)
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	cfg.ReadOnly = readOnly
	cfg.Periodic = false
	cfg.QueueDepth = max(f.QueueDepth, 1)
	pol, err := pf.Policy(dev.Info())
	if err != nil {
		if why := noHandlesWhy(dev); why != nil {
			err = fmt.Errorf("%w; %w", err, why)
		}
		dev.Close()
		return nil, err
	}
	if pol != nil {
		// MetadataHandle stays NoPlacement: the engine asks the policy at each checkpoint,
		// after the seeding below.
		cfg.Placer = pol
	}
	if tweak != nil {
		tweak(&cfg)
	}
	e, err := f.Cache.Open(dev, cfg, layoutSource)
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if pol != nil {
		workloads.SeedPolicy(pol, e)
	}
	return e, nil
}

// noHandlesWhy says why a block device opened through io_uring has no placement handles
// when the reason is its kernel write streams (e.g. Linux older than 6.16), or nil.
func noHandlesWhy(dev blockdev.Device) error {
	ws, ok := dev.(interface {
		WriteStreams() (blockdev.WriteStreams, error)
	})
	if !ok || dev.Info().Handles > 0 {
		return nil
	}
	if _, err := ws.WriteStreams(); errors.Is(err, blockdev.ErrWriteStreamsKernel) {
		return err
	}
	return nil
}
