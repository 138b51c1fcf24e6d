package emu

import (
	"fmt"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/nvme"
)

// OpenDevice opens the emulated SSD a spec describes and puts the passthrough device of
// package nvme over it, with the placement handle → PID table from FDP discovery (empty
// when FDP is disabled). The engine writes through the returned device exactly as it would
// through /dev/ngXnY. Closing the device closes the controller.
func OpenDevice(spec string) (*nvme.Device, *fdp.Discovery, error) {
	return OpenDeviceWith(spec, nvme.DeviceOptions{})
}

// OpenDeviceWith is OpenDevice with device options (ReadOnly, MaxTransfer, FUA). Path,
// Kind and PIDs are filled in; KeepTransport is ignored (the device owns the controller).
// The controller is opened for writing and created if missing, unless opt.ReadOnly: then
// it is opened read-only (OpenOptions.ReadOnly) and must exist.
func OpenDeviceWith(spec string, opt nvme.DeviceOptions) (*nvme.Device, *fdp.Discovery, error) {
	c, err := OpenWith(spec, OpenOptions{ReadOnly: opt.ReadOnly, Create: !opt.ReadOnly})
	if err != nil {
		return nil, nil, err
	}
	return NewDevice(c, spec, opt)
}

// NewDevice puts the passthrough device of package nvme over an open controller, named
// path; closing the device closes the controller (also when NewDevice fails).
func NewDevice(c *Controller, path string, opt nvme.DeviceOptions) (*nvme.Device, *fdp.Discovery, error) {
	disc, err := fdp.Discover(c)
	if err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("emu: FDP discovery: %w", err)
	}
	opt.Path, opt.Kind, opt.PIDs, opt.KeepTransport = path, blockdev.KindEmulated, disc.PIDs, false
	dev, err := nvme.NewDevice(c, opt)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return dev, disc, nil
}
