package devices

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/nvme"
)

func sizedFile(t *testing.T, dir string, n int64) string {
	t.Helper()
	p := filepath.Join(dir, "img")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, n); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOpenEverySpelling: a file, mem: and emu: all open through OpenDevice, each with the
// engine its spelling calls for and an FDP view only where there is FDP.
func TestOpenEverySpelling(t *testing.T) {
	file := sizedFile(t, t.TempDir(), 8<<20)
	spec := "emu:" + filepath.Join(t.TempDir(), "e.img") + "?size=32M&ru=1M&ruhs=4"
	if _, err := emu.Create(spec); err != nil {
		t.Fatal(err)
	}
	off := "emu:" + filepath.Join(t.TempDir(), "off.img") + "?size=32M&ru=1M&ruhs=4&fdp=off"
	if _, err := emu.Create(off); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, engine string
		opt          Options
		kind         blockdev.Kind
		handles      int
		fdp          bool
		noFDP        error
	}{
		{file, "uring", DefaultOptions(), blockdev.KindFile, 0, false, fdp.ErrFDPNotSupported},
		{file, "posix", Options{IOPath: PathPosix, Direct: true}, blockdev.KindFile, 0, false, fdp.ErrFDPNotSupported},
		{file, "aio", Options{IOPath: PathAio, Direct: true}, blockdev.KindFile, 0, false, fdp.ErrFDPNotSupported},
		{file, "uring", Options{ReadOnly: true, Direct: true}, blockdev.KindFile, 0, false, fdp.ErrFDPNotSupported},
		{"mem:16M", "mem", DefaultOptions(), blockdev.KindMemory, 8, false, fdp.ErrFDPNotSupported}, // Mem takes 8 handles, unplaced
		{spec, "emu", DefaultOptions(), blockdev.KindEmulated, 4, true, nil},
		{spec, "emu", Options{ReadOnly: true}, blockdev.KindEmulated, 4, true, nil},
		{off, "emu", DefaultOptions(), blockdev.KindEmulated, 0, false, nvme.ErrFDPDisabled},
	} {
		o, err := OpenDevice(c.path, c.opt)
		if err != nil {
			t.Fatalf("%s %+v: %v", c.path, c.opt, err)
		}
		info := o.Info()
		engine := c.engine
		if engine == "uring" && o.IOPath == PathPosix && strings.Contains(strings.Join(o.Notes, ";"), "io_uring is not available") {
			engine = PathPosix // a kernel or sandbox without io_uring
		}
		if o.IOPath != engine || info.Kind != c.kind || info.Handles != c.handles || (o.FDP != nil) != c.fdp {
			t.Errorf("%s %+v: engine %s kind %s handles %d FDP %v, want %s %s %d %v", c.path, c.opt, o.IOPath, info.Kind, info.Handles, o.FDP != nil, engine, c.kind, c.handles, c.fdp)
		}
		if c.noFDP != nil && !errors.Is(o.NoFDP, c.noFDP) || c.noFDP == nil && o.NoFDP != nil {
			t.Errorf("%s: NoFDP %v, want %v", c.path, o.NoFDP, c.noFDP)
		}
		if (o.Emu != nil) != (c.kind == blockdev.KindEmulated) {
			t.Errorf("%s: Emu %v", c.path, o.Emu)
		}
		if o.FDP != nil {
			checkFDPView(t, o, c.opt.ReadOnly)
		}
		if err := o.Close(); err != nil {
			t.Errorf("%s: close: %v", c.path, err)
		}
	}
	for _, bad := range []string{"", "mem:", "mem:1K", "mem:lots"} {
		if _, err := OpenDevice(bad, DefaultOptions()); err == nil {
			t.Errorf("%q opened", bad)
		}
	}
	if _, err := OpenDevice(file, Options{IOPath: "spdk"}); err == nil || !strings.Contains(err.Error(), `"spdk"`) {
		t.Errorf("unknown engine: %v", err)
	}
}

// checkFDPView: the view reads through the device's own transport and agrees with the
// block device about the handles.
func checkFDPView(t *testing.T, o *Opened, readOnly bool) {
	t.Helper()
	f := o.FDP
	if got := f.PIDs(); len(got) != o.Info().Handles || got[3] != 3 {
		t.Errorf("PIDs %v, handles %d", got, o.Info().Handles)
	}
	if f.ReclaimUnitBytes() != 1<<20 || f.ReclaimGroups() != 1 {
		t.Errorf("RU %d, groups %d", f.ReclaimUnitBytes(), f.ReclaimGroups())
	}
	if readOnly {
		return
	}
	buf, err := blockdev.Alloc(64 << 10)
	if err != nil {
		t.Fatal(err)
	}
	defer blockdev.Free(buf)
	if err := blockdev.WriteAt(o.Block, buf, 0, 2); err != nil {
		t.Fatal(err)
	}
	st, err := f.Stats()
	if err != nil || st.HBMW.Lo != 64<<10 {
		t.Errorf("stats after 64 KiB through handle 2: %+v %v", st, err)
	}
	rs, err := f.RUHStatus()
	if err != nil || len(rs.Descs) != 4 || rs.Descs[2].RUAMW != 256-16 {
		t.Errorf("RUH status after 16 blocks through handle 2: %+v %v", rs, err)
	}
	if err := f.UpdateRUH([]uint16{9}); !errors.Is(err, fdp.ErrBadPID) || !strings.Contains(err.Error(), "its PIDs are 0,1,2,3") {
		t.Errorf("update of PID 9: %v", err)
	}
	if err := f.UpdateRUH([]uint16{2}); err != nil {
		t.Fatal(err)
	}
	if rs, err := f.RUHStatus(); err != nil || rs.Descs[2].RUAMW != 256 {
		t.Errorf("RUH status after the update: %+v %v", rs, err)
	}
	if l, err := f.Configs(); err != nil || len(l.Configs) != 1 {
		t.Errorf("configs %+v %v", l, err)
	}
	if l, err := f.Usage(); err != nil || len(l.Attrs) != 4 {
		t.Errorf("usage %+v %v", l, err)
	}
	if _, err := f.Events(true); err != nil {
		t.Errorf("host events: %v", err)
	}
}

// TestOpenAdmin: the admin-only open identifies the emulated SSD and finds its FDP, a path
// that is not NVMe is refused as such, and so is a transport that names none.
func TestOpenAdmin(t *testing.T) {
	a, err := OpenAdmin("emu:mem?size=64M&ru=1M&ruhs=2", AdminOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.CheckFDP(); err != nil {
		t.Fatal(err)
	}
	id, err := a.Identify()
	if err != nil || id.CapacityBytes != 64<<20 || !id.FDPSupported || id.WriteStreams != nil || id.Device != a.Path {
		t.Fatalf("identify %+v %v", id, err)
	}
	if rows := id.Rows(); rows[0][1] != a.Path || len(rows) < 20 {
		t.Errorf("rows %v", rows)
	}
	f, err := a.FDP()
	if err != nil || len(f.PIDs()) != 2 {
		t.Fatalf("FDP %v %v", f, err)
	}
	if eg, err := a.EnduranceGroup(0); err != nil || eg != f.Discovery().EnduranceGroup {
		t.Errorf("endurance group %d %v", eg, err)
	}
	if _, err := OpenAdmin("/dev/null", AdminOptions{}); !errors.Is(err, nvme.ErrNotNVMe) {
		t.Errorf("/dev/null: %v", err)
	}
	if _, err := OpenAdmin("", AdminOptions{}); err == nil {
		t.Error("empty path opened")
	}
	// An unknown transport is refused for the emulated SSD too, which has none to choose.
	if _, err := OpenAdmin("emu:mem?size=64M&ru=1M&ruhs=2", AdminOptions{Transport: "bogus"}); err == nil || !strings.Contains(err.Error(), "want uring or ioctl") {
		t.Errorf("transport bogus on emu: %v", err)
	}
}

// TestBufferedFallback: a file whose filesystem refuses O_DIRECT opens buffered when the
// caller allows it, and says so; where O_DIRECT works nothing changes.
func TestBufferedFallback(t *testing.T) {
	dir := "/dev/shm"
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Skip("no /dev/shm (tmpfs)")
	}
	d, err := os.MkdirTemp(dir, "rbctl-devices-")
	if err != nil {
		t.Skip(err)
	}
	defer os.RemoveAll(d)
	file := sizedFile(t, d, 1<<20)
	for _, engine := range []string{PathAuto, PathPosix} {
		strict, serr := OpenDevice(file, Options{IOPath: engine, Direct: true})
		if serr == nil {
			strict.Close()
		}
		o, err := OpenDevice(file, Options{IOPath: engine, Direct: true, BufferedFallback: true})
		if err != nil {
			t.Fatalf("%s with fallback: %v", engine, err)
		}
		fell := strings.Contains(strings.Join(o.Notes, ";"), "refuses O_DIRECT")
		if fell != (serr != nil) || o.Info().Direct == fell {
			t.Errorf("%s: strict open %v, fallback note %v, direct %v", engine, serr, fell, o.Info().Direct)
		}
		o.Close()
	}
}

// TestFallbackDecisions: which errors make the opener try the other way. The buffered
// retry is for a regular file's EINVAL only; the posix retry for a kernel without (or
// forbidding) io_uring.
func TestFallbackDecisions(t *testing.T) {
	file := sizedFile(t, t.TempDir(), 1<<20)
	einval := fmt.Errorf("open %s: %w", file, unix.EINVAL)
	if !directRefused(file, einval) || directRefused(file, unix.EBUSY) || directRefused("/dev/null", einval) || directRefused(file+".missing", einval) {
		t.Error("directRefused: wrong decision")
	}
	for err, want := range map[error]bool{
		fmt.Errorf("x: %w", blockdev.ErrNotSupported):        true,
		&os.PathError{Op: "io_uring_setup", Err: unix.EPERM}: true,
		unix.ENOSYS:    true,
		unix.EINVAL:    false,
		os.ErrNotExist: false,
	} {
		if uringUnavailable(err) != want {
			t.Errorf("uringUnavailable(%v) = %v", err, !want)
		}
	}
}

// TestAutoFile: PathAuto with AutoFile aio (serve's default) opens a regular file with
// native AIO; without AutoFile, or for other spellings, PathAuto is unchanged; EngineOf
// names each engine as Opened.IOPath does; aioUnavailable falls back only on what says
// native AIO cannot be had.
func TestAutoFile(t *testing.T) {
	file := sizedFile(t, t.TempDir(), 1<<20)
	for _, c := range []struct {
		opt  Options
		path string
		want string
	}{
		{Options{IOPath: PathAuto, AutoFile: PathAio, Direct: true}, file, PathAio},
		{Options{IOPath: PathAuto, AutoFile: PathAio, Direct: true, ReadOnly: true}, file, PathAio},
		{Options{IOPath: PathAuto, Direct: true}, file, PathUring},
		{Options{IOPath: PathPosix, AutoFile: PathAio, Direct: true}, file, PathPosix},
		{Options{IOPath: PathUring, AutoFile: PathAio, Direct: true}, file, PathUring},
		{Options{IOPath: PathAuto, AutoFile: PathAio}, "mem:1M", "mem"},
		{Options{IOPath: "auto", AutoFile: PathAio, Direct: true}, file, PathAio}, // the CLI's spelling
		{Options{IOPath: "auto", Direct: true}, file, PathUring},
	} {
		o, err := OpenDevice(c.path, c.opt)
		if err != nil {
			t.Fatalf("%s %+v: %v", c.path, c.opt, err)
		}
		got := EngineOf(o.Block)
		if got != o.IOPath {
			t.Errorf("%s %+v: EngineOf %q, Opened.IOPath %q", c.path, c.opt, got, o.IOPath)
		}
		if got != c.want && !(c.want == PathUring && got == PathPosix && len(o.Notes) > 0) {
			t.Errorf("%s %+v: opened %s, want %s (notes %q)", c.path, c.opt, got, c.want, o.Notes)
		}
		o.Close()
	}
	if _, err := OpenDevice(file+".missing", Options{IOPath: PathAuto, AutoFile: PathAio}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
	for err, want := range map[error]bool{
		fmt.Errorf("open x: native aio: %w: io_setup(32): %w", blockdev.ErrAioUnavailable, unix.EAGAIN): true,
		fmt.Errorf("open x: %w", unix.EAGAIN):         false, // a lock held elsewhere: every engine fails so
		unix.EPERM:                                    false,
		fmt.Errorf("x: %w", blockdev.ErrNotSupported): false,
		os.ErrNotExist:                                false,
	} {
		if aioUnavailable(err) != want {
			t.Errorf("aioUnavailable(%v) = %v", err, !want)
		}
	}
	if EngineOf(nil) != "" {
		t.Error("EngineOf(nil) names an engine")
	}

	// Where native AIO cannot be set up, the file opens as PathAuto would and Notes says
	// why; any other failure is the caller's error, with nothing opened in its place.
	real := openAio
	t.Cleanup(func() { openAio = real })
	openAio = func(string, blockdev.FileOptions) (blockdev.Device, error) {
		return nil, fmt.Errorf("%w: io_setup(32): %w: %w (the kernel has no native AIO)", blockdev.ErrAioUnavailable, unix.ENOSYS, blockdev.ErrNotSupported)
	}
	o, err := OpenDevice(file, Options{IOPath: PathAuto, AutoFile: PathAio, Direct: true})
	if err != nil {
		t.Fatalf("AIO unavailable: %v", err)
	}
	if o.IOPath == PathAio || EngineOf(o.Block) != o.IOPath || len(o.Notes) == 0 || !strings.Contains(o.Notes[len(o.Notes)-1], "native AIO is not available") {
		t.Errorf("AIO unavailable: opened %s (%s), notes %q", o.IOPath, EngineOf(o.Block), o.Notes)
	}
	o.Close()
	openAio = func(string, blockdev.FileOptions) (blockdev.Device, error) { return nil, unix.EBUSY }
	if o, err := OpenDevice(file, Options{IOPath: PathAuto, AutoFile: PathAio, Direct: true}); !errors.Is(err, unix.EBUSY) {
		if err == nil {
			o.Close()
		}
		t.Errorf("AIO refused with EBUSY: %v, want the error", err)
	}
}

// countingTransport counts the Get Log Page commands for the FDP configurations log.
type countingTransport struct {
	nvme.Transport
	configReads int
}

func (c *countingTransport) Admin(cmd *nvme.Command) nvme.Completion {
	if cmd.Opcode == nvme.OpGetLogPage && nvme.LogID(cmd.CDW10) == nvme.LogFDPConfigs {
		c.configReads++
	}
	return c.Transport.Admin(cmd)
}

// TestDiscoveryOnce: opening a device runs FDP discovery once (the configurations log is
// read header-first: two commands), and the view reuses what it found.
func TestDiscoveryOnce(t *testing.T) {
	c, err := emu.OpenWith("emu:mem?size=32M&ru=1M&ruhs=4", emu.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	ct := &countingTransport{Transport: c}
	o, err := overTransport(ct, "emu:mem", blockdev.KindEmulated, DefaultOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	_ = o.FDP.PIDs()
	_ = o.FDP.ReclaimUnitBytes()
	if _, err := o.FDP.Stats(); err != nil {
		t.Fatal(err)
	}
	if ct.configReads != 2 {
		t.Errorf("%d configurations log reads, want 2 (one discovery)", ct.configReads)
	}
}

// A memory device larger than the machine's RAM is refused with the sizes, never allocated
// (the runtime's out-of-memory is fatal and names no flag).
func TestOpenMemBeyondRAM(t *testing.T) {
	_, err := OpenDevice("mem:64T", DefaultOptions())
	if err == nil || !strings.Contains(err.Error(), "is more than this machine's memory") {
		t.Fatalf("mem:64T: %v", err)
	}
}
