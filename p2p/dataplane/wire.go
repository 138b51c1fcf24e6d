// Package dataplane is the bulk plane of rbctl's cache peers: a framed protocol over its own
// TCP connections that moves the payloads of chunks a peer has locked under a lease (the
// control plane, gRPC, hands out the lease). Every chunk carries the CRC-32C its source
// stored; the receiver checks size and checksum against what the lease promised before it
// hands the bytes on, so a corrupted or truncated transfer is a miss, never wrong bytes.
// The byte layout is documented in docs/p2p.md ("Data plane").
package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// Wire constants. Part of the protocol: do not change.
const (
	Magic   = "RBDP" // first 4 bytes of both handshakes
	Version = 1

	helloLen     = 8  // magic, version u16, flags u16
	helloAckLen  = 12 // magic, version u16, flags u16, max_chunk u32
	requestHead  = 12 // type u8, flags u8, count u16, lease u64
	chunkHeadLen = 16 // status u8, reserved [3], index u32, size u32, crc u32

	reqFetch  = 1
	reqLookup = 2 // lookup.go

	// featLeaseFlags, in a server's hello ack flags: it takes the request flags below. A
	// client sends them only to a server that announced it (an older one refuses a request
	// whose flags byte is not 0), so no Version bump: both sides still speak version 1.
	featLeaseFlags = 1 << 0
	// featLookups, in a server's hello ack flags: it takes lookup requests (lookup.go).
	featLookups = 1 << 1

	// MaxBatch is the most chunk indexes one request may name.
	MaxBatch = 256
	// MaxChunkLimit bounds what any handshake may announce (a slot is far smaller).
	MaxChunkLimit = 1 << 30
)

// Status says what happened to one requested chunk.
type Status uint8

const (
	StatusOK       Status = 0
	StatusNoLease  Status = 1 // unknown or expired lease
	StatusBadIndex Status = 2 // index outside the lease's hits
	StatusReadErr  Status = 3 // the source could not read the chunk (device error, checksum)
	StatusBusy     Status = 4 // the source's transfer budget is exhausted
	StatusMiss     Status = 5 // lookup requests: the source holds no lease on this key (not held, or after a key it does not hold)
	StatusRefused  Status = 6 // lookup requests: the request's token, or one of its keys, is refused
	statusMax             = StatusRefused
)

func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusNoLease:
		return "no such lease"
	case StatusBadIndex:
		return "index out of range"
	case StatusReadErr:
		return "read failed"
	case StatusBusy:
		return "busy"
	case StatusMiss:
		return "not held"
	case StatusRefused:
		return "refused"
	}
	return fmt.Sprintf("status %d", uint8(s))
}

// Decoding errors; match with errors.Is.
var (
	ErrBadMagic   = errors.New("data plane: bad magic")
	ErrBadVersion = errors.New("data plane: unsupported version")
	ErrFrame      = errors.New("data plane: malformed frame")
	ErrTooLarge   = errors.New("data plane: frame exceeds its bound")
	ErrChecksum   = errors.New("data plane: checksum mismatch")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC-32C the engine stores for payloads (engine PayloadChecksum).
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Flags ask a server for more than the chunks of a request (servers that announce
// featLeaseFlags in their hello ack).
type Flags uint8

const (
	// FlagWait: the lease may not be granted yet (the client asked for it on the control
	// plane at the same time, proposing its id); the server waits for it up to its
	// ServerConfig.LeaseWait before it answers "no such lease".
	FlagWait Flags = 1 << 0
	// FlagRelease: the client's last request on the lease; the server releases it once the
	// answer is written (or failed), and the client sends no Unlock.
	FlagRelease Flags = 1 << 1
	flagsKnown        = FlagWait | FlagRelease
)

// Request asks for chunks of a lease, by their index in the lease's hit list; or, a
// lookup request (Keys set; lookup.go), for the chunks of keys, which the server leases
// for the request's own length.
type Request struct {
	Lease   uint64
	Flags   Flags
	Indexes []uint32

	Keys  []string // a lookup request: 1..MaxBatch keys (Lease, Flags and Indexes unset)
	Token string   // a lookup request's access token ("": none)
}

// ChunkHeader precedes each chunk's bytes in a response (in request order).
type ChunkHeader struct {
	Status Status
	Index  uint32
	Size   uint32 // 0 unless Status is StatusOK
	CRC    uint32 // CRC-32C of the Size bytes that follow
}

func appendHello(b []byte) []byte { return appendHelloFlags(b, 0) }

func appendHelloFlags(b []byte, flags uint16) []byte {
	b = append(b, Magic...)
	b = binary.LittleEndian.AppendUint16(b, Version)
	return binary.LittleEndian.AppendUint16(b, flags)
}

// parseHello checks a client's hello.
func parseHello(b []byte) error {
	if len(b) != helloLen {
		return ErrFrame
	}
	if string(b[:4]) != Magic {
		return ErrBadMagic
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != Version {
		return fmt.Errorf("%w %d (this node speaks %d)", ErrBadVersion, v, Version)
	}
	return nil
}

func appendHelloAck(b []byte, maxChunk uint32) []byte { return appendHelloAckFlags(b, 0, maxChunk) }

func appendHelloAckFlags(b []byte, flags uint16, maxChunk uint32) []byte {
	b = appendHelloFlags(b, flags)
	return binary.LittleEndian.AppendUint32(b, maxChunk)
}

// parseHelloAck checks a server's answer and returns the largest chunk it sends.
func parseHelloAck(b []byte) (uint32, error) {
	m, _, err := parseHelloAckFlags(b)
	return m, err
}

// parseHelloAckFlags is parseHelloAck with the features the server announces (bits other
// than featLeaseFlags are ignored: a later server may announce more).
func parseHelloAckFlags(b []byte) (uint32, uint16, error) {
	if len(b) != helloAckLen {
		return 0, 0, ErrFrame
	}
	if err := parseHello(b[:helloLen]); err != nil {
		return 0, 0, err
	}
	m := binary.LittleEndian.Uint32(b[8:])
	if m == 0 || m > MaxChunkLimit {
		return 0, 0, fmt.Errorf("%w: max chunk %d", ErrTooLarge, m)
	}
	return m, binary.LittleEndian.Uint16(b[6:]), nil
}

// AppendRequest encodes r.
func AppendRequest(b []byte, r Request) ([]byte, error) {
	if len(r.Indexes) == 0 || len(r.Indexes) > MaxBatch {
		return b, fmt.Errorf("%w: %d indexes (1..%d)", ErrTooLarge, len(r.Indexes), MaxBatch)
	}
	if r.Flags&^flagsKnown != 0 {
		return b, fmt.Errorf("%w: request flags %#x", ErrFrame, uint8(r.Flags))
	}
	b = append(b, reqFetch, byte(r.Flags))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(r.Indexes)))
	b = binary.LittleEndian.AppendUint64(b, r.Lease)
	for _, i := range r.Indexes {
		b = binary.LittleEndian.AppendUint32(b, i)
	}
	return b, nil
}

// ReadRequest decodes one request from r: a fetch, reading at most requestHead+4*MaxBatch
// bytes, or a lookup (readLookup), at most lookupHead+MaxLookupBytes.
func ReadRequest(r io.Reader) (Request, error) {
	var h [requestHead]byte
	if _, err := io.ReadFull(r, h[:4]); err != nil {
		return Request{}, err
	}
	n := int(binary.LittleEndian.Uint16(h[2:]))
	switch {
	case h[0] == reqLookup && h[1] == 0:
		return readLookup(r, h[:4], n)
	case h[0] != reqFetch || Flags(h[1])&^flagsKnown != 0:
		return Request{}, fmt.Errorf("%w: request type %d flags %#x", ErrFrame, h[0], h[1])
	case n == 0 || n > MaxBatch:
		return Request{}, fmt.Errorf("%w: %d indexes (1..%d)", ErrTooLarge, n, MaxBatch)
	}
	if _, err := io.ReadFull(r, h[4:]); err != nil {
		return Request{}, noEOF(err)
	}
	body := make([]byte, 4*n)
	if _, err := io.ReadFull(r, body); err != nil {
		return Request{}, noEOF(err)
	}
	req := Request{Lease: binary.LittleEndian.Uint64(h[4:]), Flags: Flags(h[1]), Indexes: make([]uint32, n)}
	for i := range req.Indexes {
		req.Indexes[i] = binary.LittleEndian.Uint32(body[4*i:])
	}
	return req, nil
}

// AppendChunkHeader encodes h.
func AppendChunkHeader(b []byte, h ChunkHeader) []byte {
	b = append(b, byte(h.Status), 0, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, h.Index)
	b = binary.LittleEndian.AppendUint32(b, h.Size)
	return binary.LittleEndian.AppendUint32(b, h.CRC)
}

// ReadChunkHeader decodes one chunk header; a size above maxChunk is refused before any
// payload byte is read, so a peer cannot make the reader allocate more than its bound.
func ReadChunkHeader(r io.Reader, maxChunk uint32) (ChunkHeader, error) {
	var b [chunkHeadLen]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return ChunkHeader{}, err
	}
	h := ChunkHeader{
		Status: Status(b[0]),
		Index:  binary.LittleEndian.Uint32(b[4:]),
		Size:   binary.LittleEndian.Uint32(b[8:]),
		CRC:    binary.LittleEndian.Uint32(b[12:]),
	}
	switch {
	case b[1] != 0 || b[2] != 0 || b[3] != 0 || h.Status > statusMax:
		return ChunkHeader{}, fmt.Errorf("%w: chunk header status %d", ErrFrame, b[0])
	case h.Status != StatusOK && (h.Size != 0 || h.CRC != 0):
		return ChunkHeader{}, fmt.Errorf("%w: %s chunk with %d bytes", ErrFrame, h.Status, h.Size)
	case h.Size > maxChunk:
		return ChunkHeader{}, fmt.Errorf("%w: chunk of %d bytes, bound %d", ErrTooLarge, h.Size, maxChunk)
	}
	return h, nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
