package sys

import "unsafe"

// io_uring ABI from include/uapi/linux/io_uring.h. Values are part of the kernel ABI and never
// change; the comment after each flag names the kernel that introduced it.

// Setup flags (io_uring_params.flags).
const (
	IORING_SETUP_IOPOLL        = 1 << 0  // 5.1
	IORING_SETUP_SQPOLL        = 1 << 1  // 5.1 (unprivileged since 5.11)
	IORING_SETUP_SQ_AFF        = 1 << 2  // 5.1
	IORING_SETUP_CQSIZE        = 1 << 3  // 5.5
	IORING_SETUP_CLAMP         = 1 << 4  // 5.6
	IORING_SETUP_ATTACH_WQ     = 1 << 5  // 5.6
	IORING_SETUP_R_DISABLED    = 1 << 6  // 5.10
	IORING_SETUP_SUBMIT_ALL    = 1 << 7  // 5.18
	IORING_SETUP_COOP_TASKRUN  = 1 << 8  // 5.19
	IORING_SETUP_TASKRUN_FLAG  = 1 << 9  // 5.19
	IORING_SETUP_SQE128        = 1 << 10 // 5.19
	IORING_SETUP_CQE32         = 1 << 11 // 5.19
	IORING_SETUP_SINGLE_ISSUER = 1 << 12 // 6.0
	IORING_SETUP_DEFER_TASKRUN = 1 << 13 // 6.1
	IORING_SETUP_NO_MMAP       = 1 << 14 // 6.5
	IORING_SETUP_NO_SQARRAY    = 1 << 16 // 6.6
)

// Features reported in io_uring_params.features.
const (
	IORING_FEAT_SINGLE_MMAP     = 1 << 0 // 5.4
	IORING_FEAT_NODROP          = 1 << 1 // 5.5
	IORING_FEAT_SUBMIT_STABLE   = 1 << 2 // 5.5
	IORING_FEAT_RW_CUR_POS      = 1 << 3
	IORING_FEAT_CUR_PERSONALITY = 1 << 4
	IORING_FEAT_FAST_POLL       = 1 << 5
	IORING_FEAT_POLL_32BITS     = 1 << 6
	IORING_FEAT_SQPOLL_NONFIXED = 1 << 7 // 5.11
	IORING_FEAT_EXT_ARG         = 1 << 8
	IORING_FEAT_NATIVE_WORKERS  = 1 << 9
	IORING_FEAT_RSRC_TAGS       = 1 << 10
	IORING_FEAT_CQE_SKIP        = 1 << 11
	IORING_FEAT_LINKED_FILE     = 1 << 12
	IORING_FEAT_REG_REG_RING    = 1 << 13
)

// Opcodes (enum io_uring_op).
const (
	IORING_OP_NOP         = 0
	IORING_OP_READV       = 1
	IORING_OP_WRITEV      = 2
	IORING_OP_FSYNC       = 3
	IORING_OP_READ_FIXED  = 4
	IORING_OP_WRITE_FIXED = 5
	IORING_OP_POLL_ADD    = 6
	IORING_OP_TIMEOUT     = 11 // 5.4
	IORING_OP_FALLOCATE   = 17
	IORING_OP_READ        = 22 // 5.6
	IORING_OP_WRITE       = 23 // 5.6
	IORING_OP_URING_CMD   = 46 // 5.19
)

// SQE flags (io_uring_sqe.flags).
const (
	IOSQE_FIXED_FILE       = 1 << 0
	IOSQE_IO_DRAIN         = 1 << 1
	IOSQE_IO_LINK          = 1 << 2
	IOSQE_IO_HARDLINK      = 1 << 3
	IOSQE_ASYNC            = 1 << 4
	IOSQE_BUFFER_SELECT    = 1 << 5
	IOSQE_CQE_SKIP_SUCCESS = 1 << 6
)

// Per-op flags.
const (
	IORING_FSYNC_DATASYNC  = 1 << 0 // fsync_flags
	IORING_URING_CMD_FIXED = 1 << 0 // uring_cmd_flags: addr lies in registered buffer buf_index (6.1)
)

// SQ ring flags (the word at sq_off.flags).
const (
	IORING_SQ_NEED_WAKEUP = 1 << 0
	IORING_SQ_CQ_OVERFLOW = 1 << 1
	IORING_SQ_TASKRUN     = 1 << 2
)

// CQ ring flags (the word at cq_off.flags, written by the application).
const IORING_CQ_EVENTFD_DISABLED = 1 << 0 // 5.8

// io_uring_enter flags.
const (
	IORING_ENTER_GETEVENTS       = 1 << 0
	IORING_ENTER_SQ_WAKEUP       = 1 << 1
	IORING_ENTER_SQ_WAIT         = 1 << 2
	IORING_ENTER_EXT_ARG         = 1 << 3
	IORING_ENTER_REGISTERED_RING = 1 << 4
)

// io_uring_register opcodes.
const (
	IORING_REGISTER_BUFFERS      = 0
	IORING_UNREGISTER_BUFFERS    = 1
	IORING_REGISTER_FILES        = 2
	IORING_UNREGISTER_FILES      = 3
	IORING_REGISTER_EVENTFD      = 4 // 5.1
	IORING_UNREGISTER_EVENTFD    = 5
	IORING_REGISTER_PROBE        = 8
	IORING_REGISTER_ENABLE_RINGS = 12
)

// IO_URING_OP_SUPPORTED is set in io_uring_probe_op.flags for opcodes the kernel implements.
const IO_URING_OP_SUPPORTED = 1 << 0

// mmap offsets of the three regions.
const (
	IORING_OFF_SQ_RING = 0
	IORING_OFF_CQ_RING = 0x8000000
	IORING_OFF_SQES    = 0x10000000
)

// SQRingOffsets is struct io_sqring_offsets (40 bytes).
type SQRingOffsets struct {
	Head        uint32
	Tail        uint32
	RingMask    uint32
	RingEntries uint32
	Flags       uint32
	Dropped     uint32
	Array       uint32
	Resv1       uint32
	UserAddr    uint64 // resv2 before 6.5
}

// CQRingOffsets is struct io_cqring_offsets (40 bytes).
type CQRingOffsets struct {
	Head        uint32
	Tail        uint32
	RingMask    uint32
	RingEntries uint32
	Overflow    uint32
	CQEs        uint32
	Flags       uint32
	Resv1       uint32
	UserAddr    uint64 // resv2 before 6.5
}

// IoUringParams is struct io_uring_params (120 bytes).
type IoUringParams struct {
	SQEntries    uint32
	CQEntries    uint32
	Flags        uint32
	SQThreadCPU  uint32
	SQThreadIdle uint32
	Features     uint32
	WQFd         uint32
	Resv         [3]uint32
	SQOff        SQRingOffsets
	CQOff        CQRingOffsets
}

// SQE is the 64-byte struct io_uring_sqe. Unions are given the name of their most common
// member; see the accessors in internal/uring for the others.
type SQE struct {
	Opcode      uint8  // @0
	Flags       uint8  // @1
	IOPrio      uint16 // @2
	Fd          int32  // @4
	Off         uint64 // @8: off / addr2 / {cmd_op u32 @8, __pad1 u32 @12}
	Addr        uint64 // @16
	Len         uint32 // @24
	OpFlags     uint32 // @28: rw_flags / fsync_flags / uring_cmd_flags / ...
	UserData    uint64 // @32
	BufIndex    uint16 // @40: buf_index / buf_group
	Personality uint16 // @42
	SpliceFdIn  int32  // @44: splice_fd_in / file_index / addr_len
	Addr3       uint64 // @48: start of cmd[] with SQE128
	Pad2        uint64 // @56
}

// SQE128 is one slot of a ring set up with IORING_SETUP_SQE128: a base SQE whose last 16
// bytes, followed by 64 more, form the 80-byte command area cmd[] at offset 48.
type SQE128 struct {
	SQE
	Ext [64]byte
}

// SQECmdOff and SQECmdLen locate cmd[] in an SQE128 slot.
const (
	SQECmdOff = 48
	SQECmdLen = 80
)

// CQE is the 16-byte struct io_uring_cqe.
type CQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// CQE32 is one entry of a ring set up with IORING_SETUP_CQE32: big_cqe[0..1] follow the base.
type CQE32 struct {
	CQE
	Big [2]uint64
}

// Iovec is struct iovec.
type Iovec struct {
	Base uintptr
	Len  uint64
}

// ProbeHeader is struct io_uring_probe without its flexible ops[] array (16 bytes).
type ProbeHeader struct {
	LastOp uint8
	OpsLen uint8
	Resv   uint16
	Resv2  [3]uint32
}

// ProbeOp is struct io_uring_probe_op (8 bytes).
type ProbeOp struct {
	Op    uint8
	Resv  uint8
	Flags uint16
	Resv2 uint32
}

// Compile-time layout checks: each line fails to compile if the Go layout drifts from C.
var (
	_ [40]byte  = [unsafe.Sizeof(SQRingOffsets{})]byte{}
	_ [40]byte  = [unsafe.Sizeof(CQRingOffsets{})]byte{}
	_ [120]byte = [unsafe.Sizeof(IoUringParams{})]byte{}
	_ [64]byte  = [unsafe.Sizeof(SQE{})]byte{}
	_ [128]byte = [unsafe.Sizeof(SQE128{})]byte{}
	_ [16]byte  = [unsafe.Sizeof(CQE{})]byte{}
	_ [32]byte  = [unsafe.Sizeof(CQE32{})]byte{}
	_ [16]byte  = [unsafe.Sizeof(Iovec{})]byte{}
	_ [16]byte  = [unsafe.Sizeof(ProbeHeader{})]byte{}
	_ [8]byte   = [unsafe.Sizeof(ProbeOp{})]byte{}
	_ [48]byte  = [unsafe.Offsetof(SQE{}.Addr3)]byte{}
	_ [40]byte  = [unsafe.Offsetof(SQE{}.BufIndex)]byte{}
	_ [32]byte  = [unsafe.Offsetof(SQE{}.UserData)]byte{}
	_ [40]byte  = [unsafe.Offsetof(IoUringParams{}.SQOff)]byte{}
	_ [80]byte  = [unsafe.Offsetof(IoUringParams{}.CQOff)]byte{}
)
