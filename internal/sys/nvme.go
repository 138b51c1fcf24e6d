package sys

import "unsafe"

// NVMe passthrough ABI from include/uapi/linux/nvme_ioctl.h (nvme-fdp-reference.md §1.1–1.2).
// Values are kernel ABI: do not change.

// ioctl and uring_cmd cmd_op numbers ('N' = 0x4E).
const (
	NVME_IOCTL_ID            = 0x00004E40
	NVME_IOCTL_ADMIN_CMD     = 0xC0484E41
	NVME_IOCTL_IO_CMD        = 0xC0484E43
	NVME_IOCTL_ADMIN64_CMD   = 0xC0504E47
	NVME_IOCTL_IO64_CMD      = 0xC0504E48
	NVME_IOCTL_IO64_CMD_VEC  = 0xC0504E49
	NVME_URING_CMD_IO        = 0xC0484E80
	NVME_URING_CMD_IO_VEC    = 0xC0484E81
	NVME_URING_CMD_ADMIN     = 0xC0484E82
	NVME_URING_CMD_ADMIN_VEC = 0xC0484E83
)

// NVMeUringCmd is struct nvme_uring_cmd (72 bytes), copied into the SQE128 command area for
// IORING_OP_URING_CMD with cmd_op NVME_URING_CMD_IO or _ADMIN.
type NVMeUringCmd struct {
	Opcode      uint8  // @0
	Flags       uint8  // @1: must be 0
	Rsvd1       uint16 // @2
	NSID        uint32 // @4
	CDW2        uint32 // @8
	CDW3        uint32 // @12
	Metadata    uint64 // @16: user pointer
	Addr        uint64 // @24: data pointer (iovec array for _VEC)
	MetadataLen uint32 // @32
	DataLen     uint32 // @36 (iovec count for _VEC)
	CDW10       uint32 // @40
	CDW11       uint32
	CDW12       uint32
	CDW13       uint32
	CDW14       uint32
	CDW15       uint32
	TimeoutMs   uint32 // @64
	Rsvd2       uint32 // @68
}

// NVMePassthruCmd is struct nvme_passthru_cmd / nvme_admin_cmd (72 bytes) for
// NVME_IOCTL_ADMIN_CMD and NVME_IOCTL_IO_CMD; the kernel writes CQE DW0 into Result.
type NVMePassthruCmd struct {
	Opcode      uint8
	Flags       uint8
	Rsvd1       uint16
	NSID        uint32
	CDW2        uint32
	CDW3        uint32
	Metadata    uint64
	Addr        uint64
	MetadataLen uint32
	DataLen     uint32
	CDW10       uint32
	CDW11       uint32
	CDW12       uint32
	CDW13       uint32
	CDW14       uint32
	CDW15       uint32
	TimeoutMs   uint32
	Result      uint32 // @68
}

// NVMePassthruCmd64 is struct nvme_passthru_cmd64 (80 bytes) with a 64-bit result.
type NVMePassthruCmd64 struct {
	Opcode      uint8
	Flags       uint8
	Rsvd1       uint16
	NSID        uint32
	CDW2        uint32
	CDW3        uint32
	Metadata    uint64
	Addr        uint64
	MetadataLen uint32
	DataLen     uint32 // union with vec_cnt
	CDW10       uint32
	CDW11       uint32
	CDW12       uint32
	CDW13       uint32
	CDW14       uint32
	CDW15       uint32
	TimeoutMs   uint32
	Rsvd2       uint32 // @68
	Result      uint64 // @72
}

var (
	_ [72]byte = [unsafe.Sizeof(NVMeUringCmd{})]byte{}
	_ [72]byte = [unsafe.Sizeof(NVMePassthruCmd{})]byte{}
	_ [80]byte = [unsafe.Sizeof(NVMePassthruCmd64{})]byte{}
	_ [24]byte = [unsafe.Offsetof(NVMeUringCmd{}.Addr)]byte{}
	_ [40]byte = [unsafe.Offsetof(NVMeUringCmd{}.CDW10)]byte{}
	_ [64]byte = [unsafe.Offsetof(NVMeUringCmd{}.TimeoutMs)]byte{}
	_ [68]byte = [unsafe.Offsetof(NVMePassthruCmd{}.Result)]byte{}
	_ [72]byte = [unsafe.Offsetof(NVMePassthruCmd64{}.Result)]byte{}
)
