package nvme

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rbctl/rbctl/internal/sys"
	"github.com/rbctl/rbctl/internal/uring"
)

// UringCmdOptions configure OpenUringCmd.
type UringCmdOptions struct {
	// QueueDepth is how many I/O commands each ring keeps in flight (default 32).
	QueueDepth int
	// Rings is the number of I/O rings, each owned by its own goroutine; concurrent IO calls
	// are spread over them (default 1).
	Rings int
	// NSID, when set, must match what NVME_IOCTL_ID reports for the namespace device.
	NSID uint32
	// AdminIoctl sends admin commands with NVME_IOCTL_ADMIN_CMD instead of a URING_CMD ring
	// on the controller device.
	AdminIoctl bool
}

// UringCmdTransport carries NVMe commands over io_uring IORING_OP_URING_CMD: I/O on the
// namespace generic char device /dev/ngXnY (NVME_URING_CMD_IO), admin on the controller
// /dev/nvmeX (NVME_URING_CMD_ADMIN; the ng device answers ENOTTY for admin), falling back to
// the NVME_IOCTL_ADMIN_CMD ioctl when the controller ring is unavailable. Rings are set up
// with SQE128|CQE32: the 72-byte struct nvme_uring_cmd goes into the SQE command area, and
// the CQE carries the NVMe status in res and the command result in big_cqe[0].
type UringCmdTransport struct {
	fb     *IoctlTransport // node discovery, NSID, and the admin fallback
	ns     *os.File
	ctrl   *os.File
	io     []*uring.Executor
	adm    *uring.Executor
	admOff atomic.Bool // the controller ring refused admin commands: use the ioctl
	rr     atomic.Uint32
	nsid   uint32

	regMu    sync.Mutex
	regs     atomic.Pointer[uring.BufferTable] // registered buffers
	fixedOff atomic.Bool                       // fixed commands failed with EINVAL and plain ones worked: stop using fixed

	mu     sync.RWMutex // shared by commands, exclusive by Close
	closed bool
}

var _ Transport = (*UringCmdTransport)(nil)

// uringCmdRingOptions is the ring setup for NVMe passthrough: both big-entry flags are
// mandatory (the driver returns EOPNOTSUPP otherwise).
func uringCmdRingOptions() uring.Options {
	return uring.Options{SQE128: true, CQE32: true, SingleIssuer: true, DeferTaskrun: true, BestEffort: true}
}

// OpenUringCmd opens an NVMe namespace for URING_CMD passthrough. nsPath is the generic char
// device /dev/ngXnY (a block device /dev/nvmeXnY is mapped to its ng sibling).
func OpenUringCmd(nsPath string, opt UringCmdOptions) (*UringCmdTransport, error) {
	if opt.QueueDepth <= 0 {
		opt.QueueDepth = 32
	}
	if opt.Rings <= 0 {
		opt.Rings = 1
	}
	if fi, err := os.Stat(nsPath); err == nil && fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0 {
		base := filepath.Base(nsPath)
		if strings.HasPrefix(base, "nvme") && strings.Contains(base, "n") {
			ng := filepath.Join(filepath.Dir(nsPath), "ng"+strings.TrimPrefix(base, "nvme"))
			if _, err := os.Stat(ng); err == nil {
				nsPath = ng
			}
		}
	}
	fb, err := OpenIoctl(nsPath, IoctlOptions{NSID: opt.NSID, Workers: 1})
	if err != nil {
		return nil, err
	}
	nodes := fb.Nodes()
	if nodes.Namespace == "" {
		fb.Close()
		return nil, fmt.Errorf("nvme: %s is a controller; URING_CMD I/O needs the namespace char device /dev/ngXnY", nsPath)
	}
	t := &UringCmdTransport{fb: fb, nsid: fb.NSID()}
	fail := func(err error) (*UringCmdTransport, error) {
		t.closeAll()
		return nil, err
	}
	if t.ns, err = os.OpenFile(nsPath, os.O_RDWR, 0); err != nil {
		return fail(fmt.Errorf("nvme: %w", err))
	}
	for i := 0; i < opt.Rings; i++ {
		e, err := uring.NewExecutor(uringCmdRingOptions(), opt.QueueDepth)
		if err != nil {
			return fail(fmt.Errorf("nvme: URING_CMD ring: %w", err))
		}
		t.io = append(t.io, e)
		if err := e.Do(func(r *uring.Ring) error { return r.RequireOp(sys.IORING_OP_URING_CMD) }); err != nil {
			return fail(fmt.Errorf("nvme: %w", err))
		}
	}
	if !opt.AdminIoctl && nodes.Controller != "" {
		if cf, err := os.OpenFile(nodes.Controller, os.O_RDWR, 0); err == nil {
			if e, err := uring.NewExecutor(uringCmdRingOptions(), 4); err == nil {
				t.ctrl, t.adm = cf, e
			} else {
				cf.Close()
			}
		}
	}
	return t, nil
}

// NSID implements Transport.
func (t *UringCmdTransport) NSID() uint32 { return t.nsid }

// Nodes reports the device paths in use.
func (t *UringCmdTransport) Nodes() DeviceNodes {
	n := t.fb.Nodes()
	if t.adm != nil && !t.admOff.Load() {
		n.AdminVia = n.Controller + " (io_uring NVME_URING_CMD_ADMIN)"
	}
	return n
}

// MaxTransferBytes implements TransferLimiter (the kernel queue's per-command limit).
func (t *UringCmdTransport) MaxTransferBytes() int { return t.fb.MaxTransferBytes() }

// RegisterBuffers registers bufs with every I/O ring as fixed buffers 0..n-1; a Command whose
// BufIndex names one (and whose Data lies inside it) is sent with IORING_URING_CMD_FIXED.
// Buffers must come from blockdev.Alloc and outlive the transport.
func (t *UringCmdTransport) RegisterBuffers(bufs [][]byte) error {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return ErrClosed
	}
	table, err := uring.NewBufferTable(bufs)
	if err != nil {
		return fmt.Errorf("nvme: %w", err)
	}
	t.regMu.Lock()
	defer t.regMu.Unlock()
	t.regs.Store(nil)
	for _, e := range t.io {
		if err := e.Do(table.Register); err != nil {
			return fmt.Errorf("nvme: %w", err)
		}
	}
	t.regs.Store(table)
	return nil
}

// fixedIndex is c.BufIndex when the registered buffer it names holds c.Data.
func fixedIndex(regs *uring.BufferTable, c *Command) (uint16, bool) {
	if !regs.Holds(c.BufIndex, c.Data) {
		return 0, false
	}
	return uint16(c.BufIndex), true
}

// prepUringCmd lays c out as struct nvme_uring_cmd in the SQE's command area and fills the
// SQE for IORING_OP_URING_CMD with cmdOp. fixed selects IORING_URING_CMD_FIXED + bufIndex.
func prepUringCmd(sqe uring.SQE, fd int32, cmdOp uint32, c *Command, fixed bool, bufIndex uint16) {
	area := sqe.PrepUringCmd(fd, cmdOp)
	uc := (*sys.NVMeUringCmd)(unsafe.Pointer(&area[0])) // area is 8-byte aligned (SQE + 48)
	*uc = sys.NVMeUringCmd{
		Opcode: c.Opcode, Flags: c.Flags, NSID: c.NSID, CDW2: c.CDW2, CDW3: c.CDW3,
		DataLen: uint32(len(c.Data)), MetadataLen: uint32(len(c.Metadata)),
		CDW10: c.CDW10, CDW11: c.CDW11, CDW12: c.CDW12, CDW13: c.CDW13, CDW14: c.CDW14, CDW15: c.CDW15,
		TimeoutMs: c.TimeoutMs,
	}
	if len(c.Data) > 0 {
		uc.Addr = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(c.Data))))
	}
	if len(c.Metadata) > 0 {
		uc.Metadata = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(c.Metadata))))
	}
	if fixed {
		sqe.SetOpFlags(sys.IORING_URING_CMD_FIXED)
		sqe.SetBufIndex(bufIndex)
	}
}

// uringCompletion decodes a URING_CMD CQE: res is 0, an NVMe status (> 0) or -errno; big[0]
// is the command's 64-bit result (CQE DW0 in the low half).
func uringCompletion(res int32, big [2]uint64) Completion {
	switch {
	case res < 0:
		return Completion{Err: unix.Errno(-res), Result: big[0]}
	case res > 0xffff:
		return Completion{Err: fmt.Errorf("nvme: URING_CMD returned out-of-range status %#x", res), Result: big[0]}
	default:
		return Completion{Status: Status(res), Result: big[0]}
	}
}

// cmdBatch adapts a command slice to uring.Batch.
type cmdBatch struct {
	fd    int32
	cmdOp uint32
	cmds  []Command
	done  []Completion
	regs  *uring.BufferTable
}

func (b *cmdBatch) Len() int { return len(b.cmds) }

func (b *cmdBatch) Prep(i int, sqe uring.SQE) {
	c := &b.cmds[i]
	idx, fixed := fixedIndex(b.regs, c)
	prepUringCmd(sqe, b.fd, b.cmdOp, c, fixed, idx)
}

func (b *cmdBatch) Complete(i int, c uring.CQE) bool {
	b.done[i] = uringCompletion(c.Res, c.Big())
	return false
}

func pinCommands(pin *runtime.Pinner, cmds []Command) {
	for i := range cmds {
		if len(cmds[i].Data) > 0 {
			pin.Pin(unsafe.SliceData(cmds[i].Data)) // no-op for blockdev.Alloc memory
		}
		if len(cmds[i].Metadata) > 0 {
			pin.Pin(unsafe.SliceData(cmds[i].Metadata))
		}
	}
}

// IO implements Transport: the batch goes to one ring, which keeps up to QueueDepth
// commands in flight and submits as many per io_uring_enter as are ready.
func (t *UringCmdTransport) IO(cmds []Command, done []Completion) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		for i := range cmds {
			done[i] = Completion{Err: ErrClosed}
		}
		return
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	pinCommands(&pin, cmds)
	var regs *uring.BufferTable
	if !t.fixedOff.Load() {
		regs = t.regs.Load()
	}
	b := &cmdBatch{fd: int32(t.ns.Fd()), cmdOp: sys.NVME_URING_CMD_IO, cmds: cmds, done: done[:len(cmds)], regs: regs}
	e := t.io[int(t.rr.Add(1))%len(t.io)]
	if err := e.Run(b); err != nil {
		for i := range cmds {
			done[i] = Completion{Err: err}
		}
		return
	}
	if regs != nil {
		t.retryFixedEINVAL(e, cmds, done, regs)
	}
}

// retryFixedEINVAL resends, as plain commands, the fixed-buffer commands the kernel refused
// with EINVAL. Linux 6.1 (and other kernels before the fix that trimmed the iterator of a
// fixed buffer to the transfer) counts every page from the data's offset to the end of the
// registered buffer as a segment and refuses the request when that exceeds the queue's
// max_segments — so a large registered pool fails with EINVAL where a plain pointer works.
// When the plain resend succeeds, fixed buffers are turned off for this transport.
func (t *UringCmdTransport) retryFixedEINVAL(e *uring.Executor, cmds []Command, done []Completion, regs *uring.BufferTable) {
	var idx []int
	for i := range cmds {
		if _, fixed := fixedIndex(regs, &cmds[i]); fixed && errors.Is(done[i].Err, unix.EINVAL) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return
	}
	rc := make([]Command, len(idx))
	rd := make([]Completion, len(idx))
	for j, i := range idx {
		rc[j] = cmds[i]
		rc[j].BufIndex = -1
	}
	rb := &cmdBatch{fd: int32(t.ns.Fd()), cmdOp: sys.NVME_URING_CMD_IO, cmds: rc, done: rd}
	if err := e.Run(rb); err != nil {
		return
	}
	ok := false
	for j, i := range idx {
		if rd[j].Err == nil {
			ok = true
		}
		done[i] = rd[j]
	}
	if ok {
		t.fixedOff.Store(true)
	}
}

// RingTiming sums where the I/O rings' batches spent their time (uring.Executor.Timing; the
// controller ring's admin commands are not counted).
func (t *UringCmdTransport) RingTiming() (uring.Timing, bool) {
	var s uring.Timing
	for _, e := range t.io {
		s = s.Plus(e.Timing())
	}
	return s, true
}

// FixedDisabled reports whether the transport stopped using fixed buffers because the
// kernel refused them (see retryFixedEINVAL).
func (t *UringCmdTransport) FixedDisabled() bool { return t.fixedOff.Load() }

// Admin implements Transport: NVME_URING_CMD_ADMIN on the controller ring, or the ioctl.
func (t *UringCmdTransport) Admin(c *Command) Completion {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return Completion{Err: ErrClosed}
	}
	if t.adm != nil && !t.admOff.Load() {
		var pin runtime.Pinner
		cmds := []Command{*c}
		done := make([]Completion, 1)
		pinCommands(&pin, cmds)
		b := &cmdBatch{fd: int32(t.ctrl.Fd()), cmdOp: sys.NVME_URING_CMD_ADMIN, cmds: cmds, done: done}
		err := t.adm.Run(b)
		pin.Unpin()
		if err == nil {
			if !errors.Is(done[0].Err, unix.ENOTTY) && !errors.Is(done[0].Err, unix.EOPNOTSUPP) {
				return done[0]
			}
			t.admOff.Store(true) // this kernel/device has no admin uring_cmd: stay on the ioctl
		}
	}
	return t.fb.Admin(c)
}

func (t *UringCmdTransport) closeAll() error {
	for _, e := range t.io {
		e.Close()
	}
	if t.adm != nil {
		t.adm.Close()
	}
	var err error
	for _, f := range []*os.File{t.ns, t.ctrl} {
		if f != nil {
			if e := f.Close(); err == nil {
				err = e
			}
		}
	}
	if e := t.fb.Close(); err == nil {
		err = e
	}
	return err
}

// Close implements Transport after the commands in flight have completed.
func (t *UringCmdTransport) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	return t.closeAll()
}
