package sys

import (
	"testing"
	"unsafe"
)

// iowr is the kernel's _IOWR(type, nr, size) on x86-64 and arm64.
func iowr(typ byte, nr uint32, size uintptr) uint32 {
	const dirRW = 3
	return dirRW<<30 | uint32(size)<<16 | uint32(typ)<<8 | nr
}

func TestNVMeIoctlNumbers(t *testing.T) {
	cases := []struct {
		name string
		got  uint32
		want uint32
	}{
		{"NVME_IOCTL_ADMIN_CMD", NVME_IOCTL_ADMIN_CMD, iowr('N', 0x41, unsafe.Sizeof(NVMePassthruCmd{}))},
		{"NVME_IOCTL_IO_CMD", NVME_IOCTL_IO_CMD, iowr('N', 0x43, unsafe.Sizeof(NVMePassthruCmd{}))},
		{"NVME_IOCTL_ADMIN64_CMD", NVME_IOCTL_ADMIN64_CMD, iowr('N', 0x47, unsafe.Sizeof(NVMePassthruCmd64{}))},
		{"NVME_IOCTL_IO64_CMD", NVME_IOCTL_IO64_CMD, iowr('N', 0x48, unsafe.Sizeof(NVMePassthruCmd64{}))},
		{"NVME_IOCTL_IO64_CMD_VEC", NVME_IOCTL_IO64_CMD_VEC, iowr('N', 0x49, unsafe.Sizeof(NVMePassthruCmd64{}))},
		{"NVME_URING_CMD_IO", NVME_URING_CMD_IO, iowr('N', 0x80, unsafe.Sizeof(NVMeUringCmd{}))},
		{"NVME_URING_CMD_IO_VEC", NVME_URING_CMD_IO_VEC, iowr('N', 0x81, unsafe.Sizeof(NVMeUringCmd{}))},
		{"NVME_URING_CMD_ADMIN", NVME_URING_CMD_ADMIN, iowr('N', 0x82, unsafe.Sizeof(NVMeUringCmd{}))},
		{"NVME_URING_CMD_ADMIN_VEC", NVME_URING_CMD_ADMIN_VEC, iowr('N', 0x83, unsafe.Sizeof(NVMeUringCmd{}))},
		{"NVME_IOCTL_ID", NVME_IOCTL_ID, 'N'<<8 | 0x40},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
}

// TestSQECommandArea checks that the command area of an SQE128 slot starts where the base
// SQE's addr3 does and spans the remaining 80 bytes.
func TestSQECommandArea(t *testing.T) {
	if off := unsafe.Offsetof(SQE{}.Addr3); off != SQECmdOff {
		t.Fatalf("addr3 at %d, cmd[] at %d", off, SQECmdOff)
	}
	if SQECmdOff+SQECmdLen != unsafe.Sizeof(SQE128{}) {
		t.Fatalf("cmd[] [%d, %d) does not end the 128-byte slot", SQECmdOff, SQECmdOff+SQECmdLen)
	}
	if unsafe.Sizeof(NVMeUringCmd{}) > SQECmdLen {
		t.Fatal("nvme_uring_cmd does not fit the command area")
	}
	if off := unsafe.Offsetof(CQE32{}.Big); off != 16 {
		t.Fatalf("big_cqe at %d, want 16", off)
	}
}
