// Package sys holds the kernel ABI rbctl talks to directly: io_uring structures, flags and
// syscalls, and the NVMe passthrough structures of include/uapi/linux/nvme_ioctl.h. Every
// struct is laid out exactly as C lays it out on a 64-bit little-endian machine, with explicit
// padding, and its size is checked at compile time so a layout drift fails the build.
//
// Nothing here interprets results; that is the job of internal/uring and nvme.
package sys
