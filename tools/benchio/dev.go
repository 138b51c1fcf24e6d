package main

import (
	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/internal/uring"
)

// rbDev is the device the rbctl, rbctl-replay and engine rows drive: the io_uring device in
// the setup -ring names, or with -ring aio the native AIO one.
type rbDev interface {
	blockdev.Device
	blockdev.Starter
	Occupancy() uring.Occupancy // the ring's ops-in-flight integral (zero for aio: depth n/a)
	Stats() blockdev.UringStats // SQE counts (zero for aio: isRing false)
}

// aioDev is the native AIO device as an rbDev: it keeps no occupancy integral and issues no
// SQEs, so the rows print those figures as n/a, not 0.
type aioDev struct{ *blockdev.AioDevice }

func (aioDev) Occupancy() uring.Occupancy { return uring.Occupancy{} }
func (aioDev) Stats() blockdev.UringStats { return blockdev.UringStats{} }

// isRing reports whether d issues SQEs (its Stats and Occupancy are measured).
func isRing(d rbDev) bool {
	_, ok := d.(*blockdev.UringDevice)
	return ok
}

// openDev opens c.file as -ring says: io_uring in one of its setups, or native AIO (O_DIRECT,
// c.qd slots; no registered buffers).
func openDev(c config) (rbDev, error) {
	if c.ring == "aio" {
		d, err := blockdev.OpenAio(c.file, blockdev.FileOptions{Direct: true, QueueDepth: c.qd})
		if err != nil {
			return nil, err
		}
		return aioDev{d}, nil
	}
	uopt, err := uringOptions(c)
	if err != nil {
		return nil, err
	}
	d, err := blockdev.OpenUring(c.file, uopt)
	if err != nil {
		return nil, err
	}
	return d, nil
}
