package nvmetcp

import (
	"crypto/sha256"
	"encoding/binary"
	"time"

	"github.com/rbctl/rbctl/nvme"
)

// Admin opcodes the target answers itself (the rest go to the backend).
const (
	opAbort     uint8 = 0x08
	opAER       uint8 = 0x0C
	opKeepAlive uint8 = 0x18

	featAsyncEventCfg nvme.FeatureID = 0x0B
	featKATO          nvme.FeatureID = 0x0F
	logChangedNSList  nvme.LogID     = 0x04
)

// Identify Controller fields a fabrics controller fills in (NVMe base spec 2.0, Figure
// "Identify Controller Data Structure", NVMe over Fabrics section). Wire layout: do not change.
const (
	idMDTS      = 77   // u8, 2^n minimum pages
	idCNTLID    = 78   // u16
	idOAES      = 92   // u32
	idCNTRLTYPE = 111  // u8: 1 = I/O controller
	idAERL      = 259  // u8, 0's based
	idKAS       = 320  // u16, 100 ms units
	idMAXCMD    = 514  // u16
	idSGLS      = 536  // u32
	idSUBNQN    = 768  // 256 bytes
	idIOCCSZ    = 1792 // u32, 16-byte units
	idIORCSZ    = 1796 // u32, 16-byte units
	idICDOFF    = 1800 // u16
	idFCATT     = 1802 // u8: bit 0 = static controller model
	idMSDBD     = 1803 // u8
	idOFCS      = 1804 // u16: bit 0 = Disconnect supported

	// SGLS: SGLs supported (no alignment), and the Offset SGL Data Block descriptor for
	// in-capsule data (bit 20) — what the Linux nvme-tcp host checks and uses.
	sglsValue = 1<<0 | 1<<20
)

// fabrics runs a Fabrics command (opcode 0x7F).
func (q *queue) fabrics(sqe *SQE, data []byte) result {
	fct := sqe.Raw[sqeFCType]
	if fct == FCTypeConnect {
		return q.connect(sqe, data)
	}
	if q.ctrl == nil {
		return status(StSeqError)
	}
	switch fct {
	case FCTypePropertyGet, FCTypePropertySet:
		if q.qid != 0 {
			return status(StInvalidField) // properties belong to the admin queue
		}
		return q.property(sqe, fct == FCTypePropertySet)
	case FCTypeDisconnect:
		q.stop = errDisconnect
		return ok()
	}
	return status(StInvalidOpcode)
}

// invalidParam is Connect Invalid Parameters with the offending field's place in DW0:
// IATTR (bit 0: 1 = in the Connect data, 0 = in the SQE) and IPO (bits 31:16, byte offset).
func invalidParam(inData bool, off int) result {
	r := result{st: StConnectInvalidParam, dw: uint64(off) << 16}
	if inData {
		r.dw |= 1
	}
	return r
}

func (q *queue) connect(sqe *SQE, data []byte) result {
	if q.ctrl != nil {
		return status(StSeqError) // one Connect per queue
	}
	raw := sqe.Raw[:]
	if le.Uint16(raw[connRecFmtOff:]) != 0 {
		return status(StConnectIncompatible)
	}
	qid, sqsize := le.Uint16(raw[connQIDOff:]), le.Uint16(raw[connSQSizeOff:])
	cattr, kato := raw[connCAttrOff], le.Uint32(raw[connKATOOff:])
	d, err := DecodeConnectData(data)
	if err != nil {
		return invalidParam(false, sqeDPTR+sglLenOff)
	}
	if d.SubNQN != q.t.cfg.NQN {
		return invalidParam(true, connDataSubNQN)
	}
	if d.HostNQN == "" {
		return invalidParam(true, connDataHostNQN)
	}
	if sqsize == 0 || int(sqsize) >= q.t.cfg.QueueSize {
		return invalidParam(false, connSQSizeOff)
	}
	var c *controller
	if qid == 0 {
		if d.CNTLID != DynamicController && d.CNTLID != 0xFFFE {
			return invalidParam(true, connDataCNTLID)
		}
		if c, err = q.t.newController(d, kato, q); err != nil {
			q.t.counts.busy.Add(1)
			q.t.logf("nvmetcp: %s: host %s refused: %d controllers (the controller limit)", q.conn.RemoteAddr(), d.HostNQN, q.t.cfg.MaxControllers)
			return status(StConnectBusy)
		}
	} else {
		if c = q.t.controller(d.CNTLID); c == nil {
			return invalidParam(true, connDataCNTLID)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.hostNQN != d.HostNQN || c.hostID != d.HostID {
			return invalidParam(true, connDataHostNQN)
		}
		if c.dropped || c.csts&cstsRDY == 0 {
			return status(StSeqError)
		}
		nq := c.nrIOQ
		if nq == 0 {
			nq = q.t.cfg.MaxIOQueues
		}
		if int(qid) > nq || c.queues[qid] != nil {
			return invalidParam(false, connQIDOff)
		}
		c.queues[qid] = q
	}
	q.ctrl, q.qid, q.sqsize = c, qid, sqsize
	q.sqhd = 1 % (sqsize + 1) // the Connect itself took one entry
	// Connected: no handshake deadline any more; the controller's keep-alive watch (or
	// idle limit with KATO 0) bounds how long the queue may stay silent.
	q.conn.SetReadDeadline(time.Time{})
	q.midPDU = false
	q.sqflowOff = cattr&cattrDisableSQFlow != 0
	q.t.logf("nvmetcp: %s: host %s connected queue %d (size %d) of controller %d", q.conn.RemoteAddr(), d.HostNQN, qid, sqsize+1, c.id)
	return result{dw: uint64(c.id)}
}

// property runs Property Get or Set: CAP, VS, CC and CSTS; CC.EN drives CSTS.RDY at once
// and a shutdown request (CC.SHN) completes at once.
func (q *queue) property(sqe *SQE, set bool) result {
	raw := sqe.Raw[:]
	size8 := raw[propAttribOff]&7 == 1
	off := le.Uint32(raw[propOffsetOff:])
	c := q.ctrl
	c.mu.Lock()
	defer c.mu.Unlock()
	if set {
		if off != PropCC || size8 {
			return status(StInvalidField)
		}
		v := uint32(le.Uint64(raw[propValueOff:]))
		switch {
		case v&ccEN != 0:
			c.csts |= cstsRDY
		case c.cc&ccEN != 0:
			c.csts = 0 // EN 1 → 0 resets the controller
		}
		if v&ccSHNMask != 0 {
			c.csts = c.csts&^(3<<2) | cstsSHST
		} else {
			c.csts &^= 3 << 2
		}
		c.cc = v
		return ok()
	}
	var v uint64
	switch off {
	case PropCAP:
		v = q.t.capProperty()
	case PropVS:
		v = uint64(q.t.vs)
	case PropCC:
		v = uint64(c.cc)
	case PropCSTS:
		v = uint64(c.csts)
	case PropNSSR:
		v = 0
	default:
		return status(StInvalidField)
	}
	if !size8 {
		v &= 0xffffffff
	}
	return result{dw: v}
}

// admin runs an admin command: the fabrics-specific ones here, the rest on the backend.
func (q *queue) admin(sqe *SQE, data []byte) result {
	c := q.ctrl
	c.mu.Lock()
	ready := c.csts&cstsRDY != 0
	c.mu.Unlock()
	if !ready {
		return status(StSeqError) // CC.EN is 0: only Fabrics commands
	}
	switch sqe.Opcode {
	case opKeepAlive:
		c.lastKeepAlive.Store(time.Now().UnixNano())
		return ok()
	case opAER:
		if len(q.aers) >= aerLimit {
			return status(StAERLimit)
		}
		q.aers = append(q.aers, sqe.CID) // held open: the target raises no events
		return result{noResp: true}
	case opAbort:
		return result{dw: 1} // commands run to completion; nothing to abort
	case nvme.OpIdentify:
		if r, done := q.identify(sqe, data); done {
			return r
		}
	case nvme.OpSetFeatures, nvme.OpGetFeatures:
		if r, done := q.features(sqe); done {
			return r
		}
	case nvme.OpGetLogPage:
		if r, done := q.logPage(sqe, data); done {
			return r
		}
	}
	cmd := sqe.Command(data)
	r := fromCompletion(q.t.cfg.Backend.Admin(&cmd), c2hOf(sqe, data))
	if sqe.Opcode == nvme.OpIdentify && uint8(sqe.CDW[0]) == nvme.CNSController && r.st.OK() {
		q.patchIdentifyController(data)
	}
	return r
}

// patchIdentifyController overwrites the fields a fabrics controller reports on top of the
// backend's Identify Controller data (which describes a PCIe-like device).
func (q *queue) patchIdentifyController(b []byte) {
	if len(b) < nvme.IdentifyDataLen {
		return
	}
	b[idMDTS] = q.t.mdts // what the target enforces before any R2T
	le.PutUint16(b[idCNTLID:], q.ctrl.id)
	le.PutUint32(b[idOAES:], 0) // no asynchronous events are raised
	b[idCNTRLTYPE] = 1
	b[idAERL] = aerLimit - 1
	le.PutUint16(b[idKAS:], kasUnits)
	le.PutUint16(b[idMAXCMD:], uint16(q.t.cfg.QueueSize))
	le.PutUint32(b[idSGLS:], sglsValue)
	clear(b[idSUBNQN : idSUBNQN+nqnFieldLen])
	copy(b[idSUBNQN:idSUBNQN+nqnFieldLen-1], q.t.cfg.NQN)
	le.PutUint32(b[idIOCCSZ:], uint32((SQELen+q.t.cfg.InlineData)/16))
	le.PutUint32(b[idIORCSZ:], CQELen/16)
	le.PutUint16(b[idICDOFF:], 0)
	b[idFCATT] = 0 // dynamic controller model
	b[idMSDBD] = 1
	le.PutUint16(b[idOFCS:], 1)
}

// identify answers the Identify CNS values a fabrics host needs and the backend may not
// give: namespace descriptors (NGUID, UUID, CSI) and the NVM command set's controller data.
func (q *queue) identify(sqe *SQE, data []byte) (result, bool) {
	cns := uint8(sqe.CDW[0])
	csi := uint8(sqe.CDW[1] >> 24)
	switch cns {
	case nvme.CNSNSDescriptors, nvme.CNSCSIController, nvme.CNSCSINamespace:
	default:
		return result{}, false
	}
	if len(data) < nvme.IdentifyDataLen {
		return status(StInvalidField), true
	}
	clear(data)
	switch cns {
	case nvme.CNSNSDescriptors:
		if sqe.NSID == 0 || sqe.NSID > q.t.nn {
			return status(StInvalidNS), true
		}
		ng, uuid := q.t.namespaceIDs(sqe.NSID)
		o := 0
		for _, d := range []nvme.NSDescriptor{{Type: nvme.NIDTNGUID, ID: ng[:]}, {Type: nvme.NIDTUUID, ID: uuid[:]}, {Type: nvme.NIDTCSI, ID: []byte{0}}} {
			data[o], data[o+1] = d.Type, uint8(len(d.ID))
			copy(data[o+4:], d.ID)
			o += 4 + len(d.ID)
		}
	case nvme.CNSCSIController, nvme.CNSCSINamespace:
		// NVM command set data with no extra limits (all zero); other command sets: none.
		if csi != 0 {
			return status(StInvalidField), true
		}
		if cns == nvme.CNSCSINamespace && (sqe.NSID == 0 || sqe.NSID > q.t.nn) {
			return status(StInvalidNS), true
		}
	}
	return result{c2h: data}, true
}

// namespaceIDs derives a namespace's NGUID and UUID (RFC 9562 version 8) from the subsystem
// NQN, the backend's serial number and the NSID: stable across restarts, unique per target.
func (t *Target) namespaceIDs(nsid uint32) (nguid, uuid [16]byte) {
	h := sha256.New()
	h.Write([]byte(t.cfg.NQN))
	h.Write([]byte{0})
	h.Write([]byte(t.serial))
	h.Write(binary.LittleEndian.AppendUint32(nil, nsid))
	s := h.Sum(nil)
	copy(nguid[:], s[:16])
	copy(uuid[:], s[16:32])
	uuid[6] = uuid[6]&0x0f | 0x80
	uuid[8] = uuid[8]&0x3f | 0x80
	return nguid, uuid
}

// features answers Set/Get Features for Number of Queues, Keep Alive Timer and
// Asynchronous Event Configuration; other features go to the backend.
func (q *queue) features(sqe *SQE) (result, bool) {
	c := q.ctrl
	set := sqe.Opcode == nvme.OpSetFeatures
	fid := nvme.FeatureID(sqe.CDW[0])
	c.mu.Lock()
	defer c.mu.Unlock()
	switch fid {
	case nvme.FeatNumQueues:
		if set {
			nsqr, ncqr := sqe.CDW[1]&0xffff, sqe.CDW[1]>>16
			if nsqr == 0xffff || ncqr == 0xffff {
				return status(StInvalidField), true
			}
			c.nrIOQ = min(int(nsqr)+1, int(ncqr)+1, q.t.cfg.MaxIOQueues)
		}
		n := c.nrIOQ
		if n == 0 {
			n = q.t.cfg.MaxIOQueues
		}
		return result{dw: uint64(n-1) | uint64(n-1)<<16}, true
	case featKATO:
		if set {
			c.katoMs = sqe.CDW[1]
			c.lastKeepAlive.Store(time.Now().UnixNano())
			c.watch.Reset(0) // re-evaluated with the new timeout
		}
		return result{dw: uint64(c.katoMs)}, true
	case featAsyncEventCfg:
		if set {
			c.aecfg = sqe.CDW[1]
		}
		return result{dw: uint64(c.aecfg)}, true
	}
	return result{}, false
}

// logPage answers the Error Information, Changed Namespace List and Commands Supported and
// Effects logs; the rest (SMART, FDP) come from the backend.
func (q *queue) logPage(sqe *SQE, data []byte) (result, bool) {
	cmd := sqe.Command(data)
	p, n := nvme.ParseGetLogPage(&cmd)
	log := q.ownLog(p.LID)
	if log == nil {
		return result{}, false
	}
	if len(data) < n || p.Offset > uint64(len(log)) {
		return status(StInvalidField), true
	}
	clear(data)
	copy(data[:n], log[p.Offset:])
	return result{c2h: data[:n]}, true
}

// ownLog is a log page the target answers itself (nil for the backend's): Error
// Information (ELPE+1 empty entries), Changed Namespace List (empty) and Commands Supported
// and Effects.
func (q *queue) ownLog(lid nvme.LogID) []byte {
	switch lid {
	case nvme.LogErrorInfo:
		return make([]byte, errorEntryLen*(int(q.t.elpe)+1))
	case logChangedNSList:
		return make([]byte, changedNSLen)
	case nvme.LogCommandsEffects:
		return commandEffects()
	}
	return nil
}

// commandEffects is the Commands Supported and Effects log (LID 0x05): CSUPP for every
// opcode the target or the emulated SSD answers, LBCC for those that change data.
func commandEffects() []byte {
	const csupp, lbcc = 1 << 0, 1 << 1
	b := make([]byte, effectsLogLen)
	for _, op := range []uint8{nvme.OpGetLogPage, nvme.OpIdentify, opAbort, nvme.OpSetFeatures, nvme.OpGetFeatures, opAER, opKeepAlive} {
		le.PutUint32(b[4*int(op):], csupp)
	}
	for _, op := range []uint8{nvme.OpFlush, nvme.OpWrite, nvme.OpDatasetManagement, nvme.OpIOMgmtSend} {
		le.PutUint32(b[1024+4*int(op):], csupp|lbcc)
	}
	for _, op := range []uint8{nvme.OpRead, nvme.OpIOMgmtRecv} {
		le.PutUint32(b[1024+4*int(op):], csupp)
	}
	return b
}
