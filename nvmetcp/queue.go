package nvmetcp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/rbctl/rbctl/nvme"
)

// c2hChunk is the most data one C2HData PDU carries; larger reads span several PDUs.
const c2hChunk = 128 << 10

// Errors that end a queue connection.
var (
	ErrHostTerminated = errors.New("nvmetcp: host sent a termination request")
	ErrKeepAlive      = errors.New("nvmetcp: keep-alive timeout expired")
	ErrHandshake      = errors.New("nvmetcp: ICReq and Connect not completed in time")
	ErrStalled        = errors.New("nvmetcp: host stopped moving data")
	errDisconnect     = errors.New("nvmetcp: Disconnect command")
	errAdminGone      = errors.New("nvmetcp: the controller's admin queue closed")
)

// queue is one NVMe/TCP connection: one submission/completion queue pair. Its goroutine
// reads PDUs, runs commands in arrival order (data for an R2T may arrive between other
// capsules) and writes their responses. R2Ts that had to wait for write budget are sent by
// a grant goroutine (transfer.go), so writes to the connection take wmu.
type queue struct {
	t         *Target
	conn      net.Conn
	r         *bufio.Reader
	hb        [maxHeadLen]byte // the head of the PDU being read
	capsule   []byte           // in-capsule data of the capsule being read, allocated once
	hpda      uint8
	dg        Digests
	handshake time.Time // ICReq and Connect must be done by then
	midPDU    bool      // a stall deadline guards the rest of the PDU being read

	// Owned by the reading goroutine.
	qid       uint16
	sqsize    uint16 // 0's based, from Connect
	sqhd      uint16
	sqflowOff bool
	ctrl      *controller
	nextTag   uint16
	aers      []uint16 // CIDs of Asynchronous Event Requests held open
	stop      error    // set by a command that ends the connection after its response

	wmu sync.Mutex // guards w and the write deadline
	w   *bufio.Writer

	mu       sync.Mutex
	pending  map[uint16]*transfer // R2T sent (budget reserved), data expected; by tag
	waiting  []*transfer          // writes waiting for budget, in arrival order
	granting bool                 // a grant goroutine runs
	closed   bool
	why      error       // what ended the connection from outside the reader (kill)
	stall    *time.Timer // fires at the earliest pending transfer's deadline
	done     chan struct{}
	grants   sync.WaitGroup
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

func newQueue(t *Target, c net.Conn) *queue {
	return &queue{t: t, conn: c, r: bufio.NewReaderSize(c, 64<<10), w: bufio.NewWriterSize(c, 64<<10),
		handshake: time.Now().Add(t.cfg.HandshakeTimeout), pending: map[uint16]*transfer{}, done: make(chan struct{})}
}

func (q *queue) ctrlID() uint16 {
	if q.ctrl == nil {
		return 0
	}
	return q.ctrl.id
}

// inlineLimit is the in-capsule data a capsule on this queue may carry: IOCCSZ less the SQE
// on an I/O queue, what Linux assumes for the admin queue (and before Connect).
func (q *queue) inlineLimit() int {
	if q.qid != 0 {
		return q.t.cfg.InlineData
	}
	return adminInlineData
}

// maxPLen bounds any PDU the host may send once connected: a capsule with in-capsule data
// or one H2CData PDU, plus header, digests and alignment padding. Capsules above the
// in-capsule limit but within this are drained and refused (Invalid Field), not fatal.
func (q *queue) maxPLen() uint32 {
	return maxHeadLen + digestLen + max(uint32(max(q.t.cfg.InlineData, adminInlineData)), q.t.maxData)
}

// limit is how many commands may be outstanding on the queue: SQSIZE (0's based, so one
// entry stays free, as in any NVMe queue: MQES at most), only the Connect before Connect.
func (q *queue) limit() int {
	if q.ctrl == nil {
		return 1
	}
	return int(q.sqsize)
}

func (q *queue) serve() error {
	q.conn.SetReadDeadline(q.handshake)
	h, head, err := readHead(q.r, q.hb[:], ICLen, Digests{}, nil)
	if err != nil {
		return q.fatal(q.classify(err), nil)
	}
	ic, err := DecodeICReq(&PDU{Header: h, Hdr: head[:h.HLen]})
	if err != nil {
		return q.fatal(err, head[:h.HLen])
	}
	if ic.PFV != 0 {
		return q.fatal(hdrErr(ErrPDUHeader, FESUnsupportedParam, icPFVOff, "PFV %d", ic.PFV), head[:h.HLen])
	}
	if ic.HPDA > 31 {
		return q.fatal(hdrErr(ErrPDUHeader, FESInvalidHeader, icPDAOff, "HPDA %d", ic.HPDA), head[:h.HLen])
	}
	q.hpda = ic.HPDA
	// Header and data digests (CRC32C) are enabled as the host asks.
	q.dg = Digests{Header: ic.Digest&digestHeader != 0, Data: ic.Digest&digestData != 0}
	q.lockWrite()
	q.w.Write(AppendICResp(nil, ICResp{Digest: ic.Digest & (digestHeader | digestData), MaxH2CData: q.t.maxData}))
	err = q.w.Flush()
	q.wmu.Unlock()
	if err != nil {
		return q.classify(err)
	}
	for q.stop == nil {
		h, head, err := readHead(q.r, q.hb[:], q.maxPLen(), q.dg, q.startPDU)
		if err != nil {
			return q.fatal(q.classify(err), nil)
		}
		switch h.Type {
		case TypeCapsuleCmd:
			err = q.capsuleCmd(h, head)
		case TypeH2CData:
			err = q.h2cData(h, head)
		case TypeH2CTermReq:
			tr := DecodeTermReq(&PDU{Header: h, Hdr: head[:h.HLen]})
			return fmt.Errorf("%w: FES 0x%x FEI 0x%x", ErrHostTerminated, tr.FES, tr.FEI)
		default:
			err = hdrErr(ErrPDUHeader, FESInvalidHeader, hdrTypeOff, "%v is not a host PDU", h.Type)
		}
		if err != nil {
			return q.fatal(q.classify(err), head[:h.HLen])
		}
		q.endPDU()
		// Responses go out when no further PDU is already buffered: a burst of commands
		// gets one write, and nothing waits behind a read that could block.
		if q.r.Buffered() == 0 || q.stop != nil {
			q.lockWrite()
			err := q.w.Flush()
			q.wmu.Unlock()
			if err != nil {
				return q.classify(err)
			}
		}
	}
	return q.stop
}

// startPDU runs once a PDU's common header has arrived: unless the whole PDU is already
// buffered, the rest must arrive within the stall timeout (and before the handshake
// deadline while the queue is not connected).
func (q *queue) startPDU(h Header) {
	if q.r.Buffered() >= int(h.PLen)-CommonHeaderLen {
		return
	}
	d := time.Now().Add(q.t.cfg.StallTimeout)
	if q.ctrl == nil && q.handshake.Before(d) {
		d = q.handshake
	}
	q.conn.SetReadDeadline(d)
	q.midPDU = true
}

// endPDU puts back the deadline for waiting on the next PDU: the handshake deadline until
// Connect, none afterwards (the controller's keep-alive watch bounds an idle connection).
func (q *queue) endPDU() {
	if q.midPDU {
		q.midPDU = false
		q.conn.SetReadDeadline(q.idleDeadline())
	}
}

func (q *queue) idleDeadline() time.Time {
	if q.ctrl == nil {
		return q.handshake
	}
	return time.Time{}
}

// classify names why a read or write failed: a deadline (handshake or stall), or what an
// outside kill (keep-alive, stalled transfer) recorded before closing the connection.
func (q *queue) classify(err error) error {
	q.mu.Lock()
	why := q.why
	q.mu.Unlock()
	if why != nil {
		return why
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		return err
	}
	if q.ctrl == nil {
		q.t.counts.handshake.Add(1)
		return fmt.Errorf("%w (%v after accept)", ErrHandshake, q.t.cfg.HandshakeTimeout)
	}
	q.t.counts.stalls.Add(1)
	return fmt.Errorf("%w: no progress for %v", ErrStalled, q.t.cfg.StallTimeout)
}

// kill ends the connection from outside the reading goroutine; why is what serve returns.
func (q *queue) kill(why error) {
	q.mu.Lock()
	if q.why == nil {
		q.why = why
	}
	q.mu.Unlock()
	q.conn.Close()
}

// lockWrite takes the write lock and gives the writes that follow the stall timeout: a host
// that stops reading cannot hold the queue (or its buffers) for ever.
func (q *queue) lockWrite() {
	q.wmu.Lock()
	q.conn.SetWriteDeadline(time.Now().Add(q.t.cfg.StallTimeout))
}

// fatal sends a C2HTermReq for a protocol error (a malformed or unexpected PDU) and returns
// the error that ends the connection; I/O errors end it silently.
func (q *queue) fatal(err error, hdr []byte) error {
	var he *HeaderError
	if errors.As(err, &he) {
		if hdr == nil {
			hdr = he.Hdr
		}
		q.t.counts.termReqs.Add(1)
		q.lockWrite()
		q.w.Write(AppendTermReq(nil, TypeC2HTermReq, TermReq{FES: he.FES, FEI: he.Offset}, hdr))
		q.w.Flush()
		q.wmu.Unlock()
	}
	return err
}

// end releases what the connection holds once its reader has stopped: its place in the
// controller, the connection (so a grant goroutine blocked writing to it returns), its grant
// goroutine, and the budget and buffers of its transfers.
func (q *queue) end() {
	q.mu.Lock()
	q.closed = true
	close(q.done)
	if q.stall != nil {
		q.stall.Stop()
	}
	pend := q.pending
	q.t.counts.waiting.Add(-int64(len(q.waiting)))
	q.pending, q.waiting = nil, nil // waiting writes hold no budget
	q.mu.Unlock()
	q.detach()
	q.conn.Close()
	q.grants.Wait()
	for _, tr := range pend {
		q.finish(tr)
	}
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

// readData reads a PDU's data into dst (exactly its data length) and checks the data
// digest; a mismatch is reported, not an error: the command fails, the connection goes on.
func (q *queue) readData(h Header, dst []byte) (digestBad bool, err error) {
	if _, err := io.ReadFull(q.r, dst); err != nil {
		return false, eofMidPDU(err)
	}
	if h.Flags&FlagDDGST == 0 {
		return false, nil
	}
	var d [digestLen]byte
	if _, err := io.ReadFull(q.r, d[:]); err != nil {
		return false, eofMidPDU(err)
	}
	return le.Uint32(d[:]) != crc32c(dst), nil
}

// discard skips n bytes of the PDU being read.
func (q *queue) discard(n int) error {
	if n <= 0 {
		return nil
	}
	_, err := q.r.Discard(n)
	return eofMidPDU(err)
}

// capsuleCmd handles a command capsule: it reads the in-capsule data, checks the command's
// data pointer and length, and runs it, sends its reply, or asks for its data with an R2T.
func (q *queue) capsuleCmd(h Header, head []byte) error {
	sqe := DecodeSQE(head[CommonHeaderLen:])
	q.mu.Lock()
	outstanding := len(q.pending) + len(q.waiting) + len(q.aers)
	q.mu.Unlock()
	if outstanding >= q.limit() {
		return hdrErr(ErrPDUHeader, FESSequence, 0, "command %d with %d outstanding on a queue of %d entries", sqe.CID, outstanding, q.limit()+1)
	}
	if q.ctrl != nil {
		q.sqhd = (q.sqhd + 1) % (q.sqsize + 1)
		q.ctrl.lastCommand.Store(time.Now().UnixNano())
	}
	var data []byte
	digestBad := false
	if n := dataLen(h); n > q.inlineLimit() {
		// More in-capsule data than IOCCSZ allows: drained, never kept, and refused.
		if err := q.discard(int(h.PLen) - headLen(h)); err != nil {
			return err
		}
		q.t.counts.rejected.Add(1)
		return q.respond(sqe, status(StInvalidField))
	} else if n > 0 {
		if q.capsule == nil {
			q.capsule = make([]byte, max(q.t.cfg.InlineData, adminInlineData))
		}
		data = q.capsule[:n]
		var err error
		if digestBad, err = q.readData(h, data); err != nil {
			return err
		}
	} else if err := q.discard(int(h.PLen) - headLen(h)); err != nil {
		return err // a data digest (or padding) with no data
	}
	if digestBad {
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
		if sqe.SGL.Addr > uint64(len(data)) {
			return q.respond(sqe, status(StSGLOffset))
		}
		if uint64(n) > uint64(len(data))-sqe.SGL.Addr {
			return q.respond(sqe, status(StSGLLength))
		}
		if r, refused := q.checkData(&sqe, n); refused {
			return q.respond(sqe, r)
		}
		return q.respond(sqe, q.execute(&sqe, data[sqe.SGL.Addr:sqe.SGL.Addr+uint64(n)]))
	case SGLTransport:
		if r, refused := q.checkData(&sqe, n); refused {
			return q.respond(sqe, r)
		}
		if dir == nvme.DirCtrlToHost {
			return q.reply(&sqe, n)
		}
		q.requestData(sqe, n)
		return nil
	}
	return q.respond(sqe, status(StSGLType))
}

// h2cData reads data the host sent after an R2T straight into the transfer's buffer; the
// last piece runs the command.
func (q *queue) h2cData(h Header, head []byte) error {
	d := DecodeDataPDU(&PDU{Header: h, Hdr: head[:h.HLen]})
	if n := dataLen(h); d.Length != uint32(n) || n == 0 {
		return hdrErr(ErrPDUHeader, FESInvalidHeader, dataLenOff, "DATAL %d but %d data bytes", d.Length, n)
	}
	if d.Length > q.t.maxData {
		return hdrErr(ErrPDUTooBig, FESDataLimit, dataLenOff, "DATAL %d above MAXH2CDATA %d", d.Length, q.t.maxData)
	}
	q.mu.Lock()
	tr := q.pending[d.TTag]
	switch {
	case tr == nil:
		q.mu.Unlock()
		return hdrErr(ErrPDUHeader, FESInvalidHeader, dataTTagOff, "no transfer with tag %d", d.TTag)
	case d.CCCID != tr.sqe.CID:
		q.mu.Unlock()
		return hdrErr(ErrPDUHeader, FESInvalidHeader, dataCCCIDOff, "CCCID %d for tag %d of command %d", d.CCCID, d.TTag, tr.sqe.CID)
	case d.Offset != tr.got || uint64(d.Offset)+uint64(d.Length) > uint64(tr.n):
		q.mu.Unlock()
		return hdrErr(ErrPDUHeader, FESDataOutOfRange, dataOffOff, "data [%d, +%d) with %d of %d received", d.Offset, d.Length, tr.got, tr.n)
	}
	if tr.buf == nil {
		tr.buf = getBuf(int(tr.n), false)
		q.t.counts.allocated.Add(int64(tr.n))
	}
	tr.deadline = time.Now().Add(q.t.cfg.StallTimeout)
	q.mu.Unlock()
	bad, err := q.readData(h, tr.buf[d.Offset:d.Offset+d.Length])
	if err != nil {
		return err
	}
	q.mu.Lock()
	tr.got += d.Length
	done := tr.got == tr.n
	if done {
		delete(q.pending, d.TTag)
		if len(q.pending) == 0 {
			q.stall.Stop()
		}
	}
	q.mu.Unlock()
	tr.bad = tr.bad || bad
	if !done {
		if h.Flags&FlagLast != 0 {
			return hdrErr(ErrPDUHeader, FESInvalidHeader, hdrFlagsOff, "LAST_PDU with %d of %d bytes", tr.got, tr.n)
		}
		return nil
	}
	r := status(StTransientTransport)
	if !tr.bad {
		r = q.execute(&tr.sqe, tr.buf)
	}
	q.finish(tr)
	return q.respond(tr.sqe, r)
}

// reply runs a command that returns data, in a buffer sized by what the command can return
// (replyLen), and sends at most n bytes of it (the host's buffer).
func (q *queue) reply(sqe *SQE, n uint32) error {
	size := q.replyLen(sqe, n)
	if size > q.t.maxData {
		q.t.counts.rejected.Add(1)
		return q.respond(*sqe, status(StInvalidField)) // more than MDTS
	}
	var buf []byte
	if size > 0 {
		buf = getBuf(int(size), true)
	}
	r := q.execute(sqe, buf)
	if uint32(len(r.c2h)) > n {
		r.c2h = r.c2h[:n]
	}
	err := q.respond(*sqe, r)
	if buf != nil {
		putBuf(buf)
	}
	return err
}

// respond sends a command's data (C2HData PDUs) and completion (CapsuleResp, or the
// SUCCESS flag on the last data PDU when SQ flow control is off and DW0/DW1 are zero).
func (q *queue) respond(sqe SQE, r result) error {
	if r.noResp {
		return nil
	}
	q.lockWrite()
	defer q.wmu.Unlock()
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

// send writes one PDU (wmu held): hdr as the Append functions build it, then data, with the
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
