package dataplane

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// FuzzReadRequest: any bytes decode to an error or to a request that re-encodes to the same
// bytes; the decoder never reads past its bound.
func FuzzReadRequest(f *testing.F) {
	b, _ := AppendRequest(nil, Request{Lease: 42, Indexes: []uint32{0, 1, 7}})
	f.Add(b)
	b, _ = AppendRequest(nil, Request{Lease: 42, Flags: FlagWait | FlagRelease, Indexes: []uint32{0, 1, 2, 3}})
	f.Add(b)
	f.Add([]byte{1, 0xff, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}) // unknown flags
	f.Add([]byte{1, 0, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{})
	b, _ = AppendLookup(nil, "secret", []string{"m@0x0@ab", "m@0x0@cd"})
	f.Add(b)
	b, _ = AppendLookup(nil, "", []string{"k"})
	f.Add(b)
	f.Add([]byte{2, 0, 1, 0, 0xff, 0xff, 0, 0})            // a token above its bound
	f.Add([]byte{2, 0, 1, 0, 0, 0, 0, 0, 0xff, 0xff, 'k'}) // a key longer than its bytes
	f.Add([]byte{2, 1, 1, 0, 0, 0, 0, 0, 1, 0, 'k'})       // flags on a lookup
	f.Add([]byte{2, 0, 1, 0, 0, 0, 1, 0, 1, 0, 'k'})       // reserved field set
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		req, err := ReadRequest(r)
		if err != nil {
			return
		}
		used := len(data) - r.Len()
		if req.Keys != nil {
			total := len(req.Token)
			for _, k := range req.Keys {
				total += 2 + len(k)
			}
			if len(req.Keys) > MaxBatch || total > MaxLookupBytes || used > lookupHead+MaxLookupBytes || req.Indexes != nil {
				t.Fatalf("decoded a lookup of %d keys, %d bytes (%d read), %d indexes", len(req.Keys), total, used, len(req.Indexes))
			}
			again, err := AppendLookup(nil, req.Token, req.Keys)
			if err != nil || !bytes.Equal(again, data[:used]) {
				t.Fatalf("re-encoding differs: %x vs %x (%v)", again, data[:used], err)
			}
			return
		}
		if len(req.Indexes) == 0 || len(req.Indexes) > MaxBatch || req.Flags&^flagsKnown != 0 {
			t.Fatalf("decoded %d indexes, flags %#x", len(req.Indexes), uint8(req.Flags))
		}
		again, err := AppendRequest(nil, req)
		if err != nil || !bytes.Equal(again, data[:used]) {
			t.Fatalf("re-encoding differs: %x vs %x (%v)", again, data[:used], err)
		}
	})
}

// FuzzReadChunkHeader: a decoded header is within its bound and re-encodes identically.
func FuzzReadChunkHeader(f *testing.F) {
	f.Add(AppendChunkHeader(nil, ChunkHeader{Status: StatusOK, Index: 3, Size: 100, CRC: 9}), uint32(4096))
	f.Add(AppendChunkHeader(nil, ChunkHeader{Status: StatusNoLease, Index: 3}), uint32(4096))
	f.Add(bytes.Repeat([]byte{0xff}, 16), uint32(1))
	f.Fuzz(func(t *testing.T, data []byte, maxChunk uint32) {
		h, err := ReadChunkHeader(bytes.NewReader(data), maxChunk)
		if err != nil {
			if len(data) >= chunkHeadLen && !errors.Is(err, ErrFrame) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if h.Size > maxChunk || h.Status > statusMax || (h.Status != StatusOK && h.Size != 0) {
			t.Fatalf("accepted %+v with bound %d", h, maxChunk)
		}
		if !bytes.Equal(AppendChunkHeader(nil, h), data[:chunkHeadLen]) {
			t.Fatal("re-encoding differs")
		}
	})
}

// FuzzHandshake: hellos decode or fail cleanly; an accepted ack announces a bounded chunk.
func FuzzHandshake(f *testing.F) {
	f.Add(appendHelloAck(nil, 1<<20))
	f.Add(appendHelloAckFlags(nil, featLeaseFlags, 1<<20))
	f.Add(appendHelloAckFlags(nil, 0xffff, 1<<20)) // features this side does not know
	f.Add(appendHello(nil))
	f.Add([]byte{21, 3, 3, 0, 2, 2, 10}) // a TLS server's alert to a plain hello
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == helloLen {
			_ = parseHello(data)
		}
		m, err := parseHelloAck(data)
		if err == nil && (m == 0 || m > MaxChunkLimit) {
			t.Fatalf("accepted max chunk %d", m)
		}
		if m2, _, err2 := parseHelloAckFlags(data); m2 != m || (err2 == nil) != (err == nil) {
			t.Fatalf("parseHelloAckFlags disagrees: %d %v, %d %v", m2, err2, m, err)
		}
		if err == nil && isTLSAlert(data) {
			t.Fatal("a TLS alert parsed as a hello ack")
		}
	})
}

// FuzzFetchResponse drives Conn.Fetch against arbitrary peer bytes: it returns (never
// hangs or panics) and delivers only chunks of the wanted size and checksum.
func FuzzFetchResponse(f *testing.F) {
	p := []byte("payload")
	good := AppendChunkHeader(nil, ChunkHeader{Index: 0, Size: uint32(len(p)), CRC: Checksum(p)})
	f.Add(append(good, p...))
	f.Add(good)
	f.Add(AppendChunkHeader(nil, ChunkHeader{Index: 0, Size: 1 << 30}))
	f.Fuzz(func(t *testing.T, data []byte) {
		cli, srv := net.Pipe()
		defer cli.Close()
		go func() {
			defer srv.Close()
			if _, err := ReadRequest(srv); err != nil {
				return
			}
			srv.Write(data)
		}()
		c := &Conn{c: cli, br: bufio.NewReader(cli), maxChunk: 1 << 10}
		w := []Want{{Index: 0, Size: uint32(len(p)), CRC: Checksum(p), HasCRC: true}}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c.Fetch(ctx, 1, w, func(i int, got []byte) {
			if uint32(len(got)) != w[i].Size || Checksum(got) != w[i].CRC {
				t.Fatalf("delivered %d bytes crc %08x", len(got), Checksum(got))
			}
		})
	})
}

// FuzzReceiveAll drives Conn.ReceiveAll (an early request's answer, read before the lease
// is known) against arbitrary peer bytes: it returns (never hangs or panics), allocates
// only chunks within its bound, and hands back only payloads whose bytes match their
// frame's checksum.
func FuzzReceiveAll(f *testing.F) {
	p := []byte("payload")
	good := AppendChunkHeader(nil, ChunkHeader{Index: 0, Size: uint32(len(p)), CRC: Checksum(p)})
	f.Add(append(good, p...))
	f.Add(append(append(good, p...), AppendChunkHeader(nil, ChunkHeader{Index: 1, Status: StatusBadIndex})...))
	f.Add(AppendChunkHeader(nil, ChunkHeader{Index: 0, Size: 1 << 9, CRC: 1}))
	f.Add(AppendChunkHeader(nil, ChunkHeader{Index: 0, Status: StatusNoLease}))
	f.Fuzz(func(t *testing.T, data []byte) {
		cli, srv := net.Pipe()
		defer cli.Close()
		go func() {
			defer srv.Close()
			if _, err := ReadRequest(srv); err != nil {
				return
			}
			srv.Write(data)
		}()
		c := &Conn{c: cli, br: bufio.NewReader(cli), maxChunk: 1 << 10, features: featLeaseFlags}
		const bound = 64
		c.SetAlloc(func(n int) []byte {
			if n > bound {
				t.Fatalf("allocated %d bytes, bound %d", n, bound)
			}
			return make([]byte, n)
		})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		idx := []uint32{0, 1}
		if err := c.Send(ctx, 1, FlagWait|FlagRelease, idx); err != nil {
			return
		}
		frames, _ := c.ReceiveAll(ctx, idx, bound)
		for i, fr := range frames {
			if fr.Index != idx[i] {
				t.Fatalf("frame %d answers index %d", i, fr.Index)
			}
			if fr.Payload != nil && (fr.Status != StatusOK || uint32(len(fr.Payload)) != fr.Size || Checksum(fr.Payload) != fr.CRC) {
				t.Fatalf("handed back %d bytes crc %08x for %+v", len(fr.Payload), Checksum(fr.Payload), fr.ChunkHeader)
			}
		}
	})
}
