package uring

import (
	"sync/atomic"
	"unsafe"

	"github.com/rbctl/rbctl/internal/sys"
)

// SQE is a handle on one submission queue entry in the ring's shared memory, valid from
// GetSQE until the next Submit. It is zeroed when handed out.
type SQE struct {
	p   *sys.SQE
	big bool // ring has SQE128
}

// GetSQE hands out the next free SQE, or ok=false when the SQ is full (Submit, then retry).
func (r *Ring) GetSQE() (sqe SQE, ok bool) {
	head := atomic.LoadUint32(r.sqHead)
	if r.sqeTail-head >= r.sqEntries {
		return SQE{}, false
	}
	p := unsafe.Add(r.sqes, uintptr(r.sqeTail&r.sqMask)<<r.sqeShift)
	clear(unsafe.Slice((*byte)(p), 1<<r.sqeShift))
	r.sqeTail++
	return SQE{p: (*sys.SQE)(p), big: r.sqeShift == 7}, true
}

// Valid reports whether the handle refers to an entry.
func (s SQE) Valid() bool { return s.p != nil }

// Raw is the base 64-byte entry.
func (s SQE) Raw() *sys.SQE { return s.p }

// Bytes is the whole entry: 64 bytes, or 128 with SQE128.
func (s SQE) Bytes() []byte {
	n := 64
	if s.big {
		n = 128
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(s.p)), n)
}

// Cmd is the command area at offset 48: 80 bytes with SQE128 (where struct nvme_uring_cmd
// goes), 16 bytes (addr3 and pad) otherwise.
func (s SQE) Cmd() []byte {
	n := 16
	if s.big {
		n = sys.SQECmdLen
	}
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(s.p), sys.SQECmdOff)), n)
}

func (s SQE) SetOpcode(op uint8)      { s.p.Opcode = op }
func (s SQE) SetFlags(f uint8)        { s.p.Flags = f }
func (s SQE) SetIOPrio(p uint16)      { s.p.IOPrio = p }
func (s SQE) SetFd(fd int32)          { s.p.Fd = fd }
func (s SQE) SetOff(off uint64)       { s.p.Off = off }
func (s SQE) SetAddr(a uint64)        { s.p.Addr = a }
func (s SQE) SetLen(n uint32)         { s.p.Len = n }
func (s SQE) SetOpFlags(f uint32)     { s.p.OpFlags = f } // rw_flags, fsync_flags, uring_cmd_flags, ...
func (s SQE) SetUserData(u uint64)    { s.p.UserData = u }
func (s SQE) SetBufIndex(i uint16)    { s.p.BufIndex = i }
func (s SQE) SetPersonality(p uint16) { s.p.Personality = p }
func (s SQE) SetCmdOp(op uint32)      { *(*uint32)(unsafe.Pointer(&s.p.Off)) = op } // cmd_op @8 (LE low half of off)
func (s SQE) UserData() uint64        { return s.p.UserData }
func (s SQE) Opcode() uint8           { return s.p.Opcode }

func addrOf(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

// PrepNop prepares IORING_OP_NOP.
func (s SQE) PrepNop() { s.p.Opcode = sys.IORING_OP_NOP; s.p.Fd = -1 }

func (s SQE) prepRW(op uint8, fd int32, addr uint64, n uint32, off uint64) {
	s.p.Opcode, s.p.Fd, s.p.Addr, s.p.Len, s.p.Off = op, fd, addr, n, off
}

// PrepRead prepares IORING_OP_READ of len(buf) bytes at off into buf (which must not move:
// off-heap or pinned until completion).
func (s SQE) PrepRead(fd int32, buf []byte, off uint64) {
	s.prepRW(sys.IORING_OP_READ, fd, addrOf(buf), uint32(len(buf)), off)
}

// PrepWrite prepares IORING_OP_WRITE of buf at off.
func (s SQE) PrepWrite(fd int32, buf []byte, off uint64) {
	s.prepRW(sys.IORING_OP_WRITE, fd, addrOf(buf), uint32(len(buf)), off)
}

// PrepWritev prepares IORING_OP_WRITEV of the n iovecs at iov (pairs of base address and
// length, as struct iovec lays them out) at off. The iovec array need only stay put until
// the SQE is submitted (IORING_FEAT_SUBMIT_STABLE, 5.5); the buffers until completion.
func (s SQE) PrepWritev(fd int32, iov []uint64, off uint64) {
	s.prepRW(sys.IORING_OP_WRITEV, fd, uint64(uintptr(unsafe.Pointer(unsafe.SliceData(iov)))), uint32(len(iov)/2), off)
}

// PrepReadFixed prepares IORING_OP_READ_FIXED: buf must lie inside registered buffer idx.
func (s SQE) PrepReadFixed(fd int32, buf []byte, off uint64, idx uint16) {
	s.prepRW(sys.IORING_OP_READ_FIXED, fd, addrOf(buf), uint32(len(buf)), off)
	s.p.BufIndex = idx
}

// PrepWriteFixed prepares IORING_OP_WRITE_FIXED: buf must lie inside registered buffer idx.
func (s SQE) PrepWriteFixed(fd int32, buf []byte, off uint64, idx uint16) {
	s.prepRW(sys.IORING_OP_WRITE_FIXED, fd, addrOf(buf), uint32(len(buf)), off)
	s.p.BufIndex = idx
}

// PrepFsync prepares IORING_OP_FSYNC (flags: 0 or sys.IORING_FSYNC_DATASYNC).
func (s SQE) PrepFsync(fd int32, flags uint32) {
	s.p.Opcode, s.p.Fd, s.p.OpFlags = sys.IORING_OP_FSYNC, fd, flags
}

// PrepUringCmd prepares IORING_OP_URING_CMD with cmd_op and returns the command area for the
// caller to fill (80 bytes on an SQE128 ring).
func (s SQE) PrepUringCmd(fd int32, cmdOp uint32) []byte {
	s.p.Opcode, s.p.Fd = sys.IORING_OP_URING_CMD, fd
	s.SetCmdOp(cmdOp)
	return s.Cmd()
}

// SQReady is the number of SQEs handed out and not yet consumed by the kernel.
func (r *Ring) SQReady() uint32 { return r.sqeTail - atomic.LoadUint32(r.sqHead) }

// SQSpace is the number of SQEs GetSQE can still hand out.
func (r *Ring) SQSpace() uint32 { return r.sqEntries - r.SQReady() }
