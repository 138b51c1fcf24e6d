package devices

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/nvme"
	"github.com/rbctl/rbctl/units"
)

// I/O paths for Options.IOPath: how bytes reach the device (the CLI's --io-engine, fio's
// word for it). "Engine" in rbctl is the cache engine (package engine) alone.
const (
	PathAuto     = ""         // io_uring, or posix where the kernel gives no io_uring
	PathUring    = "uring"    // io_uring only
	PathPosix    = "posix"    // pread/pwrite workers
	PathAio      = "aio"      // Linux native AIO, completions reaped in the netpoller
	PathPassthru = "passthru" // NVMe passthrough (always used for /dev/ngXnY and emu:)
)

// MemPrefix starts a memory device spelling: mem:SIZE (e.g. mem:256M).
const MemPrefix = "mem:"

// Options chooses how a device path is opened.
type Options struct {
	IOPath     string // PathAuto (""), PathUring, PathPosix, PathAio, PathPassthru
	Direct     bool   // O_DIRECT (posix, uring, aio)
	QueueDepth int    // ops in flight per Submit (0: backend default)
	ReadOnly   bool   // open read-only, sharing the device with other readers
	Exclusive  bool   // O_EXCL on block devices (and on the block device of /dev/ngXnY)
	// BufferedFallback opens a regular file buffered when its filesystem refuses O_DIRECT
	// (tmpfs before Linux 6.6) instead of failing; Opened.Notes says so.
	BufferedFallback bool
	// AutoFile is the engine PathAuto opens a regular file with: PathAio (what rbctl serve
	// asks for: its GETs and SETs ran faster through native AIO than through io_uring,
	// docs/resp.md) or "" for io_uring. A block device keeps io_uring (write streams for
	// FDP placement). Where native AIO cannot be set up (a kernel without it, fs.aio-max-nr
	// reached, a policy forbidding it) the file opens as PathAuto would; Notes says so.
	AutoFile string
}

// DefaultOptions: io_uring (posix without it), O_DIRECT, exclusive, queue depth 32.
func DefaultOptions() Options {
	return Options{IOPath: PathAuto, Direct: true, QueueDepth: 32, Exclusive: true}
}

// Opened is a device opened for I/O: the block device, what it offers for placement, and
// the FDP view when it has FDP. Close closes everything.
type Opened struct {
	Path   string
	Block  blockdev.Device
	IOPath string // the I/O path in use: posix, uring, aio, passthru, emu or mem
	// FDP is the device's FDP view; nil when it has none, and NoFDP says why (an error
	// wrapping fdp.ErrFDPNotSupported, "FDP is disabled", or "no NVMe transport").
	FDP   *FDP
	NoFDP error
	// Emu is the emulated SSD's controller (emu: only): its spec, FTL model and Reset.
	Emu *emu.Controller
	// Notes are decisions the opener took that the caller may want to report (fallbacks).
	Notes []string
}

// Close closes the device (and its transport, claims and controller).
func (o *Opened) Close() error { return o.Block.Close() }

// Info is the block device's Info.
func (o *Opened) Info() blockdev.Info { return o.Block.Info() }

// Open opens path with opt and returns only the block device (see OpenDevice).
func Open(path string, opt Options) (blockdev.Device, error) {
	o, err := OpenDevice(path, opt)
	if err != nil {
		return nil, err
	}
	return o.Block, nil
}

// OpenDevice opens any DEV spelling (package doc) for I/O, runs FDP discovery once when
// the device speaks NVMe, and returns the device with its FDP view.
func OpenDevice(path string, opt Options) (*Opened, error) {
	switch {
	case path == "":
		return nil, errors.New("no device path given")
	case strings.HasPrefix(path, MemPrefix):
		return openMem(path)
	case emu.IsSpec(path):
		return openEmu(path, opt)
	case isNVMeGeneric(path) || opt.IOPath == PathPassthru || opt.IOPath == "nvme":
		// /dev/ngXnY is reachable only through NVMe passthrough.
		return openPassthru(path, opt)
	}
	if opt.IOPath == "auto" { // the CLI's spelling of the default
		opt.IOPath = PathAuto
	}
	switch opt.IOPath {
	case PathAuto, PathUring, "io_uring":
		if opt.IOPath == PathAuto && opt.AutoFile == PathAio && isRegular(path) {
			return openAutoAio(path, opt)
		}
		return openUring(path, opt)
	case PathPosix, PathAio:
		return openFile(path, opt)
	}
	return nil, fmt.Errorf("io engine %q is not one of auto, uring, posix, aio, passthru", opt.IOPath)
}

// openMem makes a memory device of SIZE (rounded down to 4 KiB blocks).
func openMem(path string) (*Opened, error) {
	n, err := units.ParseSize(strings.TrimPrefix(path, MemPrefix))
	if err != nil || n < 4096 {
		return nil, fmt.Errorf("%s: want mem:SIZE of at least 4 KiB, e.g. mem:256M", path)
	}
	// A memory device is one allocation: past the machine's RAM the Go runtime would end the
	// process with "fatal error: out of memory" and no word of which flag did it.
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		if ram := int64(si.Totalram) * int64(si.Unit); ram > 0 && n > ram {
			return nil, fmt.Errorf("%s: %s is more than this machine's memory (%s); give a smaller mem:SIZE, or a file for a larger device",
				path, units.FormatSize(n), units.FormatSize(ram))
		}
	}
	return &Opened{Path: path, Block: blockdev.NewMem(n/4096*4096, 4096), IOPath: "mem",
		NoFDP: fmt.Errorf("%s: a memory device has no NVMe transport: %w", path, fdp.ErrFDPNotSupported)}, nil
}

// openEmu opens the emulated FDP SSD through the NVMe passthrough device. It must exist: a
// missing data file is fs.ErrNotExist, and nothing is created.
func openEmu(path string, opt Options) (*Opened, error) {
	c, err := emu.OpenWith(path, emu.OpenOptions{ReadOnly: opt.ReadOnly})
	if err != nil {
		return nil, err
	}
	o, err := overTransport(c, path, blockdev.KindEmulated, opt, nil)
	if err != nil {
		return nil, err
	}
	o.IOPath, o.Emu = "emu", c
	return o, nil
}

// overTransport puts the passthrough block device over t after FDP discovery (once). On
// failure t is closed, and release is called.
func overTransport(t nvme.Transport, path string, kind blockdev.Kind, opt Options, release func()) (*Opened, error) {
	fail := func(err error) (*Opened, error) {
		t.Close()
		if release != nil {
			release()
		}
		return nil, err
	}
	o := &Opened{Path: path, IOPath: PathPassthru}
	disc, err := fdp.Discover(t)
	var pids []uint16
	switch {
	case err == nil && !disc.Feature.Enabled:
		o.NoFDP = fmt.Errorf("%s: FDP is disabled in endurance group %d: %w", path, disc.EnduranceGroup, nvme.ErrFDPDisabled)
	case err == nil:
		o.FDP, pids = &FDP{t: t, disc: disc}, disc.PIDs
	case errors.Is(err, fdp.ErrFDPNotSupported):
		o.NoFDP = fmt.Errorf("%s: %w", path, err)
	default:
		return fail(fmt.Errorf("%s: FDP discovery: %w", path, err))
	}
	d, err := nvme.NewDevice(t, nvme.DeviceOptions{Path: path, Kind: kind, PIDs: pids, ReadOnly: opt.ReadOnly})
	if err != nil {
		return fail(fmt.Errorf("%s: %w", path, err))
	}
	o.Block = d
	return o, nil
}

// openUring opens a file or block device through io_uring; with PathAuto a kernel
// without io_uring (or one that forbids it) gets the posix engine instead.
func openUring(path string, opt Options) (*Opened, error) {
	uopt := blockdev.UringOptions{QueueDepth: opt.QueueDepth, Buffered: !opt.Direct, ReadOnly: opt.ReadOnly, Exclusive: opt.Exclusive}
	d, err := blockdev.OpenUring(path, uopt)
	if err != nil && opt.Direct && opt.BufferedFallback && directRefused(path, err) {
		uopt.Buffered = true
		if d, err = blockdev.OpenUring(path, uopt); err == nil {
			o := blockOpened(path, d, "uring")
			o.Notes = append(o.Notes, "the filesystem refuses O_DIRECT: opened buffered")
			return o, nil
		}
	}
	if err != nil && opt.IOPath == PathAuto && uringUnavailable(err) {
		opt.IOPath = PathPosix
		o, ferr := openFile(path, opt)
		if ferr != nil {
			return nil, ferr
		}
		o.Notes = append(o.Notes, "io_uring is not available here: opened with the posix engine")
		return o, nil
	}
	if err != nil {
		return nil, err
	}
	return blockOpened(path, d, "uring"), nil
}

// openAutoAio opens a regular file with native AIO for PathAuto (Options.AutoFile), or as
// PathAuto opens it when native AIO cannot be set up here.
func openAutoAio(path string, opt Options) (*Opened, error) {
	a := opt
	a.IOPath = PathAio
	o, err := openFile(path, a)
	if err == nil {
		return o, nil
	}
	if !aioUnavailable(err) {
		return nil, err
	}
	o, uerr := openUring(path, opt)
	if uerr != nil {
		return nil, uerr
	}
	o.Notes = append(o.Notes, fmt.Sprintf("native AIO is not available here (%v): opened with the %s engine", err, o.IOPath))
	return o, nil
}

// openAio opens a device with native AIO (a variable: tests make it fail as a kernel
// without AIO would).
var openAio = func(path string, fopt blockdev.FileOptions) (blockdev.Device, error) {
	return blockdev.OpenAio(path, fopt)
}

// aioUnavailable reports whether err says native AIO cannot be set up here
// (blockdev.ErrAioUnavailable: io_setup failed); any other failure, of opening the file
// itself (busy, missing, not permitted), would fail every engine the same way.
func aioUnavailable(err error) bool { return errors.Is(err, blockdev.ErrAioUnavailable) }

// isRegular reports whether path names a regular file (after symlinks).
func isRegular(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// EngineOf names the I/O engine d was opened with, in Opened.IOPath's words: uring, aio,
// posix, passthru (an emulated SSD's too) or mem; "" for a device of another kind (a
// wrapper, say).
func EngineOf(d blockdev.Device) string {
	switch d.(type) {
	case *blockdev.UringDevice:
		return PathUring
	case *blockdev.AioDevice:
		return PathAio
	case *blockdev.File:
		return PathPosix
	case *blockdev.Mem:
		return "mem"
	case *nvme.Device:
		return PathPassthru
	}
	return ""
}

// uringUnavailable reports whether err says io_uring cannot be used here: a kernel without
// it, or one (or a seccomp policy) that forbids it. An EPERM from opening the file itself
// comes back from the posix engine too, so falling back on it hides nothing.
func uringUnavailable(err error) bool {
	return errors.Is(err, blockdev.ErrNotSupported) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSYS)
}

// openFile opens a file or block device with the posix engine, or native AIO (opt.IOPath).
func openFile(path string, opt Options) (*Opened, error) {
	open := func(fopt blockdev.FileOptions) (blockdev.Device, error) { return blockdev.OpenFile(path, fopt) }
	if opt.IOPath == PathAio {
		open = func(fopt blockdev.FileOptions) (blockdev.Device, error) { return openAio(path, fopt) }
	}
	fopt := blockdev.FileOptions{Direct: opt.Direct, ReadOnly: opt.ReadOnly, Exclusive: opt.Exclusive, QueueDepth: opt.QueueDepth}
	d, err := open(fopt)
	if err != nil && opt.Direct && opt.BufferedFallback && directRefused(path, err) {
		fopt.Direct = false
		if d, err = open(fopt); err == nil {
			o := blockOpened(path, d, opt.IOPath)
			o.Notes = append(o.Notes, "the filesystem refuses O_DIRECT: opened buffered")
			return o, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return blockOpened(path, d, opt.IOPath), nil
}

// directRefused reports whether err is a regular file's filesystem refusing O_DIRECT.
func directRefused(path string, err error) bool {
	st, serr := os.Stat(path)
	return serr == nil && st.Mode().IsRegular() && errors.Is(err, unix.EINVAL)
}

func blockOpened(path string, d blockdev.Device, engine string) *Opened {
	return &Opened{Path: path, Block: d, IOPath: engine,
		NoFDP: fmt.Errorf("%s: no NVMe transport through %s (FDP is read through /dev/ngXnY): %w", path, engine, fdp.ErrFDPNotSupported)}
}
