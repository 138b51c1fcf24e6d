package nvme

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/internal/uring"
	"github.com/rbctl/rbctl/placement"
)

// DeviceOptions configure NewDevice.
type DeviceOptions struct {
	Path string        // shown in Info (default "nvme nsid N")
	Kind blockdev.Kind // default blockdev.KindNVMeChar (the emulator passes KindEmulated)
	// PIDs maps placement handle index i (blockdev.Op.Handle) to the placement identifier
	// PIDs[i], sent as DTYPE=2/DSPEC=PID on writes. Empty: handles are ignored and writes
	// carry no directive. Package fdp fills it from the RUH status.
	PIDs []uint16
	// MaxTransfer caps the bytes of one Read/Write command (0: Namespace.MaxTransfer from
	// Probe). It is rounded down to a multiple of the block size.
	MaxTransfer int
	// FUA sets Force Unit Access on every write.
	FUA bool
	// KeepTransport: Close does not close the transport (the caller owns it).
	KeepTransport bool
	// ReadOnly refuses writes and deallocation (ErrReadOnly) before anything is sent.
	ReadOnly bool
}

// Device is a blockdev.Device over any Transport: NVMe Read/Write for slots, DTYPE=2/DSPEC
// for placement handles, Dataset Management for Deallocate and NVMe Flush for Flush.
type Device struct {
	t    Transport
	ns   *Namespace
	opt  DeviceOptions
	info blockdev.Info
	pids []uint16
	xfer int // bytes per command, a multiple of the block size

	reg atomic.Pointer[uring.BufferTable] // buffers registered with the transport

	closeOnce sync.Once
	closeErr  error
}

var _ blockdev.Device = (*Device)(nil)
var _ blockdev.BufferRegistrar = (*Device)(nil)
var _ blockdev.RingTimed = (*Device)(nil)

// RingTiming is where the transport's io_uring batches spent their time (blockdev.RingTimed):
// the URING_CMD transport's; not ok over a transport without rings (the ioctl one).
func (d *Device) RingTiming() (blockdev.RingTiming, bool) {
	if rt, ok := d.t.(blockdev.RingTimed); ok {
		return rt.RingTiming()
	}
	return blockdev.RingTiming{}, false
}

var (
	// ErrBadHandle: a write's placement handle has no entry in the PID table.
	ErrBadHandle = errors.New("nvme: placement handle has no placement identifier")
	// ErrReadOnly: a write or deallocate on a device opened read-only.
	ErrReadOnly = errors.New("nvme: device opened read-only")
)

// NewDevice identifies the transport's namespace and returns a Device over it. It refuses
// namespaces whose LBA format carries metadata (ErrMetadataFormat).
func NewDevice(t Transport, opt DeviceOptions) (*Device, error) {
	ns, err := Probe(t)
	if err != nil {
		return nil, err
	}
	if err := ns.CheckNoMetadata(); err != nil {
		return nil, err
	}
	if opt.Kind == "" {
		opt.Kind = blockdev.KindNVMeChar
	}
	if opt.Path == "" {
		opt.Path = sprintf("nvme nsid %d", ns.NSID)
	}
	xfer := ns.MaxTransfer
	if opt.MaxTransfer > 0 && opt.MaxTransfer < xfer {
		xfer = opt.MaxTransfer
	}
	xfer = min(xfer, MaxNLB*ns.BlockSize)
	xfer -= xfer % ns.BlockSize
	if xfer < ns.BlockSize {
		xfer = ns.BlockSize
	}
	d := &Device{t: t, ns: ns, opt: opt, xfer: xfer, pids: append([]uint16(nil), opt.PIDs...)}
	d.info = blockdev.Info{
		Path:         opt.Path,
		Kind:         opt.Kind,
		Size:         ns.Capacity,
		LogicalBlock: ns.BlockSize,
		MaxTransfer:  xfer,
		Direct:       true,
		Handles:      len(d.pids),
		Deallocate:   ns.Ctrl.DSMSupported(),
	}
	return d, nil
}

// Info describes the namespace: size and block size from Identify, Handles = len(PIDs).
func (d *Device) Info() blockdev.Info { return d.info }

// Namespace is what Identify said.
func (d *Device) Namespace() *Namespace { return d.ns }

// Transport is the transport commands go through.
func (d *Device) Transport() Transport { return d.t }

// PlacementIDs returns the handle → PID table.
func (d *Device) PlacementIDs() []uint16 { return append([]uint16(nil), d.pids...) }

// bufIndex is the registered buffer holding p, or -1.
func (d *Device) bufIndex(p []byte) int {
	if i, ok := d.reg.Load().Lookup(p); ok {
		return int(i)
	}
	return -1
}

// RegisterBuffers registers the engine's buffers with the transport when it supports
// registered buffers (io_uring fixed buffers); commands whose data lies inside one then carry
// its index. A transport without registration ignores the call.
func (d *Device) RegisterBuffers(bufs [][]byte) error {
	r, ok := d.t.(blockdev.BufferRegistrar)
	if !ok {
		return nil
	}
	table, err := uring.NewBufferTable(bufs)
	if err != nil {
		return fmt.Errorf("nvme: %w", err)
	}
	if err := r.RegisterBuffers(bufs); err != nil {
		return err
	}
	d.reg.Store(table)
	return nil
}

// pidFor maps a write's placement handle to the placement identifier its DSPEC carries:
// ok is false for placement.None and for a device without a PID table (handles are ignored
// there); a handle outside the table is ErrBadHandle. This is the only place a handle
// becomes a PID.
func (d *Device) pidFor(h placement.Handle) (pid uint16, ok bool, err error) {
	if h == placement.None || len(d.pids) == 0 {
		return 0, false, nil
	}
	if h < 0 || int(h) >= len(d.pids) {
		return 0, false, fmt.Errorf("%w: handle %d, the table has %d (0..%d)", ErrBadHandle, h, len(d.pids), len(d.pids)-1)
	}
	return d.pids[h], true, nil
}

type piece struct {
	op  int
	off int // offset of the piece within the op's buffer
	n   int
}

// VectoredWrites implements blockdev.VectoredWriter: a write with a Tail is sent as the
// commands for Buf followed by those for Tail (a header command and the payload's, as
// LMCache's put writes two entries per key), each with the op's placement. A command never
// spans both, so each keeps a registered buffer's index when its memory is registered.
func (d *Device) VectoredWrites() bool { return true }

// Submit performs the ops as NVMe Read/Write commands of at most Info().MaxTransfer bytes,
// all in one transport batch. Writes with a handle < len(PIDs) carry DTYPE=2/DSPEC=PID.
func (d *Device) Submit(ops []blockdev.Op) error {
	bs := d.ns.BlockSize
	cmds := make([]Command, 0, len(ops))
	pieces := make([]piece, 0, len(ops))
	var first error
	var pin runtime.Pinner // Buf and Tail may be the caller's Go memory: pinned until the IO returns
	defer pin.Unpin()
	for i := range ops {
		op := &ops[i]
		op.N, op.Err = 0, nil
		if err := blockdev.CheckOp(d.info, op); err != nil {
			op.Err = err
			continue
		}
		var o RWOptions
		if op.Write && d.opt.ReadOnly {
			op.Err = fmt.Errorf("%s: %w", d.info.Path, ErrReadOnly)
			continue
		}
		if op.Write {
			o.FUA = d.opt.FUA
			pid, ok, err := d.pidFor(op.Handle)
			if err != nil {
				op.Err = err
				continue
			}
			if ok {
				o.DType, o.DSpec = DirTypeDataPlacement, pid
			}
		}
		if len(op.Buf) > 0 {
			pin.Pin(&op.Buf[0]) // no-op for Alloc'd (off-heap) memory
		}
		if len(op.Tail) > 0 {
			pin.Pin(&op.Tail[0])
		}
		for off, n := 0, 0; off < op.Len(); off += n {
			// Commands of at most d.xfer bytes, none across the seam between Buf and Tail.
			var buf []byte
			if off < len(op.Buf) {
				buf = op.Buf[off:]
			} else {
				buf = op.Tail[off-len(op.Buf):]
			}
			n = min(d.xfer, len(buf))
			buf = buf[:n]
			slba := uint64(op.Off+int64(off)) / uint64(bs)
			var c Command
			if op.Write {
				c = Write(d.ns.NSID, slba, uint32(n/bs), buf, o)
			} else {
				c = Read(d.ns.NSID, slba, uint32(n/bs), buf)
			}
			c.BufIndex = d.bufIndex(buf)
			cmds = append(cmds, c)
			pieces = append(pieces, piece{op: i, off: off, n: n})
		}
	}
	if len(cmds) > 0 {
		done := make([]Completion, len(cmds))
		d.t.IO(cmds, done)
		// N is the length of the prefix of pieces that succeeded; Err is the first failure.
		for j, p := range pieces {
			op := &ops[p.op]
			if op.Err != nil {
				continue
			}
			if err := done[j].Check(CommandName(false, &cmds[j])); err != nil {
				op.Err = fmt.Errorf("%s [%d, %d): %w", d.info.Path, op.Off+int64(p.off), op.Off+int64(p.off+p.n), err)
				continue
			}
			if op.N == p.off {
				op.N += p.n
			}
		}
	}
	for i := range ops {
		if ops[i].Err != nil && first == nil {
			first = ops[i].Err
		}
	}
	return first
}

// Deallocate sends Dataset Management deallocate for the ranges (block aligned), at most
// 256 ranges per command, all commands in one batch. ErrNotSupported if ONCS lacks DSM.
func (d *Device) Deallocate(ranges []blockdev.Range) error {
	if d.opt.ReadOnly {
		return fmt.Errorf("%s: %w", d.info.Path, ErrReadOnly)
	}
	if !d.info.Deallocate {
		return fmt.Errorf("%s: %w: controller does not support Dataset Management (ONCS bit 2)", d.info.Path, blockdev.ErrNotSupported)
	}
	bs := int64(d.ns.BlockSize)
	var drs []DSMRange
	for _, r := range ranges {
		if r.Len == 0 {
			continue
		}
		if r.Off < 0 || r.Len < 0 || r.Off+r.Len > d.info.Size {
			return fmt.Errorf("%w: deallocate [%d, %d) on a %d-byte device", blockdev.ErrOutOfRange, r.Off, r.Off+r.Len, d.info.Size)
		}
		if r.Off%bs != 0 || r.Len%bs != 0 {
			return fmt.Errorf("%w: deallocate offset %d length %d, logical block %d", blockdev.ErrMisaligned, r.Off, r.Len, bs)
		}
		slba, nlb := uint64(r.Off/bs), uint64(r.Len/bs)
		for nlb > 0 {
			n := min(nlb, 0xFFFFFFFF)
			drs = append(drs, DSMRange{SLBA: slba, NLB: uint32(n)})
			slba += n
			nlb -= n
		}
	}
	if len(drs) == 0 {
		return nil
	}
	ncmd := (len(drs) + DSMMaxRanges - 1) / DSMMaxRanges
	buf, err := blockdev.Alloc(ncmd * DSMMaxRanges * DSMRangeLen)
	if err != nil {
		return err
	}
	defer blockdev.Free(buf)
	cmds := make([]Command, 0, ncmd)
	for k := 0; k < ncmd; k++ {
		part := drs[k*DSMMaxRanges : min(len(drs), (k+1)*DSMMaxRanges)]
		c, err := Deallocate(d.ns.NSID, part, buf[k*DSMMaxRanges*DSMRangeLen:])
		if err != nil {
			return err
		}
		cmds = append(cmds, c)
	}
	done := make([]Completion, len(cmds))
	d.t.IO(cmds, done)
	for j := range done {
		if err := done[j].Check(CommandName(false, &cmds[j])); err != nil {
			return fmt.Errorf("%s: %w", d.info.Path, err)
		}
	}
	return nil
}

// Flush sends NVMe Flush for the namespace.
func (d *Device) Flush() error {
	c := Flush(d.ns.NSID)
	if _, err := RunIO(d.t, &c); err != nil {
		return fmt.Errorf("%s: %w", d.info.Path, err)
	}
	return nil
}

// Close closes the transport unless DeviceOptions.KeepTransport.
func (d *Device) Close() error {
	d.closeOnce.Do(func() {
		if !d.opt.KeepTransport {
			d.closeErr = d.t.Close()
		}
	})
	return d.closeErr
}
