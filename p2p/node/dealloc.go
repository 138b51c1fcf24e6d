package node

import (
	"fmt"

	"github.com/rbctl/rbctl/blockdev"
)

// Deallocation is which devices deallocate the slots that deletes and evictions free
// (Config.Deallocate). A deallocated slot's old data is dead to the drive at once: an NVMe
// namespace takes a DSM deallocate, a block device BLKDISCARD, the emulated FDP SSD its
// modelled deallocate; otherwise it stays valid, and garbage collection copies it, until a
// later put overwrites the slot. On a regular file a deallocate is a punched hole, which the
// filesystem pays for again with an allocating write when the slot is reused (on ext4 it
// also waits for every direct write in flight), so DeallocateDevices leaves files alone.
type Deallocation string

const (
	DeallocateNone    Deallocation = ""        // never (the zero value; "none")
	DeallocateDevices Deallocation = "devices" // every device but a regular file
	DeallocateAll     Deallocation = "all"     // every device, files too (punched holes)
)

// ParseDeallocation accepts devices, all and none ("" too).
func ParseDeallocation(s string) (Deallocation, error) {
	switch s {
	case "", "none":
		return DeallocateNone, nil
	case string(DeallocateDevices), string(DeallocateAll):
		return Deallocation(s), nil
	}
	return "", fmt.Errorf("deallocate %q is not devices, all or none", s)
}

// On reports whether the device described by info deallocates: with DeallocateDevices,
// every device but a regular file whose deallocates reach the medium (info.Deallocate: not
// a block device whose queue takes no discards, nor a namespace without DSM); with
// DeallocateAll every device, whose refusals are then counted as deallocate_errors.
func (d Deallocation) On(info blockdev.Info) bool {
	switch d {
	case DeallocateAll:
		return true
	case DeallocateDevices:
		return info.Kind != blockdev.KindFile && info.Deallocate
	}
	return false
}

// why says why a device Deallocate names does not deallocate (for the start log).
func (d Deallocation) why(info blockdev.Info) string {
	switch {
	case d == DeallocateNone:
		return "deallocation is off"
	case info.Kind == blockdev.KindFile:
		return "a regular file (give --deallocate all to punch holes in it)"
	default:
		return "the device takes no deallocates (no discard or DSM)"
	}
}
