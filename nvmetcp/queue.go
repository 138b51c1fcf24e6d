package nvmetcp

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/rbctl/rbctl/nvme"
)

// c2hChunk is the most data one C2HData PDU carries; larger reads span several PDUs.
const c2hChunk = 128 << 10

// Errors that end a queue connection.
var (
	ErrHostTerminated = errors.New("nvmetcp: host sent a termination request")
	ErrKeepAlive      = errors.New("nvmetcp: keep-alive timeout expired")
	errDisconnect     = errors.New("nvmetcp: Disconnect command")
)

// queue is one NVMe/TCP connection: one submission/completion queue pair. Its goroutine
// reads PDUs, runs commands in arrival order (data for an R2T may arrive between other
// capsules) and writes every response, so writes need no lock.
type queue struct {
	t    *Target
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	hpda uint8
	dg   Digests

	qid       uint16
	sqsize    uint16 // 0's based, from Connect
	sqhd      uint16
	sqflowOff bool
	ctrl      *controller
	pending   map[uint16]*request // commands waiting for H2CData, by transfer tag
	nextTag   uint16
	aers      []uint16 // CIDs of Asynchronous Event Requests held open
	stop      error    // set by a command that ends the connection after its response
}

// request is a command waiting for its data from the host.
type request struct {
	sqe  SQE
	data []byte
	got  uint32
	bad  bool // a data PDU failed its data digest: complete with a transient transport error
}

// result is what a command produced: the completion, data for the host, or neither (an
// Asynchronous Event Request held open).
type result struct {
	st     nvme.Status
	dw     uint64
	c2h    []byte
	noResp bool
}

func ok() result                  { return result{} }
func status(s nvme.Status) result { return result{st: s} }
func fromCompletion(c nvme.Completion, c2h []byte) result {
	st := c.Status
	if c.Err != nil && st.OK() {
		st = StInternal
	}
	r := result{st: st, dw: c.Result}
	if st.OK() {
		r.c2h = c2h
	}
	return r
}

func (q *queue) ctrlID() uint16 {
	if q.ctrl == nil {
		return 0
	}
	return q.ctrl.id
}

// maxPLen bounds any PDU the host may send once connected: a capsule with in-capsule data
// or one H2CData PDU, plus alignment padding.
func (q *queue) maxPLen() uint32 {
	inline := uint32(adminInlineData)
	if q.qid != 0 && uint32(q.t.cfg.InlineData) > inline {
		inline = uint32(q.t.cfg.InlineData)
	}
	return 256 + max(inline, q.t.maxData)
}

func (q *queue) serve() error {
	p, err := ReadPDU(q.r, ICLen)
	if err != nil {
		return q.fatal(err, nil)
	}
	ic, err := DecodeICReq(p)
	if err != nil {
		return q.fatal(err, p.Hdr)
	}
	if ic.PFV != 0 {
		return q.fatal(hdrErr(ErrPDUHeader, FESUnsupportedParam, icPFVOff, "PFV %d", ic.PFV), p.Hdr)
	}
	if ic.HPDA > 31 {
		return q.fatal(hdrErr(ErrPDUHeader, FESInvalidHeader, icPDAOff, "HPDA %d", ic.HPDA), p.Hdr)
	}
	q.hpda = ic.HPDA
	// Header and data digests (CRC32C) are enabled as the host asks.
	q.dg = Digests{Header: ic.Digest&digestHeader != 0, Data: ic.Digest&digestData != 0}
	q.w.Write(AppendICResp(nil, ICResp{Digest: ic.Digest & (digestHeader | digestData), MaxH2CData: q.t.maxData}))
	if err := q.w.Flush(); err != nil {
		return err
	}
	for q.stop == nil {
		if q.qid == 0 && q.ctrl != nil {
			q.ctrl.mu.Lock()
			kato := q.ctrl.katoMs
			q.ctrl.mu.Unlock()
			if kato != 0 {
				// The host sends Keep Alive at least every KATO; allow three times that plus
				// slack, because a host under emulation (QEMU TCG) can be late.
				q.conn.SetReadDeadline(time.Now().Add(3*time.Duration(kato)*time.Millisecond + 10*time.Second))
			}
		}
		p, err := ReadPDUDigests(q.r, q.maxPLen(), q.dg)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return ErrKeepAlive
			}
			return q.fatal(err, nil)
		}
		switch p.Type {
		case TypeCapsuleCmd:
			err = q.capsule(p)
		case TypeH2CData:
			err = q.h2cData(p)
		case TypeH2CTermReq:
			tr := DecodeTermReq(p)
			return fmt.Errorf("%w: FES 0x%x FEI 0x%x", ErrHostTerminated, tr.FES, tr.FEI)
		default:
			err = hdrErr(ErrPDUHeader, FESInvalidHeader, hdrTypeOff, "%v is not a host PDU", p.Type)
		}
		if err != nil {
			return q.fatal(err, p.Hdr)
		}
		// Responses go out when no further PDU is already buffered: a burst of commands
		// gets one write, and nothing waits behind a read that could block.
		if q.r.Buffered() == 0 || q.stop != nil {
			if err := q.w.Flush(); err != nil {
				return err
			}
		}
	}
	return q.stop
}

// fatal sends a C2HTermReq for a protocol error (a malformed or unexpected PDU) and returns
// the error that ends the connection; I/O errors end it silently.
func (q *queue) fatal(err error, hdr []byte) error {
	var he *HeaderError
	if errors.As(err, &he) {
		if hdr == nil {
			hdr = he.Hdr
		}
		q.w.Write(AppendTermReq(nil, TypeC2HTermReq, TermReq{FES: he.FES, FEI: he.Offset}, hdr))
		q.w.Flush()
	}
	return err
}

// detach unregisters the queue from its controller; an admin queue takes its controller
// (and the controller's I/O queues) with it.
func (q *queue) detach() {
	c := q.ctrl
	if c == nil {
		return
	}
	if q.qid == 0 {
		q.t.dropController(c)
		return
	}
	c.mu.Lock()
	if c.queues[q.qid] == q {
		delete(c.queues, q.qid)
	}
	c.mu.Unlock()
}

// capsule handles a command capsule: it finds the command's data (in the capsule, to be
// requested with an R2T, or to be sent back) and runs the command when the data is there.
func (q *queue) capsule(p *PDU) error {
	sqe := DecodeSQE(p.Hdr[CommonHeaderLen:])
	if q.ctrl != nil {
		q.sqhd = (q.sqhd + 1) % (q.sqsize + 1)
	}
	if p.DataDigestBad {
		return q.respond(sqe, status(StTransientTransport)) // the host may retry
	}
	if sqe.Flags&psdtMask == psdtPRP || sqe.Flags&3 != 0 {
		return q.respond(sqe, status(StInvalidField)) // Fabrics commands carry SGLs; no fused commands
	}
	dir := nvme.Direction(sqe.Opcode & 3)
	if sqe.Opcode == opFabrics {
		dir = nvme.Direction(sqe.Raw[sqeFCType] & 3)
	}
	n := sqe.SGL.Length
	if dir == nvme.DirNone || n == 0 {
		return q.respond(sqe, q.execute(&sqe, nil))
	}
	if dir == nvme.DirBidirectional {
		return q.respond(sqe, status(StInvalidField))
	}
	switch sqe.SGL.Type {
	case SGLInCapsule:
		if dir != nvme.DirHostToCtrl {
			return q.respond(sqe, status(StSGLType))
		}
		if sqe.SGL.Addr > uint64(len(p.Data)) {
			return q.respond(sqe, status(StSGLOffset))
		}
		if uint64(n) > uint64(len(p.Data))-sqe.SGL.Addr {
			return q.respond(sqe, status(StSGLLength))
		}
		return q.respond(sqe, q.execute(&sqe, p.Data[sqe.SGL.Addr:sqe.SGL.Addr+uint64(n)]))
	case SGLTransport:
		if n > q.t.maxData {
			return q.respond(sqe, status(StSGLLength))
		}
		buf := make([]byte, n)
		if dir == nvme.DirCtrlToHost {
			return q.respond(sqe, q.execute(&sqe, buf))
		}
		if len(q.pending) > int(q.sqsize) {
			return hdrErr(ErrPDUHeader, FESSequence, 0, "more commands waiting for data than the queue holds")
		}
		tag := q.nextTag
		for _, used := q.pending[tag]; used; _, used = q.pending[tag] {
			tag++
		}
		q.nextTag = tag + 1
		q.pending[tag] = &request{sqe: sqe, data: buf}
		q.send(AppendR2T(nil, DataPDU{CCCID: sqe.CID, TTag: tag, Offset: 0, Length: n}), nil)
		return nil
	}
	return q.respond(sqe, status(StSGLType))
}

// h2cData takes data the host sent after an R2T; the last piece runs the command.
func (q *queue) h2cData(p *PDU) error {
	d := DecodeDataPDU(p)
	req := q.pending[d.TTag]
	if req == nil {
		return hdrErr(ErrPDUHeader, FESInvalidHeader, dataTTagOff, "no transfer with tag %d", d.TTag)
	}
	if d.CCCID != req.sqe.CID {
		return hdrErr(ErrPDUHeader, FESInvalidHeader, dataCCCIDOff, "CCCID %d for tag %d of command %d", d.CCCID, d.TTag, req.sqe.CID)
	}
	if d.Offset != req.got || uint64(d.Offset)+uint64(d.Length) > uint64(len(req.data)) {
		return hdrErr(ErrPDUHeader, FESDataOutOfRange, dataOffOff, "data [%d, +%d) with %d of %d received", d.Offset, d.Length, req.got, len(req.data))
	}
	copy(req.data[d.Offset:], p.Data)
	req.got += d.Length
	req.bad = req.bad || p.DataDigestBad
	done := req.got == uint32(len(req.data))
	if p.Flags&FlagLast != 0 && !done {
		return hdrErr(ErrPDUHeader, FESInvalidHeader, hdrFlagsOff, "LAST_PDU with %d of %d bytes", req.got, len(req.data))
	}
	if !done {
		return nil
	}
	delete(q.pending, d.TTag)
	if req.bad {
		return q.respond(req.sqe, status(StTransientTransport))
	}
	return q.respond(req.sqe, q.execute(&req.sqe, req.data))
}

// respond sends a command's data (C2HData PDUs) and completion (CapsuleResp, or the
// SUCCESS flag on the last data PDU when SQ flow control is off and DW0/DW1 are zero).
func (q *queue) respond(sqe SQE, r result) error {
	if r.noResp {
		return nil
	}
	success := q.sqflowOff && r.st.OK() && r.dw == 0
	for off := 0; off < len(r.c2h); off += c2hChunk {
		n := min(c2hChunk, len(r.c2h)-off)
		var flags uint8
		if off+n == len(r.c2h) {
			flags = FlagLast
			if success {
				flags |= FlagSuccess
			}
		}
		q.send(AppendDataHeader(nil, TypeC2HData, flags, DataPDU{CCCID: sqe.CID, Offset: uint32(off), Length: uint32(n)}, 0), r.c2h[off:off+n])
	}
	if success && len(r.c2h) > 0 {
		return nil
	}
	q.send(AppendCapsuleResp(nil, CQE{Result: r.dw, SQHD: q.sqhd, SQID: q.qid, CID: sqe.CID, Status: r.st}), nil)
	return nil
}

// send writes one PDU: hdr as the Append functions build it, then data, with the
// connection's digests and the host's data alignment.
func (q *queue) send(hdr, data []byte) {
	head, tail := Frame(hdr, data, q.dg, q.hpda)
	q.w.Write(head)
	q.w.Write(data)
	q.w.Write(tail)
}

// execute runs one command with its data buffer.
func (q *queue) execute(sqe *SQE, data []byte) result {
	if sqe.Opcode == opFabrics {
		return q.fabrics(sqe, data)
	}
	if q.ctrl == nil {
		return status(StSeqError) // nothing but Connect before Connect
	}
	if q.qid == 0 {
		return q.admin(sqe, data)
	}
	cmd := sqe.Command(data)
	var done [1]nvme.Completion
	q.t.cfg.Backend.IO([]nvme.Command{cmd}, done[:])
	return fromCompletion(done[0], c2hOf(sqe, data))
}

// c2hOf is the data a command returns to the host: its buffer when the opcode reads.
func c2hOf(sqe *SQE, data []byte) []byte {
	if nvme.Direction(sqe.Opcode&3) != nvme.DirCtrlToHost {
		return nil
	}
	return data
}
