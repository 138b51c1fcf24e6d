package bench

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/devices/safety"
	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/nvme"
	"github.com/rbctl/rbctl/reports"
)

// target is the device a bench writes to and what it says about itself.
type target struct {
	dev      blockdev.Device
	stats    func() (*fdp.Stats, error) // nil without FDP
	handles  int                        // placement handles the device maps (0: none)
	pids     []uint16                   // their FDP placement identifiers (nil without FDP)
	ruBytes  int64                      // 0: unknown
	emulated *emu.Spec                  // the emulated SSD's spec (its own FTL model), nil otherwise
	source   string                     // device WAF source: reports.SourceFDPStats or SourceEmulatorModel
	notes    []string
	// reset, when set, puts the device back in its initial state between policies (the
	// emulator: its FTL state would otherwise carry one policy's open RUs into the next).
	reset func() error
	close func() error
	mark  string // the file closeTargets marks as bench's own (own.go); "" for none
}

// openTarget opens path (through devices.OpenDevice, which discovers FDP once) or adopts
// dev. Nothing is created or touched before the safety gate agreed.
func openTarget(o *Options, dev blockdev.Device, path string) (*target, error) {
	if dev != nil {
		t := &target{dev: dev, close: func() error { return nil }}
		if nd, ok := dev.(interface{ Transport() nvme.Transport }); ok {
			if f, err := devices.NewFDP(nd.Transport()); err == nil {
				t.useFDP(f)
			}
		}
		t.finish()
		return t, nil
	}
	if path == "" {
		return nil, errors.New("bench: no device given")
	}
	if emu.IsSpec(path) {
		if err := createEmu(path, o.Force); err != nil {
			return nil, err
		}
	} else if !strings.HasPrefix(path, devices.MemPrefix) {
		if err := prepareFile(path, o.Create, o.Force); err != nil {
			return nil, err
		}
	}
	opt := devices.DefaultOptions()
	opt.IOPath, opt.QueueDepth, opt.BufferedFallback = o.IOPath, o.QueueDepth, true
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() {
		opt.Exclusive = false // a file is locked instead
	}
	od, err := devices.OpenDevice(path, opt)
	if err != nil {
		return nil, err
	}
	t := &target{dev: od.Block, close: od.Close, notes: od.Notes}
	if od.Emu != nil {
		c := od.Emu
		if err := c.Reset(); err != nil {
			od.Close()
			return nil, err
		}
		sp := c.Spec() // with the geometry an existing device was made with
		t.emulated, t.ruBytes = &sp, sp.RUSize
		t.reset = c.Reset
	}
	if od.FDP != nil {
		t.useFDP(od.FDP)
	}
	if t.stats == nil && od.Emu != nil {
		t.notes = append(t.notes, "emulated device has FDP disabled: no device WAF")
	} else if t.stats == nil && !t.useStreams() && !strings.HasPrefix(path, devices.MemPrefix) {
		t.notes = append(t.notes, "device has no FDP: placement handles reach only the shadow model")
	}
	t.finish()
	return t, nil
}

func (t *target) useFDP(f *devices.FDP) {
	if len(f.PIDs()) == 0 {
		return
	}
	t.handles, t.ruBytes, t.stats, t.pids = len(f.PIDs()), f.ReclaimUnitBytes(), f.Stats, f.PIDs()
	t.source = reports.SourceFDPStats
	if c, err := nvme.ReadController(f.Transport()); err == nil && c.ModelNumber == emu.ModelNumber {
		// The emulator served over NVMe/TCP and reached as a kernel NVMe device.
		t.source = reports.SourceEmulatorModel
	}
}

// useStreams takes Linux >= 6.16 block-layer write streams as the placement handles:
// handle h is stream h+1 (the handle at RUH-status index h on NVMe FDP).
func (t *target) useStreams() bool {
	ws, ok := t.dev.(interface {
		WriteStreams() (blockdev.WriteStreams, error)
	})
	if !ok {
		return false
	}
	w, err := ws.WriteStreams()
	if err != nil || w.Max <= 0 {
		return false
	}
	t.handles, t.ruBytes = w.Max, w.Granularity
	t.notes = append(t.notes, fmt.Sprintf("placement through kernel write streams (%d streams, %d-byte granularity; handle h = stream h+1); "+
		"no device WAF through the block device: the namespace's /dev/ngXnY carries the FDP log", w.Max, w.Granularity))
	return true
}

func (t *target) finish() {
	if t.emulated != nil {
		t.source = reports.SourceEmulatorModel
	}
}

func (t *target) kind() string {
	if t.emulated != nil {
		return string(blockdev.KindEmulated)
	}
	return string(t.dev.Info().Kind)
}

// createEmu makes sure the emulated SSD of spec exists, creating it when it does not. The
// gate looks at the data file; a device another process has open is refused by its lock.
func createEmu(spec string, force bool) error {
	if err := gate(spec, force); err != nil {
		return err
	}
	c, err := emu.OpenWith(spec, emu.OpenOptions{Create: true})
	if err != nil {
		return err
	}
	return c.Close()
}

// gate asks the safety gate about dev: all of it, or under force (or on a file an earlier
// bench left untouched, own.go) only what no override lifts (mounted, held, backing a loop
// device).
func gate(dev string, force bool) error {
	if force || isOwn(dev) {
		return safety.GateInUse(safety.Bench, dev)
	}
	return safety.Gate(safety.Bench, dev)
}

// checkTarget asks the safety gate about path without touching anything: an emulated SSD
// and an existing file or device must pass it (unless force), a missing file needs create.
// openTarget asks again as it opens; checking every device first leaves them all untouched
// when one is refused.
func checkTarget(path string, create int64, force bool) error {
	switch {
	case emu.IsSpec(path):
		return gate(path, force)
	case strings.HasPrefix(path, devices.MemPrefix):
		return nil
	}
	mk, err := checkFile(path, create, force)
	if err == nil && mk {
		err = blockdev.CheckNotDevNode(path)
	}
	return err
}

// checkFile says whether path must be created (it does not exist and create > 0), and
// otherwise asks the safety gate.
func checkFile(path string, create int64, force bool) (bool, error) {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) && create > 0 {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	if force || isOwn(path) {
		return false, safety.GateInUse(safety.Bench, path)
	}
	if !st.Mode().IsRegular() {
		return false, fmt.Errorf("%s is a device: bench formats it and destroys its contents: %w", path, safety.ErrHasData)
	}
	return false, safety.Gate(safety.Bench, path)
}

// prepareFile creates path as a sparse file of create bytes when it does not exist, and
// otherwise asks the safety gate: bench formats what it is given.
func prepareFile(path string, create int64, force bool) error {
	mk, err := checkFile(path, create, force)
	if mk {
		if derr := blockdev.CheckNotDevNode(path); derr != nil {
			return derr
		}
		fh, cerr := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, blockdev.DataFileMode)
		if cerr != nil {
			return cerr
		}
		if terr := fh.Truncate(create / 4096 * 4096); terr != nil {
			fh.Close()
			os.Remove(path) // bench's own, just made
			return terr
		}
		return fh.Close()
	}
	return err
}
