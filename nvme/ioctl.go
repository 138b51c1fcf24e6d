package nvme

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rbctl/rbctl/internal/sys"
)

// ErrNotNVMe: the path is not an NVMe controller or namespace device.
var ErrNotNVMe = errors.New("not an NVMe device")

// IoctlOptions configure the ioctl transport.
type IoctlOptions struct {
	// Workers is how many commands of one IO batch run at once, each in its own goroutine
	// blocked in NVME_IOCTL_IO_CMD (default 4).
	Workers int
	// NSID overrides the namespace (for a controller device; on a namespace device it must
	// match what NVME_IOCTL_ID reports).
	NSID uint32
}

// IoctlTransport runs commands with the synchronous passthrough ioctls: NVME_IOCTL_IO_CMD on
// the namespace device and NVME_IOCTL_ADMIN_CMD on the controller character device
// (/dev/nvmeX, found through sysfs; the namespace device when the controller cannot be
// opened, since the kernel routes admin ioctls from it to its controller).
type IoctlTransport struct {
	ns, ctrl *os.File // ns is nil when opened on a controller; ctrl nil when not found
	io, adm  *os.File // the files I/O and admin commands go to
	nsid     uint32
	workers  int
	maxXfer  int
	info     DeviceNodes
	mu       sync.RWMutex // held shared by commands, exclusively by Close
	closed   bool
}

// DeviceNodes are the paths a transport resolved.
type DeviceNodes struct {
	Namespace  string // namespace device (/dev/ngXnY or /dev/nvmeXnY), "" if opened on a controller
	Controller string // controller character device (/dev/nvmeX), "" if not found
	// AdminVia says where admin commands go and why, for diagnostics.
	AdminVia string
}

var ctrlName = regexp.MustCompile(`^nvme[0-9]+$`)

// sysfsNode resolves a device node to its sysfs directory and subsystem
// ("nvme" for a controller, "nvme-generic" for /dev/ngXnY, "block" for /dev/nvmeXnY).
func sysfsNode(fi os.FileInfo) (dir, subsystem string, err error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", "", fmt.Errorf("no device number")
	}
	kind := "char"
	if fi.Mode()&os.ModeCharDevice == 0 {
		kind = "block"
	}
	link := fmt.Sprintf("/sys/dev/%s/%d:%d", kind, unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev)))
	dir, err = filepath.EvalSymlinks(link)
	if err != nil {
		return "", "", err
	}
	sub, err := filepath.EvalSymlinks(filepath.Join(dir, "subsystem"))
	if err != nil {
		return dir, "", err
	}
	return dir, filepath.Base(sub), nil
}

// controllerOf finds the controller of a namespace's sysfs directory: its parent for a
// private namespace (…/nvme/nvme0/ng0n1), or a controller listed in the subsystem for a
// multipath head (…/nvme-subsystem/nvme-subsys0/ng0n1).
func controllerOf(nsDir string) string {
	parent := filepath.Dir(nsDir)
	if ctrlName.MatchString(filepath.Base(parent)) {
		return filepath.Base(parent)
	}
	ents, err := os.ReadDir(parent)
	if err != nil {
		return ""
	}
	for _, e := range ents {
		if ctrlName.MatchString(e.Name()) {
			return e.Name()
		}
	}
	return ""
}

func readSysInt(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return n
}

// queueLimit is the kernel's per-request limit for the namespace's queue: max_hw_sectors_kb,
// and max_segments pages (a user buffer's pages need not be physically contiguous).
func queueLimit(nsDir, subsystem string) int {
	q := filepath.Join(nsDir, "queue")
	if subsystem == "nvme-generic" { // the block device is the sibling nvmeXnY
		name := filepath.Base(nsDir)
		q = filepath.Join(filepath.Dir(nsDir), "nvme"+strings.TrimPrefix(name, "ng"), "queue")
	}
	kb := readSysInt(filepath.Join(q, "max_hw_sectors_kb"))
	if kb <= 0 {
		return 0
	}
	lim := kb << 10
	if segs := readSysInt(filepath.Join(q, "max_segments")); segs > 0 && segs*os.Getpagesize() < lim {
		lim = segs * os.Getpagesize()
	}
	return lim
}

// OpenIoctl opens an NVMe namespace device (/dev/ngXnY, /dev/nvmeXnY) or controller
// (/dev/nvmeX) for passthrough with the synchronous ioctls.
func OpenIoctl(path string, opt IoctlOptions) (*IoctlTransport, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("nvme: %w", err)
	}
	if fi.Mode()&os.ModeDevice == 0 {
		return nil, fmt.Errorf("nvme: %s: %w (not a device node); pass /dev/ngXnY, /dev/nvmeXnY or /dev/nvmeX", path, ErrNotNVMe)
	}
	dir, subsystem, serr := sysfsNode(fi)
	isNS := subsystem == "nvme-generic" || (subsystem == "block" && strings.HasPrefix(filepath.Base(dir), "nvme"))
	if serr == nil && subsystem != "nvme" && !isNS {
		return nil, fmt.Errorf("nvme: %s: %w (sysfs subsystem %q, %s); pass /dev/ngXnY, /dev/nvmeXnY or /dev/nvmeX", path, ErrNotNVMe, subsystem, filepath.Base(dir))
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, syscall.EACCES) && os.Geteuid() != 0 {
			return nil, fmt.Errorf("nvme: %w (NVMe passthrough needs root or CAP_SYS_ADMIN)", err)
		}
		return nil, fmt.Errorf("nvme: %w", err)
	}
	t := &IoctlTransport{workers: opt.Workers, nsid: opt.NSID}
	if t.workers <= 0 {
		t.workers = 4
	}
	fail := func(err error) (*IoctlTransport, error) {
		f.Close()
		if t.ctrl != nil {
			t.ctrl.Close()
		}
		return nil, err
	}
	switch {
	case subsystem == "nvme":
		t.ctrl, t.io, t.adm = f, f, f
		t.info = DeviceNodes{Controller: path, AdminVia: path}
		// Without IoctlOptions.NSID the namespace is unknown (0) until Probe picks the first
		// active one. I/O through a controller node (deprecated by Linux) works only when the
		// controller has a single namespace.
		return t, nil
	case isNS || serr != nil:
		id, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), sys.NVME_IOCTL_ID, 0)
		if errno != 0 {
			return fail(fmt.Errorf("nvme: %s: %w (NVME_IOCTL_ID: %v); pass /dev/ngXnY, /dev/nvmeXnY or /dev/nvmeX", path, ErrNotNVMe, errno))
		}
		if opt.NSID != 0 && opt.NSID != uint32(id) {
			return fail(fmt.Errorf("nvme: %s is namespace %d, not %d", path, id, opt.NSID))
		}
		t.ns, t.io, t.adm, t.nsid = f, f, f, uint32(id)
		t.info = DeviceNodes{Namespace: path, AdminVia: path + " (no controller node found in sysfs)"}
		if serr == nil {
			t.maxXfer = queueLimit(dir, subsystem)
			if c := controllerOf(dir); c != "" {
				cp := "/dev/" + c
				if cf, err := os.OpenFile(cp, os.O_RDWR, 0); err == nil {
					t.ctrl, t.adm = cf, cf
					t.info.Controller, t.info.AdminVia = cp, cp
				} else {
					t.info.AdminVia = fmt.Sprintf("%s (controller %s: %v)", path, cp, err)
				}
			}
		}
		return t, nil
	default:
		return fail(fmt.Errorf("nvme: %s: %w (sysfs subsystem %q); pass /dev/ngXnY, /dev/nvmeXnY or /dev/nvmeX", path, ErrNotNVMe, subsystem))
	}
}

// Nodes reports the device paths the transport uses.
func (t *IoctlTransport) Nodes() DeviceNodes { return t.info }

// NSID is the namespace from NVME_IOCTL_ID (or IoctlOptions.NSID; 0 on a controller node
// without one).
func (t *IoctlTransport) NSID() uint32 { return t.nsid }

// MaxTransferBytes is the kernel queue's per-command limit (0 if sysfs did not say).
func (t *IoctlTransport) MaxTransferBytes() int { return t.maxXfer }

// ErrClosed: the transport was closed.
var ErrClosed = errors.New("nvme: transport closed")

// passthru lays a Command out as struct nvme_passthru_cmd, without the buffer addresses.
func passthru(c *Command) sys.NVMePassthruCmd {
	return sys.NVMePassthruCmd{
		Opcode: c.Opcode, Flags: c.Flags, NSID: c.NSID, CDW2: c.CDW2, CDW3: c.CDW3,
		DataLen: uint32(len(c.Data)), MetadataLen: uint32(len(c.Metadata)),
		CDW10: c.CDW10, CDW11: c.CDW11, CDW12: c.CDW12, CDW13: c.CDW13, CDW14: c.CDW14, CDW15: c.CDW15,
		TimeoutMs: c.TimeoutMs,
	}
}

// run issues one passthrough ioctl. Data buffers should come from blockdev.Alloc; Go
// memory works too (it is pinned for the duration of the call).
func run(f *os.File, req uintptr, c *Command) Completion {
	var pin runtime.Pinner
	defer pin.Unpin()
	pc := passthru(c)
	if len(c.Data) > 0 {
		p := unsafe.SliceData(c.Data)
		pin.Pin(p)
		pc.Addr = uint64(uintptr(unsafe.Pointer(p)))
	}
	if len(c.Metadata) > 0 {
		p := unsafe.SliceData(c.Metadata)
		pin.Pin(p)
		pc.Metadata = uint64(uintptr(unsafe.Pointer(p)))
	}
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), req, uintptr(unsafe.Pointer(&pc)))
	runtime.KeepAlive(f)
	if errno != 0 {
		return Completion{Err: errno}
	}
	return Completion{Status: Status(r), Result: uint64(pc.Result)}
}

// Admin runs one admin command with NVME_IOCTL_ADMIN_CMD.
func (t *IoctlTransport) Admin(c *Command) Completion {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return Completion{Err: ErrClosed}
	}
	return run(t.adm, sys.NVME_IOCTL_ADMIN_CMD, c)
}

// IO runs the batch with NVME_IOCTL_IO_CMD, Workers commands at a time.
func (t *IoctlTransport) IO(cmds []Command, done []Completion) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		for i := range cmds {
			done[i] = Completion{Err: ErrClosed}
		}
		return
	}
	w := min(t.workers, len(cmds))
	if w <= 1 {
		for i := range cmds {
			done[i] = run(t.io, sys.NVME_IOCTL_IO_CMD, &cmds[i])
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(cmds) {
					return
				}
				done[i] = run(t.io, sys.NVME_IOCTL_IO_CMD, &cmds[i])
			}
		}()
	}
	wg.Wait()
}

// Close closes the device files after the commands in flight have finished.
func (t *IoctlTransport) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	var err error
	if t.ns != nil {
		err = t.ns.Close()
	}
	if t.ctrl != nil {
		if e := t.ctrl.Close(); err == nil {
			err = e
		}
	}
	return err
}
