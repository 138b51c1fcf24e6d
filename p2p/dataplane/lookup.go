package dataplane

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
)

// A lookup request names keys instead of a lease's chunk indexes: the server checks the
// request's token, leases the leading keys it holds for the length of its answer, answers
// them in order (StatusMiss for the keys after the first it does not hold) and releases
// the lease once the answer is written. It is the control plane's LookupAndLock, the
// fetch and the release in one round trip on the data connection, for a server that
// announces featLookups (a Source that is a KeyLeaser and a LeaseReleaser). Chunk i of the
// answer carries index i. docs/p2p.md, "Data plane".
//
// Layout after the common first four bytes (type 2, flags 0, count u16 1..MaxBatch):
// token_len u16 (0..MaxTokenBytes), reserved u16 (0), the token's bytes, then per key
// key_len u16 (1..65535) and its bytes; everything after the head at most MaxLookupBytes.

const (
	lookupHead = 8 // type u8, flags u8, count u16, token_len u16, reserved u16

	// MaxTokenBytes bounds a lookup request's token.
	MaxTokenBytes = 4096
	// MaxLookupBytes bounds a lookup request's token and keys together: what one request
	// can make a server buffer.
	MaxLookupBytes = 1 << 20
)

// KeyLeaser is a Source that leases chunks by key for a lookup request.
type KeyLeaser interface {
	// LeaseKeys checks token (from: the client's address) and leases the leading keys the
	// source holds: the lease (0 with hits 0: it holds the first key not, or its lease caps
	// are reached) and how many keys it covers. StatusRefused refuses the request (the
	// token, its rights, or a key the source cannot take); it then leases nothing.
	LeaseKeys(from netip.Addr, token string, keys []string) (lease uint64, hits int, st Status)
}

// AppendLookup encodes a lookup request for keys with token.
func AppendLookup(b []byte, token string, keys []string) ([]byte, error) {
	if len(keys) == 0 || len(keys) > MaxBatch {
		return b, fmt.Errorf("%w: %d keys (1..%d)", ErrTooLarge, len(keys), MaxBatch)
	}
	if len(token) > MaxTokenBytes {
		return b, fmt.Errorf("%w: token of %d bytes (at most %d)", ErrTooLarge, len(token), MaxTokenBytes)
	}
	total := len(token)
	for _, k := range keys {
		if len(k) == 0 || len(k) > 0xffff {
			return b, fmt.Errorf("%w: key of %d bytes (1..65535)", ErrFrame, len(k))
		}
		total += 2 + len(k)
	}
	if total > MaxLookupBytes {
		return b, fmt.Errorf("%w: lookup of %d bytes (at most %d)", ErrTooLarge, total, MaxLookupBytes)
	}
	b = append(b, reqLookup, 0)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(keys)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(token)))
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = append(b, token...)
	for _, k := range keys {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(k)))
		b = append(b, k...)
	}
	return b, nil
}

// readLookup decodes the rest of a lookup request whose first four bytes (head) are read
// and name n keys. It reads the token and each key as its length arrives, so a request
// that claims more than MaxLookupBytes is refused before its bytes are buffered.
func readLookup(r io.Reader, head []byte, n int) (Request, error) {
	if n == 0 || n > MaxBatch {
		return Request{}, fmt.Errorf("%w: %d keys (1..%d)", ErrTooLarge, n, MaxBatch)
	}
	var h [lookupHead - 4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Request{}, noEOF(err)
	}
	tl := int(binary.LittleEndian.Uint16(h[:]))
	switch {
	case binary.LittleEndian.Uint16(h[2:]) != 0:
		return Request{}, fmt.Errorf("%w: lookup reserved field %#x", ErrFrame, binary.LittleEndian.Uint16(h[2:]))
	case tl > MaxTokenBytes:
		return Request{}, fmt.Errorf("%w: token of %d bytes (at most %d)", ErrTooLarge, tl, MaxTokenBytes)
	}
	budget := MaxLookupBytes - tl
	tok := make([]byte, tl)
	if _, err := io.ReadFull(r, tok); err != nil {
		return Request{}, noEOF(err)
	}
	req := Request{Token: string(tok), Keys: make([]string, n)}
	for i := range req.Keys {
		var l [2]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return Request{}, noEOF(err)
		}
		kl := int(binary.LittleEndian.Uint16(l[:]))
		if budget -= 2 + kl; budget < 0 {
			return Request{}, fmt.Errorf("%w: lookup longer than %d bytes", ErrTooLarge, MaxLookupBytes)
		}
		if kl == 0 {
			return Request{}, fmt.Errorf("%w: key %d is empty", ErrFrame, i)
		}
		k := make([]byte, kl)
		if _, err := io.ReadFull(r, k); err != nil {
			return Request{}, noEOF(err)
		}
		req.Keys[i] = string(k)
	}
	return req, nil
}

// answerLookup answers a lookup request: the leased leading keys' chunks, StatusMiss for
// the rest (or StatusRefused for every key), then releases the lease.
func (s *Server) answerLookup(c net.Conn, fw *frameWriter, req Request, cs *connState) error {
	s.lookups.Add(1)
	lease, hits, st := s.leaser.LeaseKeys(cs.ip, req.Token, req.Keys)
	if st != StatusOK {
		s.refusedLookups.Add(1)
		lease, hits = 0, 0
	}
	if lease != 0 {
		defer s.releaser.ReleaseLease(lease)
	}
	hits = min(hits, len(req.Keys))
	if hits > 0 {
		idx := make([]uint32, hits)
		for i := range idx {
			idx[i] = uint32(i)
		}
		if err := s.answer(c, fw, Request{Lease: lease, Indexes: idx}, cs); err != nil {
			return err
		}
	}
	if st == StatusOK {
		st = StatusMiss
	}
	for i := hits; i < len(req.Keys); i++ {
		if err := s.send(c, fw, ChunkHeader{Status: st, Index: uint32(i)}, nil, cs); err != nil {
			return err
		}
	}
	return fw.flush()
}

// TakesLookups says whether the server takes lookup requests (SendLookup).
func (c *Conn) TakesLookups() bool { return c.features&featLookups != 0 }

// SendLookup writes a lookup request for keys with token without reading the answer:
// ReceiveAll reads it, for indexes 0..len(keys)-1.
func (c *Conn) SendLookup(ctx context.Context, token string, keys []string) error {
	if !c.TakesLookups() {
		return fmt.Errorf("%w: a lookup request to a server that does not take them", ErrFrame)
	}
	b, err := AppendLookup(nil, token, keys)
	if err != nil {
		return err
	}
	return c.send(ctx, b)
}
