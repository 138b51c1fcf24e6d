package probe

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// passthruCmd is struct nvme_passthru_cmd (include/uapi/linux/nvme_ioctl.h).
type passthruCmd struct {
	Opcode      uint8
	Flags       uint8
	_           uint16
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
	Result      uint32
}

var _ [72]byte = [unsafe.Sizeof(passthruCmd{})]byte{}

const (
	ioctlNVMeID       = 0x00004E40 // _IO('N', 0x40)
	ioctlNVMeAdminCmd = 0xC0484E41 // _IOWR('N', 0x41, struct nvme_passthru_cmd)

	opIdentify = 0x06
	cnsNS      = 0x00
	cnsCtrl    = 0x01
)

// StatusError is a non-zero NVMe status returned by the admin ioctl.
type StatusError uint32

func (s StatusError) Error() string {
	return fmt.Sprintf("nvme status 0x%04x (SCT %d SC 0x%02x)", uint32(s), (s>>8)&7, s&0xff)
}

// NamespaceID returns the NSID behind a namespace device (/dev/ngXnY or /dev/nvmeXnY).
func NamespaceID(f *os.File) (uint32, error) {
	id, err := unix.IoctlRetInt(int(f.Fd()), ioctlNVMeID)
	if err != nil {
		return 0, fmt.Errorf("NVME_IOCTL_ID on %s: %w", f.Name(), err)
	}
	return uint32(id), nil
}

// IdentifyController issues Identify CNS 1 on a controller or namespace device.
func IdentifyController(f *os.File) ([]byte, error) { return identify(f, 0, cnsCtrl) }

// IdentifyNamespace issues Identify CNS 0 for nsid.
func IdentifyNamespace(f *os.File, nsid uint32) ([]byte, error) { return identify(f, nsid, cnsNS) }

func identify(f *os.File, nsid uint32, cns uint32) ([]byte, error) {
	buf := make([]byte, IdentifySize)
	cmd := passthruCmd{
		Opcode:    opIdentify,
		NSID:      nsid,
		Addr:      uint64(uintptr(unsafe.Pointer(&buf[0]))),
		DataLen:   IdentifySize,
		CDW10:     cns,
		TimeoutMs: 10000,
	}
	// Go's heap does not move objects; KeepAlive keeps buf alive until the kernel is done
	// with the pointer hidden in cmd.Addr.
	r, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), ioctlNVMeAdminCmd, uintptr(unsafe.Pointer(&cmd)))
	runtime.KeepAlive(buf)
	if errno != 0 {
		return nil, fmt.Errorf("identify CNS %d on %s: %w", cns, f.Name(), errno)
	}
	if r != 0 {
		return nil, fmt.Errorf("identify CNS %d on %s: %w", cns, f.Name(), StatusError(r))
	}
	return buf, nil
}
