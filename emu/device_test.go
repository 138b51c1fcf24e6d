package emu

import (
	"fmt"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/nvme"
)

// openDevice is what devices.OpenDevice does for an emu: spec (devices imports emu, so its
// tests cannot be used here): the controller, FDP discovery, and the passthrough device of
// package nvme over it with the handle → PID table. The controller is created if missing,
// unless opt.ReadOnly. Closing the device closes the controller.
func openDevice(spec string, opt nvme.DeviceOptions) (*nvme.Device, *fdp.Discovery, error) {
	c, err := OpenWith(spec, OpenOptions{ReadOnly: opt.ReadOnly, Create: !opt.ReadOnly})
	if err != nil {
		return nil, nil, err
	}
	disc, err := fdp.Discover(c)
	if err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("emu: FDP discovery: %w", err)
	}
	opt.Path, opt.Kind, opt.PIDs = spec, blockdev.KindEmulated, disc.PIDs
	dev, err := nvme.NewDevice(c, opt)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return dev, disc, nil
}
