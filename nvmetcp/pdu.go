// Package nvmetcp is an NVMe/TCP target (NVMe/TCP transport specification 1.0 with NVMe over
// Fabrics): it puts any nvme.Transport — in practice the emulated FDP SSD of package emu —
// behind a TCP listener so the Linux kernel's nvme-tcp host driver attaches it as a real
// controller (/dev/nvmeX, /dev/ngXnY, /dev/nvmeXnY). The package holds the PDU codec
// (pdu.go), the submission/completion queue entry and SGL layouts (sqe.go), the Fabrics
// commands and controller properties (fabrics.go), the target and its controllers
// (target.go), one goroutine per queue connection (queue.go) and the admin commands the
// target answers itself (admin.go). See docs/nvmetcp.md.
package nvmetcp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

var le = binary.LittleEndian

// PDUType is the common header's PDU-Type field.
type PDUType uint8

// PDU types (NVMe/TCP 1.0, Figure "PDU Type"). Wire values: never change.
const (
	TypeICReq       PDUType = 0x00
	TypeICResp      PDUType = 0x01
	TypeH2CTermReq  PDUType = 0x02
	TypeC2HTermReq  PDUType = 0x03
	TypeCapsuleCmd  PDUType = 0x04
	TypeCapsuleResp PDUType = 0x05
	TypeH2CData     PDUType = 0x06
	TypeC2HData     PDUType = 0x07
	TypeR2T         PDUType = 0x09
)

func (t PDUType) String() string {
	switch t {
	case TypeICReq:
		return "ICReq"
	case TypeICResp:
		return "ICResp"
	case TypeH2CTermReq:
		return "H2CTermReq"
	case TypeC2HTermReq:
		return "C2HTermReq"
	case TypeCapsuleCmd:
		return "CapsuleCmd"
	case TypeCapsuleResp:
		return "CapsuleResp"
	case TypeH2CData:
		return "H2CData"
	case TypeC2HData:
		return "C2HData"
	case TypeR2T:
		return "R2T"
	}
	return fmt.Sprintf("PDUType(0x%02x)", uint8(t))
}

// Common header flags.
const (
	FlagHDGST   uint8 = 0x01 // a header digest follows the header
	FlagDDGST   uint8 = 0x02 // a data digest follows the data
	FlagLast    uint8 = 0x04 // H2CData/C2HData: last PDU of the transfer
	FlagSuccess uint8 = 0x08 // C2HData: the command succeeded, no CapsuleResp follows
)

// Header lengths (HLEN) per PDU type, and common header layout. Wire layout: do not change.
const (
	CommonHeaderLen = 8
	hdrTypeOff      = 0 // u8
	hdrFlagsOff     = 1 // u8
	hdrHLenOff      = 2 // u8
	hdrPDOOff       = 3 // u8
	hdrPLenOff      = 4 // u32 LE

	ICLen          = 128 // ICReq and ICResp: HLEN = PLEN = 128
	CapsuleCmdHLen = CommonHeaderLen + SQELen
	CapsuleRspHLen = CommonHeaderLen + CQELen
	DataHLen       = 24 // H2CData, C2HData
	R2THLen        = 24
	TermReqHLen    = 24
	maxTermData    = 128 // a TermReq carries at most 128 bytes of the offending header

	// ICReq / ICResp fields.
	icPFVOff     = 8  // u16 PDU format version, 0
	icPDAOff     = 10 // u8 HPDA (ICReq) / CPDA (ICResp)
	icDigestOff  = 11 // u8 bit 0 HDGST_ENABLE, bit 1 DDGST_ENABLE
	icMaxR2TOff  = 12 // u32 ICReq MAXR2T (0's based) / ICResp MAXH2CDATA
	digestHeader = 0x01
	digestData   = 0x02

	// H2CData / C2HData / R2T fields.
	dataCCCIDOff = 8  // u16 command capsule CID
	dataTTagOff  = 10 // u16 transfer tag (H2CData, R2T)
	dataOffOff   = 12 // u32 DATAO / R2TO
	dataLenOff   = 16 // u32 DATAL / R2TL

	// TermReq fields.
	termFESOff = 8  // u16 fatal error status
	termFEIOff = 10 // u32 fatal error information
)

// Fatal error status values of a TermReq.
const (
	FESInvalidHeader    uint16 = 0x01 // invalid PDU header field (FEI = byte offset)
	FESSequence         uint16 = 0x02 // PDU sequence error
	FESHeaderDigest     uint16 = 0x03
	FESDataOutOfRange   uint16 = 0x04
	FESDataLimit        uint16 = 0x05 // R2T limit exceeded
	FESUnsupportedParam uint16 = 0x06 // unsupported parameter (FEI = byte offset)
)

// Decoder errors. A PDU that fails to decode ends the connection with a TermReq.
var (
	ErrPDUHeader = errors.New("nvmetcp: invalid PDU header")
	ErrPDUType   = errors.New("nvmetcp: unknown PDU type")
	ErrPDUTooBig = errors.New("nvmetcp: PDU longer than the limit")
	ErrDigest    = errors.New("nvmetcp: digest flag not allowed on this PDU or connection")
)

// Digests says which digests a connection negotiated in ICReq/ICResp. Both are CRC32C
// (Castagnoli), stored little-endian: the header digest covers the HLEN header bytes, the
// data digest the PDU data without padding. ICReq, ICResp and TermReqs never carry them.
type Digests struct {
	Header, Data bool
}

const digestLen = 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// digestable: the PDU types that carry digests when they are enabled.
func digestable(t PDUType) bool {
	switch t {
	case TypeCapsuleCmd, TypeCapsuleResp, TypeH2CData, TypeC2HData, TypeR2T:
		return true
	}
	return false
}

// HeaderError is a decoding failure that names the offending header byte, for the TermReq.
type HeaderError struct {
	Err    error
	FES    uint16
	Offset uint32 // byte offset in the PDU header of the bad field
	Detail string
	Hdr    []byte // the header bytes read, for the TermReq (ReadPDU fills it)
}

func (e *HeaderError) Error() string {
	return fmt.Sprintf("%v: %s (byte %d)", e.Err, e.Detail, e.Offset)
}
func (e *HeaderError) Unwrap() error { return e.Err }

func hdrErr(err error, fes uint16, off uint32, format string, a ...any) error {
	return &HeaderError{Err: err, FES: fes, Offset: off, Detail: fmt.Sprintf(format, a...)}
}

// Header is the 8-byte common header every PDU starts with.
type Header struct {
	Type  PDUType
	Flags uint8
	HLen  uint8
	PDO   uint8 // PDU data offset, 0 when the PDU carries no data
	PLen  uint32
}

func (h Header) put(b []byte) {
	b[hdrTypeOff], b[hdrFlagsOff], b[hdrHLenOff], b[hdrPDOOff] = uint8(h.Type), h.Flags, h.HLen, h.PDO
	le.PutUint32(b[hdrPLenOff:], h.PLen)
}

// DecodeHeader decodes a common header and checks what can be checked from it alone: a
// known type, the HLEN that type must have, PLEN not below HLEN, and PLEN within maxPLen.
// Digest flags are refused (a connection without digests).
func DecodeHeader(b []byte, maxPLen uint32) (Header, error) {
	return DecodeHeaderDigests(b, maxPLen, Digests{})
}

// DecodeHeaderDigests is DecodeHeader on a connection with the digests dg: a digest flag is
// allowed only when negotiated, on a PDU type that carries digests.
func DecodeHeaderDigests(b []byte, maxPLen uint32, dg Digests) (Header, error) {
	if len(b) < CommonHeaderLen {
		return Header{}, hdrErr(ErrPDUHeader, FESInvalidHeader, 0, "%d bytes, need %d", len(b), CommonHeaderLen)
	}
	h := Header{Type: PDUType(b[hdrTypeOff]), Flags: b[hdrFlagsOff], HLen: b[hdrHLenOff], PDO: b[hdrPDOOff], PLen: le.Uint32(b[hdrPLenOff:])}
	want, ok := hlenOf(h.Type)
	if !ok {
		return h, hdrErr(ErrPDUType, FESInvalidHeader, hdrTypeOff, "type 0x%02x", uint8(h.Type))
	}
	if int(h.HLen) != want {
		return h, hdrErr(ErrPDUHeader, FESInvalidHeader, hdrHLenOff, "%v with HLEN %d, want %d", h.Type, h.HLen, want)
	}
	if h.PLen > maxPLen {
		return h, hdrErr(ErrPDUTooBig, FESDataLimit, hdrPLenOff, "PLEN %d above %d", h.PLen, maxPLen)
	}
	if (h.Flags&FlagHDGST != 0 && (!dg.Header || !digestable(h.Type))) || (h.Flags&FlagDDGST != 0 && (!dg.Data || !digestable(h.Type))) {
		return h, hdrErr(ErrDigest, FESInvalidHeader, hdrFlagsOff, "%v with flags 0x%02x", h.Type, h.Flags)
	}
	end := uint32(h.HLen) // end of the header and its digest
	if h.Flags&FlagHDGST != 0 {
		end += digestLen
	}
	if h.PLen < end {
		return h, hdrErr(ErrPDUHeader, FESInvalidHeader, hdrPLenOff, "PLEN %d below the header's %d bytes", h.PLen, end)
	}
	switch h.Type {
	case TypeICReq, TypeICResp:
		if h.PLen != ICLen {
			return h, hdrErr(ErrPDUHeader, FESInvalidHeader, hdrPLenOff, "%v with PLEN %d, want %d", h.Type, h.PLen, ICLen)
		}
	case TypeH2CTermReq, TypeC2HTermReq:
		if h.PLen > TermReqHLen+maxTermData {
			return h, hdrErr(ErrPDUHeader, FESInvalidHeader, hdrPLenOff, "%v with PLEN %d", h.Type, h.PLen)
		}
	case TypeCapsuleResp, TypeR2T:
		if h.PLen != end {
			return h, hdrErr(ErrPDUHeader, FESInvalidHeader, hdrPLenOff, "%v with PLEN %d, want %d", h.Type, h.PLen, end)
		}
	}
	if h.Flags&FlagDDGST != 0 && h.PLen == end {
		return h, hdrErr(ErrDigest, FESInvalidHeader, hdrFlagsOff, "data digest flag on a PDU without data")
	}
	// Data, when present, starts at PDO, which lies between the header (and its digest) and
	// the end (less the data digest).
	if h.PLen > end && h.Type != TypeH2CTermReq && h.Type != TypeC2HTermReq {
		tail := h.PLen
		if h.Flags&FlagDDGST != 0 {
			tail -= digestLen
		}
		if uint32(h.PDO) < end || uint32(h.PDO) > tail {
			return h, hdrErr(ErrPDUHeader, FESInvalidHeader, hdrPDOOff, "PDO %d outside [%d, %d]", h.PDO, end, tail)
		}
	}
	return h, nil
}

func hlenOf(t PDUType) (int, bool) {
	switch t {
	case TypeICReq, TypeICResp:
		return ICLen, true
	case TypeH2CTermReq, TypeC2HTermReq:
		return TermReqHLen, true
	case TypeCapsuleCmd:
		return CapsuleCmdHLen, true
	case TypeCapsuleResp:
		return CapsuleRspHLen, true
	case TypeH2CData, TypeC2HData:
		return DataHLen, true
	case TypeR2T:
		return R2THLen, true
	}
	return 0, false
}

// PDU is one decoded PDU: the common header, the whole header (HLEN bytes, common header
// included) and the data (PDO up to the data digest or PLEN; for a TermReq, the bytes after
// the header). DataDigestBad reports a data digest that did not match: the PDU is otherwise
// sound, and the command it belongs to fails with a transient transport error.
type PDU struct {
	Header
	Hdr           []byte
	Data          []byte
	DataDigestBad bool
}

// DecodePDU decodes one whole PDU (exactly PLEN bytes) of a connection without digests, and
// checks the per-type fields that bound the data: an H2CData/C2HData's DATAL must equal its
// data length.
func DecodePDU(b []byte, maxPLen uint32) (*PDU, error) {
	return DecodePDUDigests(b, maxPLen, Digests{})
}

// DecodePDUDigests is DecodePDU on a connection with the digests dg; a header digest that
// does not match is an error (FES header digest), a data digest is reported in the PDU.
func DecodePDUDigests(b []byte, maxPLen uint32, dg Digests) (*PDU, error) {
	h, err := DecodeHeaderDigests(b, maxPLen, dg)
	if err != nil {
		return nil, err
	}
	if uint32(len(b)) != h.PLen {
		return nil, hdrErr(ErrPDUHeader, FESInvalidHeader, hdrPLenOff, "PLEN %d but %d bytes", h.PLen, len(b))
	}
	p := &PDU{Header: h, Hdr: b[:h.HLen]}
	end := uint32(h.HLen)
	if h.Flags&FlagHDGST != 0 {
		if got, want := le.Uint32(b[h.HLen:]), crc32c(p.Hdr); got != want {
			return nil, hdrErr(ErrPDUHeader, FESHeaderDigest, uint32(h.HLen), "header digest %#08x, computed %#08x", got, want)
		}
		end += digestLen
	}
	switch {
	case h.Type == TypeH2CTermReq || h.Type == TypeC2HTermReq:
		p.Data = b[h.HLen:]
	case h.PLen > end:
		tail := h.PLen
		if h.Flags&FlagDDGST != 0 {
			tail -= digestLen
			p.DataDigestBad = le.Uint32(b[tail:]) != crc32c(b[h.PDO:tail])
		}
		p.Data = b[h.PDO:tail]
	}
	if h.Type == TypeH2CData || h.Type == TypeC2HData {
		if n := le.Uint32(p.Hdr[dataLenOff:]); n != uint32(len(p.Data)) || n == 0 {
			return nil, hdrErr(ErrPDUHeader, FESInvalidHeader, dataLenOff, "DATAL %d but %d data bytes", n, len(p.Data))
		}
	}
	return p, nil
}

// ReadPDU reads one PDU from r on a connection without digests: the common header first,
// checked before the rest is read so a bad PLEN never makes it allocate or wait for more
// than maxPLen bytes.
func ReadPDU(r io.Reader, maxPLen uint32) (*PDU, error) {
	return ReadPDUDigests(r, maxPLen, Digests{})
}

// ReadPDUDigests is ReadPDU on a connection with the digests dg.
func ReadPDUDigests(r io.Reader, maxPLen uint32, dg Digests) (*PDU, error) {
	var hb [maxHeadLen]byte
	h, head, err := readHead(r, hb[:], maxPLen, dg, nil)
	if err != nil {
		return nil, err
	}
	b := make([]byte, h.PLen)
	copy(b, head)
	if _, err := io.ReadFull(r, b[len(head):]); err != nil {
		return nil, eofMidPDU(err)
	}
	p, err := DecodePDUDigests(b, maxPLen, dg)
	if err != nil {
		var he *HeaderError
		if errors.As(err, &he) {
			he.Hdr = b[:min(len(b), int(h.HLen))]
		}
	}
	return p, err
}

// maxHeadLen bounds what readHead reads before a PDU's data: PDO is one byte, and PDUs
// without data (ICReq 128, TermReq at most 152, the rest HLEN plus a digest) are shorter.
const maxHeadLen = 256

func eofMidPDU(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readHead reads a PDU up to its data into buf (at least maxHeadLen bytes): the common
// header, checked before anything else is read (onCH, when set, sees it then), the PDU
// header, its digest — verified — and the padding up to PDO. For a PDU without data (and a
// TermReq) that is the whole PDU. The caller reads the dataLen(h) data bytes and the data
// digest next, wherever it wants them. On a HeaderError, its Hdr holds the bytes read.
func readHead(r io.Reader, buf []byte, maxPLen uint32, dg Digests, onCH func(Header)) (Header, []byte, error) {
	if _, err := io.ReadFull(r, buf[:CommonHeaderLen]); err != nil {
		return Header{}, nil, err
	}
	h, err := DecodeHeaderDigests(buf[:CommonHeaderLen], maxPLen, dg)
	if err != nil {
		var he *HeaderError
		if errors.As(err, &he) {
			he.Hdr = append([]byte(nil), buf[:CommonHeaderLen]...)
		}
		return h, nil, err
	}
	if onCH != nil {
		onCH(h)
	}
	n := headLen(h)
	if _, err := io.ReadFull(r, buf[CommonHeaderLen:n]); err != nil {
		return h, nil, eofMidPDU(err)
	}
	if h.Flags&FlagHDGST != 0 {
		if got, want := le.Uint32(buf[h.HLen:]), crc32c(buf[:h.HLen]); got != want {
			err := hdrErr(ErrPDUHeader, FESHeaderDigest, uint32(h.HLen), "header digest %#08x, computed %#08x", got, want)
			err.(*HeaderError).Hdr = append([]byte(nil), buf[:h.HLen]...)
			return h, nil, err
		}
	}
	return h, buf[:n], nil
}

// headLen is how many bytes of a checked header's PDU come before its data: up to PDO when
// the PDU is longer than its header and header digest, the whole PDU otherwise (and for a
// TermReq, whose bytes after the header are the offending header, not data).
func headLen(h Header) int {
	if h.Type == TypeH2CTermReq || h.Type == TypeC2HTermReq {
		return int(h.PLen)
	}
	end := uint32(h.HLen)
	if h.Flags&FlagHDGST != 0 {
		end += digestLen
	}
	if h.PLen > end {
		return int(h.PDO)
	}
	return int(end)
}

// dataLen is the PDU data length of a checked header: what follows headLen, less the data
// digest. headLen + dataLen (+ 4 with DDGST) = PLEN.
func dataLen(h Header) int {
	n := int(h.PLen) - headLen(h)
	if n > 0 && h.Flags&FlagDDGST != 0 {
		n -= digestLen
	}
	return n
}

// Frame returns a PDU's bytes for a connection with the digests dg and peer data alignment
// pda: hdr is the PDU's header as the Append functions build it without digests (its data,
// if any, not included); the result is the header with flags, PDO and PLEN updated, its
// digest and the padding (head), and the data digest to send after data (tail, may be nil).
func Frame(hdr, data []byte, dg Digests, pda uint8) (head, tail []byte) {
	hlen := int(hdr[hdrHLenOff])
	head = append([]byte(nil), hdr[:hlen]...)
	hd := dg.Header && digestable(PDUType(head[hdrTypeOff]))
	dd := dg.Data && digestable(PDUType(head[hdrTypeOff])) && len(data) > 0
	flags := head[hdrFlagsOff] &^ (FlagHDGST | FlagDDGST)
	end := hlen
	if hd {
		flags |= FlagHDGST
		end += digestLen
	}
	pdo, plen := 0, end
	if len(data) > 0 {
		pdo = alignUp(end, (int(pda)+1)*4)
		plen = pdo + len(data)
	}
	if dd {
		flags |= FlagDDGST
		plen += digestLen
		tail = le.AppendUint32(nil, crc32c(data))
	}
	head[hdrFlagsOff], head[hdrPDOOff] = flags, uint8(pdo)
	le.PutUint32(head[hdrPLenOff:], uint32(plen))
	if hd {
		head = le.AppendUint32(head, crc32c(head[:hlen]))
	}
	if pdo > end {
		head = append(head, make([]byte, pdo-end)...)
	}
	return head, tail
}

// ICReq is the host's connection initialisation request.
type ICReq struct {
	PFV    uint16
	HPDA   uint8 // host PDU data alignment: data starts at a multiple of (HPDA+1)*4
	Digest uint8 // bit 0 header digest, bit 1 data digest requested
	MaxR2T uint32
}

// ICResp is the controller's answer.
type ICResp struct {
	PFV        uint16
	CPDA       uint8
	Digest     uint8
	MaxH2CData uint32
}

// DecodeICReq decodes an ICReq PDU.
func DecodeICReq(p *PDU) (ICReq, error) {
	if p.Type != TypeICReq {
		return ICReq{}, hdrErr(ErrPDUHeader, FESSequence, hdrTypeOff, "expected ICReq, got %v", p.Type)
	}
	return ICReq{PFV: le.Uint16(p.Hdr[icPFVOff:]), HPDA: p.Hdr[icPDAOff], Digest: p.Hdr[icDigestOff], MaxR2T: le.Uint32(p.Hdr[icMaxR2TOff:])}, nil
}

// DecodeICResp decodes an ICResp PDU.
func DecodeICResp(p *PDU) (ICResp, error) {
	if p.Type != TypeICResp {
		return ICResp{}, hdrErr(ErrPDUHeader, FESSequence, hdrTypeOff, "expected ICResp, got %v", p.Type)
	}
	return ICResp{PFV: le.Uint16(p.Hdr[icPFVOff:]), CPDA: p.Hdr[icPDAOff], Digest: p.Hdr[icDigestOff], MaxH2CData: le.Uint32(p.Hdr[icMaxR2TOff:])}, nil
}

func appendIC(dst []byte, t PDUType, pfv uint16, pda, digest uint8, v uint32) []byte {
	b := make([]byte, ICLen)
	Header{Type: t, HLen: ICLen, PLen: ICLen}.put(b)
	le.PutUint16(b[icPFVOff:], pfv)
	b[icPDAOff], b[icDigestOff] = pda, digest
	le.PutUint32(b[icMaxR2TOff:], v)
	return append(dst, b...)
}

// AppendICReq appends an encoded ICReq.
func AppendICReq(dst []byte, r ICReq) []byte {
	return appendIC(dst, TypeICReq, r.PFV, r.HPDA, r.Digest, r.MaxR2T)
}

// AppendICResp appends an encoded ICResp.
func AppendICResp(dst []byte, r ICResp) []byte {
	return appendIC(dst, TypeICResp, r.PFV, r.CPDA, r.Digest, r.MaxH2CData)
}

// alignUp rounds n up to a multiple of a (a > 0).
func alignUp(n, a int) int { return (n + a - 1) / a * a }

// AppendCapsuleCmd appends a command capsule: the 64-byte SQE and optional in-capsule data,
// placed at a multiple of (cpda+1)*4 bytes.
func AppendCapsuleCmd(dst []byte, sqe *[SQELen]byte, data []byte, cpda uint8) []byte {
	h := Header{Type: TypeCapsuleCmd, HLen: CapsuleCmdHLen, PLen: CapsuleCmdHLen}
	pad := 0
	if len(data) > 0 {
		pdo := alignUp(CapsuleCmdHLen, (int(cpda)+1)*4)
		pad = pdo - CapsuleCmdHLen
		h.PDO, h.PLen = uint8(pdo), uint32(pdo+len(data))
	}
	var ch [CommonHeaderLen]byte
	h.put(ch[:])
	dst = append(dst, ch[:]...)
	dst = append(dst, sqe[:]...)
	dst = append(dst, make([]byte, pad)...)
	return append(dst, data...)
}

// AppendCapsuleResp appends a response capsule carrying a 16-byte CQE.
func AppendCapsuleResp(dst []byte, cqe CQE) []byte {
	var b [CapsuleRspHLen]byte
	Header{Type: TypeCapsuleResp, HLen: CapsuleRspHLen, PLen: CapsuleRspHLen}.put(b[:])
	cqe.Put(b[CommonHeaderLen:])
	return append(dst, b[:]...)
}

// DataPDU is the header of an H2CData or C2HData PDU, or (with Offset/Length as R2TO/R2TL)
// of an R2T.
type DataPDU struct {
	CCCID  uint16
	TTag   uint16
	Offset uint32
	Length uint32
}

// DecodeDataPDU decodes the fields of an H2CData, C2HData or R2T header.
func DecodeDataPDU(p *PDU) DataPDU {
	return DataPDU{
		CCCID: le.Uint16(p.Hdr[dataCCCIDOff:]), TTag: le.Uint16(p.Hdr[dataTTagOff:]),
		Offset: le.Uint32(p.Hdr[dataOffOff:]), Length: le.Uint32(p.Hdr[dataLenOff:]),
	}
}

// AppendDataHeader appends the header (and alignment padding) of an H2CData or C2HData PDU
// whose Length data bytes the caller writes next; pda is the peer's required alignment.
func AppendDataHeader(dst []byte, t PDUType, flags uint8, d DataPDU, pda uint8) []byte {
	pdo := alignUp(DataHLen, (int(pda)+1)*4)
	var b [DataHLen]byte
	Header{Type: t, Flags: flags, HLen: DataHLen, PDO: uint8(pdo), PLen: uint32(pdo) + d.Length}.put(b[:])
	le.PutUint16(b[dataCCCIDOff:], d.CCCID)
	le.PutUint16(b[dataTTagOff:], d.TTag)
	le.PutUint32(b[dataOffOff:], d.Offset)
	le.PutUint32(b[dataLenOff:], d.Length)
	dst = append(dst, b[:]...)
	return append(dst, make([]byte, pdo-DataHLen)...)
}

// AppendR2T appends a ready-to-transfer PDU asking for Length bytes at Offset.
func AppendR2T(dst []byte, d DataPDU) []byte {
	var b [R2THLen]byte
	Header{Type: TypeR2T, HLen: R2THLen, PLen: R2THLen}.put(b[:])
	le.PutUint16(b[dataCCCIDOff:], d.CCCID)
	le.PutUint16(b[dataTTagOff:], d.TTag)
	le.PutUint32(b[dataOffOff:], d.Offset)
	le.PutUint32(b[dataLenOff:], d.Length)
	return append(dst, b[:]...)
}

// TermReq is a connection termination request's fields.
type TermReq struct {
	FES uint16
	FEI uint32
}

// DecodeTermReq decodes an H2CTermReq or C2HTermReq.
func DecodeTermReq(p *PDU) TermReq {
	return TermReq{FES: le.Uint16(p.Hdr[termFESOff:]), FEI: le.Uint32(p.Hdr[termFEIOff:])}
}

// AppendTermReq appends a termination request of type t carrying up to 128 bytes of the
// offending PDU header.
func AppendTermReq(dst []byte, t PDUType, tr TermReq, bad []byte) []byte {
	if len(bad) > maxTermData {
		bad = bad[:maxTermData]
	}
	var b [TermReqHLen]byte
	Header{Type: t, HLen: TermReqHLen, PLen: uint32(TermReqHLen + len(bad))}.put(b[:])
	le.PutUint16(b[termFESOff:], tr.FES)
	le.PutUint32(b[termFEIOff:], tr.FEI)
	dst = append(dst, b[:]...)
	return append(dst, bad...)
}
