package flagsets

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/engine"
)

// Device is the device-opening flags every engine command takes.
type Device struct {
	IOPath     string
	Direct     bool
	QueueDepth int
	Choices    OpenChoices // --key-namespace and recovery choices (cache.go)
	// AutoFile, set before Add, is the engine --io-engine auto (the default) opens a regular
	// file with (devices.Options.AutoFile): "" for io_uring, devices.PathAio for serve.
	AutoFile string
	cmd      *cobra.Command // to tell defaults from choices
}

// Add defines --io-engine, --direct and --queue-depth on cmd.
func (f *Device) Add(cmd *cobra.Command) {
	f.cmd = cmd
	def, auto := "uring", "auto (uring), "
	if f.AutoFile == devices.PathAio {
		def, auto = "auto", "auto (aio for a regular file, uring for a block device: docs/resp.md), "
	}
	cmd.Flags().StringVar(&f.IOPath, "io-engine", def, "I/O engine: "+auto+"uring (posix where the kernel has no io_uring), posix, aio (Linux native AIO: fewest thread hand-offs per read, no write streams) or passthru (NVMe /dev/ngXnY); emu:... paths open the emulated FDP SSD")
	cmd.Flags().BoolVar(&f.Direct, "direct", true, "open with O_DIRECT (aligned I/O, bypasses the page cache; by default a filesystem that refuses it gets buffered I/O)")
	cmd.Flags().IntVar(&f.QueueDepth, "queue-depth", 32, "operations in flight per batch")
}

// TransportFlag defines --transport, the NVMe passthrough transport of the admin commands
// (devices.AdminOptions), refused when it is parsed if it names none: whatever DEV is.
func TransportFlag(fs *pflag.FlagSet, dst *string) {
	fs.Var(Parsed(dst, "", devices.ParseTransport), "transport", "passthrough transport: uring or ioctl (default: uring when available)")
}

// Options are the devices.Options the flags choose. Left at their defaults (or given as
// auto), --io-engine opens a regular file as AutoFile says and falls back to posix without
// io_uring; --direct left at its default falls back to buffered I/O on a filesystem that
// refuses O_DIRECT.
func (f *Device) Options(readOnly bool) (devices.Options, error) {
	if f.QueueDepth < 1 {
		return devices.Options{}, fmt.Errorf("--queue-depth %d: must be at least 1", f.QueueDepth)
	}
	switch f.IOPath {
	case devices.PathUring, "io_uring", devices.PathPosix, devices.PathAio, devices.PathPassthru, "nvme":
	case "auto": // the command's default, spelled out
	default: // refused before anything starts (serve would otherwise log its start first)
		return devices.Options{}, fmt.Errorf("--io-engine %q: want auto, uring, posix, aio or passthru", f.IOPath)
	}
	chosen := func(name string) bool { return f.cmd != nil && f.cmd.Flags().Changed(name) }
	opt := devices.Options{IOPath: f.IOPath, Direct: f.Direct, QueueDepth: f.QueueDepth,
		ReadOnly: readOnly, Exclusive: !readOnly, BufferedFallback: !chosen("direct"), AutoFile: f.AutoFile}
	if !chosen("io-engine") || f.IOPath == "auto" {
		opt.IOPath = devices.PathAuto
	}
	return opt, nil
}

// Open opens path through devices with the flags' Options.
func (f *Device) Open(path string, readOnly bool) (blockdev.Device, error) {
	opt, err := f.Options(readOnly)
	if err != nil {
		return nil, err
	}
	return devices.Open(path, opt)
}

// OpenEngine opens the cache on path through cache.Open, its options filled from the
// flags: the device flags, --key-namespace and recover's choices (f.Cache), and pf's policy
// (nil pf or "none": no directives); tweak adjusts the detected config.
func (f *Device) OpenEngine(pf *Placement, path string, readOnly bool, tweak func(*engine.Config)) (*engine.Engine, error) {
	o, err := f.OpenOptions(pf, readOnly)
	if err != nil {
		return nil, err
	}
	if tweak != nil {
		o.Tweak = func(_ blockdev.Device, c *engine.Config) { tweak(c) }
	}
	return cache.Open(path, o)
}

// OpenOptions are the cache.OpenOptions the flags choose: the device flags, --key-namespace
// and recover's choices (f.Cache), and pf's policy (nil pf or "none": no directives).
func (f *Device) OpenOptions(pf *Placement, readOnly bool) (cache.OpenOptions, error) {
	o, err := f.Choices.options(readOnly)
	if err == nil {
		o.Device, err = f.Options(readOnly)
	}
	if err == nil && !pf.None() {
		o.Placement, err = pf.Spec, pf.Check()
	}
	return o, err
}
