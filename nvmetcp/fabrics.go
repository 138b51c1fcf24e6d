package nvmetcp

import (
	"bytes"
	"fmt"

	"github.com/rbctl/rbctl/nvme"
)

// Fabrics command types (SQE byte 4 when the opcode is 0x7F). Wire values: never change.
const (
	FCTypePropertySet uint8 = 0x00
	FCTypeConnect     uint8 = 0x01
	FCTypePropertyGet uint8 = 0x04
	FCTypeAuthSend    uint8 = 0x05
	FCTypeAuthRecv    uint8 = 0x06
	FCTypeDisconnect  uint8 = 0x08
)

// Fabrics command fields (byte offsets in the SQE). Wire layout: do not change.
const (
	connRecFmtOff = 40 // u16 record format, 0
	connQIDOff    = 42 // u16 queue ID
	connSQSizeOff = 44 // u16 submission queue size, 0's based
	connCAttrOff  = 46 // u8 connect attributes: bit 2 disable SQ flow control
	connKATOOff   = 48 // u32 keep alive timeout, ms
	propAttribOff = 40 // u8 bits 2:0: 0 = 4-byte property, 1 = 8-byte
	propOffsetOff = 44 // u32 property offset
	propValueOff  = 48 // u64 Property Set value

	cattrDisableSQFlow = 1 << 2

	// Connect data (1024 bytes, in the command's data).
	ConnectDataLen    = 1024
	connDataHostID    = 0   // 16 bytes
	connDataCNTLID    = 16  // u16, 0xFFFF = any (dynamic controller model)
	connDataSubNQN    = 256 // 256 bytes, NUL-terminated
	connDataHostNQN   = 512 // 256 bytes
	nqnFieldLen       = 256
	DynamicController = 0xFFFF
)

// Controller properties (offsets in the property space, NVMe over Fabrics "Properties").
const (
	PropCAP  uint32 = 0x00 // 8 bytes
	PropVS   uint32 = 0x08
	PropCC   uint32 = 0x14
	PropCSTS uint32 = 0x1C
	PropNSSR uint32 = 0x20

	ccEN       = 1 << 0
	ccSHNShift = 14
	ccSHNMask  = 3 << ccSHNShift
	cstsRDY    = 1 << 0
	cstsSHST   = 2 << 2 // shutdown processing complete
)

// Status values the target returns itself (Linux passthrough form: SC | SCT<<8 | DNR<<14).
const (
	dnr                   nvme.Status = 1 << 14
	StInvalidOpcode                   = 0x01 | dnr
	StInvalidField                    = 0x02 | dnr
	StDataXfer            nvme.Status = 0x04
	StInternal            nvme.Status = 0x06
	StTransientTransport  nvme.Status = 0x22 // e.g. a data digest error; the host may retry
	StInvalidNS                       = 0x0B | dnr
	StSeqError                        = 0x0C | dnr
	StSGLLength                       = 0x0F | dnr
	StSGLType                         = 0x11 | dnr
	StSGLOffset                       = 0x16 | dnr
	StInvalidQID                      = 0x101 | dnr
	StInvalidQSize                    = 0x102 | dnr
	StAERLimit                        = 0x105 | dnr
	StFeatNotChangeable               = 0x10E | dnr
	StConnectIncompatible             = 0x180 | dnr
	StConnectBusy         nvme.Status = 0x181
	StConnectInvalidParam             = 0x182 | dnr
	StConnectInvalidHost              = 0x184 | dnr
)

// ConnectData is the decoded data of a Connect command.
type ConnectData struct {
	HostID  [16]byte
	CNTLID  uint16
	SubNQN  string
	HostNQN string
}

// DecodeConnectData decodes the 1024-byte Connect data.
func DecodeConnectData(b []byte) (ConnectData, error) {
	if len(b) < ConnectDataLen {
		return ConnectData{}, fmt.Errorf("%w: Connect data of %d bytes, need %d", nvme.ErrShortData, len(b), ConnectDataLen)
	}
	var d ConnectData
	copy(d.HostID[:], b[connDataHostID:])
	d.CNTLID = le.Uint16(b[connDataCNTLID:])
	d.SubNQN = cString(b[connDataSubNQN : connDataSubNQN+nqnFieldLen])
	d.HostNQN = cString(b[connDataHostNQN : connDataHostNQN+nqnFieldLen])
	return d, nil
}

// Encode returns the 1024-byte Connect data.
func (d ConnectData) Encode() []byte {
	b := make([]byte, ConnectDataLen)
	copy(b[connDataHostID:], d.HostID[:])
	le.PutUint16(b[connDataCNTLID:], d.CNTLID)
	copy(b[connDataSubNQN:connDataSubNQN+nqnFieldLen-1], d.SubNQN)
	copy(b[connDataHostNQN:connDataHostNQN+nqnFieldLen-1], d.HostNQN)
	return b
}

func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// ConnectCommand builds a Fabrics Connect for queue qid (0 = admin) with a 0's based
// submission queue size, keep-alive timeout in ms (admin queue only) and attributes.
func ConnectCommand(qid, sqsize uint16, cattr uint8, katoMs uint32) [SQELen]byte {
	var b [SQELen]byte
	b[sqeOpcode], b[sqeFlags], b[sqeFCType] = opFabrics, 0x40, FCTypeConnect
	le.PutUint16(b[connQIDOff:], qid)
	le.PutUint16(b[connSQSizeOff:], sqsize)
	b[connCAttrOff] = cattr
	le.PutUint32(b[connKATOOff:], katoMs)
	return b
}

// PropertyCommand builds a Property Get (set=false) or Set of the property at off; size8
// selects an 8-byte property.
func PropertyCommand(set bool, off uint32, size8 bool, value uint64) [SQELen]byte {
	var b [SQELen]byte
	b[sqeOpcode], b[sqeFlags], b[sqeFCType] = opFabrics, 0x40, FCTypePropertyGet
	if set {
		b[sqeFCType] = FCTypePropertySet
		le.PutUint64(b[propValueOff:], value)
	}
	if size8 {
		b[propAttribOff] = 1
	}
	le.PutUint32(b[propOffsetOff:], off)
	return b
}
