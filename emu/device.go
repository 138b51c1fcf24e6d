package emu

import (
	"errors"
	"fmt"

	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/internal/blockdev"
	"github.com/rbctl/rbctl/nvme"
)

// OpenDevice opens the emulated SSD a spec describes and puts the passthrough device of
// package nvme over it, with the placement handle → PID table from FDP discovery (empty
// when FDP is disabled). The engine writes through the returned device exactly as it would
// through /dev/ngXnY. Closing the device closes the controller.
func OpenDevice(spec string) (*nvme.Device, *fdp.Discovery, error) {
	c, err := Open(spec)
	if err != nil {
		return nil, nil, err
	}
	dev, disc, err := NewDevice(c, spec)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return dev, disc, nil
}

// NewDevice builds the nvme passthrough device over an open controller (see OpenDevice).
// Closing the device closes c.
func NewDevice(c *Controller, path string) (*nvme.Device, *fdp.Discovery, error) {
	disc, err := fdp.Discover(c)
	if err != nil && !errors.Is(err, fdp.ErrFDPDisabled) {
		return nil, nil, fmt.Errorf("emu: FDP discovery: %w", err)
	}
	dev, err := nvme.NewDevice(c, nvme.DeviceOptions{Path: path, Kind: blockdev.KindEmulated, PIDs: disc.PIDs})
	if err != nil {
		return nil, nil, err
	}
	return dev, disc, nil
}
