// Package devices is the one way rbctl opens a device, whatever DEV spells:
//
//	a regular file or block device   posix or io_uring (blockdev)
//	/dev/ngXnY, /dev/nvmeXnY          NVMe passthrough (nvme), URING_CMD or the ioctls
//	emu:PATH?size=..., emu:mem?...    the emulated FDP SSD (emu) behind the same passthrough device
//	mem:SIZE                          a memory device (tests, bench dry runs)
//
// Two entry points:
//
//	OpenDevice(path, Options) (*Opened, error)     I/O: Opened.Block is the blockdev.Device,
//	                                               Opened.FDP its FDP view (nil, with
//	                                               Opened.NoFDP saying why, without FDP)
//	OpenAdmin(path, AdminOptions) (*Admin, error)  NVMe admin commands only, no block device:
//	                                               identify, the nvme-cli mirror (rbctl fdp,
//	                                               rbctl nvme log), fdp-status
//
// FDP discovery (placement handles → PIDs, RUH status, reclaim groups) runs once per open;
// the FDP view sends the FDP commands (statistics, log pages, RUH status and update) through
// the device's NVMe transport. Open(path, Options) (blockdev.Device, error) is OpenDevice
// returning only the block device, for callers that need nothing else.
//
// Whatever the spelling, a device opened for writing has one writer by construction: files
// and emu data files are locked (blockdev.LockFD), block devices are opened O_EXCL, and
// /dev/ngXnY claims its namespace's block device O_EXCL. Nothing here creates a device
// (emu.Create and the commands that take a size do, first).
package devices
