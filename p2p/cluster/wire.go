package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
)

// Sentinel errors of the decoders; every rejection wraps one of them.
var (
	// ErrMalformed marks bytes from a peer that do not decode: truncated, trailing, out of
	// range or of an unknown kind.
	ErrMalformed = errors.New("malformed cluster message")
	// ErrFilterTooLarge marks a remote filter above the configured cap.
	ErrFilterTooLarge = errors.New("remote filter above the size cap")
)

// Message kinds. Part of the wire format between nodes (docs/p2p-cluster.md): do not change.
const (
	kindDelta  byte = 1 // bits of one filter that changed since the previous version
	kindFull   byte = 2 // a whole filter
	kindWant   byte = 3 // "send me your whole filter"
	kindDigest byte = 4 // the version of a filter, for push-pull anti-entropy

	metaVersion byte = 1

	maxNameLen = 64  // node names: see validName
	maxAddrLen = 200 // advertised host:port in the node meta

	// deltaHeader is kind, name length, name (at most maxNameLen), epoch, from, count.
	deltaHeader = 1 + 1 + maxNameLen + 8 + 8 + 2
	// maxDeltaBytes keeps a delta inside one datagram (memberlist's 1400-byte UDP
	// buffer, less its label and encryption overhead).
	maxDeltaBytes     = 1024
	maxDeltaPositions = (maxDeltaBytes - deltaHeader) / 4
	fullHeader        = 1 + 1 + 8 + 8 + 4 + 1 // plus the name
	positionValue     = 1 << 31               // top bit of a delta position: the bit's new value
)

// encodeMeta builds a node's memberlist meta: the addresses of its two planes.
//
//	0  version (1)
//	1  control length n, then n bytes
//	.  data length m, then m bytes
func encodeMeta(control, data string) ([]byte, error) {
	for _, a := range []string{control, data} {
		if err := checkAddr(a); err != nil {
			return nil, err
		}
	}
	b := []byte{metaVersion, byte(len(control))}
	b = append(b, control...)
	b = append(b, byte(len(data)))
	return append(b, data...), nil
}

// decodeMeta parses what encodeMeta built; anything else is ErrMalformed.
func decodeMeta(b []byte) (control, data string, err error) {
	if len(b) < 3 || b[0] != metaVersion {
		return "", "", fmt.Errorf("%w: node meta of %d bytes, version %v", ErrMalformed, len(b), first(b))
	}
	r := reader{b: b[1:]}
	control, data = r.str(), r.str()
	if r.err != nil || len(r.b) != 0 {
		return "", "", fmt.Errorf("%w: node meta of %d bytes does not parse", ErrMalformed, len(b))
	}
	for _, a := range []string{control, data} {
		if err := checkAddr(a); err != nil {
			return "", "", fmt.Errorf("%w: node meta: %v", ErrMalformed, err)
		}
	}
	return control, data, nil
}

// checkAddr accepts "" (plane not served) or a bounded host:port.
func checkAddr(a string) error {
	if a == "" {
		return nil
	}
	if len(a) > maxAddrLen {
		return fmt.Errorf("address of %d bytes is above %d", len(a), maxAddrLen)
	}
	if _, _, err := net.SplitHostPort(a); err != nil {
		return fmt.Errorf("address %q is not host:port", a)
	}
	return nil
}

func first(b []byte) any {
	if len(b) == 0 {
		return "none"
	}
	return b[0]
}

// delta is one step of a filter: the positions whose bit changed from version from to from+1.
type delta struct {
	origin    string
	epoch     uint64
	from      uint64
	positions []uint32 // low 31 bits: position; top bit: the new value
}

func (d delta) encode() []byte {
	b := make([]byte, 0, 1+1+len(d.origin)+18+4*len(d.positions))
	b = append(b, kindDelta, byte(len(d.origin)))
	b = append(b, d.origin...)
	b = binary.LittleEndian.AppendUint64(b, d.epoch)
	b = binary.LittleEndian.AppendUint64(b, d.from)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(d.positions)))
	for _, p := range d.positions {
		b = binary.LittleEndian.AppendUint32(b, p)
	}
	return b
}

// full is a whole published filter.
type full struct {
	origin  string
	epoch   uint64
	version uint64
	filter  *bitFilter
}

func (f full) encode() []byte {
	b := make([]byte, 0, fullHeader+len(f.origin)+f.filter.bytes())
	b = append(b, kindFull, byte(len(f.origin)))
	b = append(b, f.origin...)
	b = binary.LittleEndian.AppendUint64(b, f.epoch)
	b = binary.LittleEndian.AppendUint64(b, f.version)
	b = binary.LittleEndian.AppendUint32(b, f.filter.bits)
	b = append(b, f.filter.hashes)
	for _, w := range f.filter.words {
		b = binary.LittleEndian.AppendUint64(b, w)
	}
	return b
}

// digest names a filter's version without its bits: push-pull carries it, and a peer
// that is behind asks for the whole filter.
type digest struct {
	origin         string
	epoch, version uint64
}

func (d digest) encode() []byte {
	b := append([]byte{kindDigest, byte(len(d.origin))}, d.origin...)
	b = binary.LittleEndian.AppendUint64(b, d.epoch)
	return binary.LittleEndian.AppendUint64(b, d.version)
}

func encodeWant(requester string) []byte {
	return append([]byte{kindWant, byte(len(requester))}, requester...)
}

// message is one decoded message: exactly one of the fields is set.
type message struct {
	delta  *delta
	full   *full
	digest *digest
	want   string
}

// decodeMessage parses a message from a peer. maxFilter caps the bytes of a full filter's
// bit array; a larger one is ErrFilterTooLarge, and nothing is allocated for it.
func decodeMessage(b []byte, maxFilter int) (message, error) {
	if len(b) == 0 {
		return message{}, fmt.Errorf("%w: empty message", ErrMalformed)
	}
	r := reader{b: b[1:]}
	name := r.str()
	if r.err == nil && !validName(name) {
		return message{}, fmt.Errorf("%w: node name %q", ErrMalformed, name)
	}
	var m message
	switch b[0] {
	case kindDelta:
		d := delta{origin: name, epoch: r.u64(), from: r.u64()}
		n := int(r.u16())
		if r.err == nil && len(r.b) != 4*n {
			return message{}, fmt.Errorf("%w: delta of %d positions in %d bytes", ErrMalformed, n, len(r.b))
		}
		if r.err == nil {
			d.positions = make([]uint32, n)
			for i := range d.positions {
				d.positions[i] = r.u32()
			}
		}
		m.delta = &d
	case kindFull:
		f := full{origin: name, epoch: r.u64(), version: r.u64()}
		g := geometry{bits: r.u32(), hashes: r.u8()}
		if r.err != nil {
			break
		}
		if g.bits == 0 || g.bits%64 != 0 || g.bits >= maxFilterBits || g.hashes == 0 || g.hashes > maxHashes {
			return message{}, fmt.Errorf("%w: filter of %d bits and %d hashes", ErrMalformed, g.bits, g.hashes)
		}
		if g.bytes() > maxFilter {
			return message{}, fmt.Errorf("%w: filter from %q is %d bytes, cap %d", ErrFilterTooLarge, name, g.bytes(), maxFilter)
		}
		if len(r.b) != g.bytes() {
			return message{}, fmt.Errorf("%w: filter of %d bytes carries %d", ErrMalformed, g.bytes(), len(r.b))
		}
		f.filter = newBitFilter(g)
		for i := range f.filter.words {
			f.filter.words[i] = r.u64()
		}
		m.full = &f
	case kindWant:
		m.want = name
	case kindDigest:
		m.digest = &digest{origin: name, epoch: r.u64(), version: r.u64()}
	default:
		return message{}, fmt.Errorf("%w: unknown kind %d", ErrMalformed, b[0])
	}
	if r.err != nil || len(r.b) != 0 {
		return message{}, fmt.Errorf("%w: kind %d message of %d bytes does not parse", ErrMalformed, b[0], len(b))
	}
	return m, nil
}

// reader reads little-endian fields; the first short read sets err and later reads return 0.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil || len(r.b) < n {
		r.err = ErrMalformed
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() uint8 {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if v := r.take(2); v != nil {
		return binary.LittleEndian.Uint16(v)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if v := r.take(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if v := r.take(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

// str reads a string prefixed by a one-byte length.
func (r *reader) str() string { return string(r.take(int(r.u8()))) }

// validName accepts the node names a registry file can be named after:
// 1–64 bytes of letters, digits, '.', '_' and '-', not starting with '.'.
func validName(s string) bool {
	if len(s) == 0 || len(s) > maxNameLen || s[0] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
