package node

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/placement"
)

// plainServer is the reference a peer fetch is held to: the same work done plainly. A
// client sends a request naming up to 256 chunks (count u32, then one u32 per chunk); the
// server answers each with its size (u32) and bytes, read from the holder's device with one
// device read per chunk (a copy out of memory on a memory device, a pread with O_DIRECT on
// a file device) into one reused buffer and written to the socket. No lease, no checksum,
// no control plane, one request in flight per connection.
type plainServer struct {
	ln   net.Listener
	dev  blockdev.Device
	hits []engine.EntryMeta // by chunk number: where each payload lies on dev
	hdr  int64              // slot header bytes before a payload
	done chan error

	c    net.Conn // the client's connection, dialled on its first fetch
	bufs [][]byte // the client's reused buffers
	next int      // the next chunk to ask for
}

// startPlainServer serves keys' chunks of e (which must hold them all) on a loopback port.
func startPlainServer(tb testing.TB, e *engine.Engine, keys []engine.Key) *plainServer {
	tb.Helper()
	s := &plainServer{dev: e.Device(), hdr: int64(e.Layout().HeaderBytes), done: make(chan error, 1)}
	for _, k := range keys {
		m, ok := e.Lookup(k)
		if !ok {
			tb.Fatalf("plain server: %s is not in the cache", k)
		}
		s.hits = append(s.hits, m)
	}
	var err error
	if s.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		tb.Fatal(err)
	}
	go func() { s.done <- s.serve() }()
	tb.Cleanup(func() {
		s.ln.Close()
		if s.c != nil {
			s.c.Close()
		}
		<-s.done
	})
	return s
}

func (s *plainServer) serve() error {
	c, err := s.ln.Accept()
	if err != nil {
		return nil // closed before a client came
	}
	defer c.Close()
	lb := int64(max(s.dev.Info().LogicalBlock, 1))
	maxSize := 0
	for _, m := range s.hits {
		maxSize = max(maxSize, m.Size)
	}
	buf, err := blockdev.Alloc(int((int64(maxSize) + lb - 1) / lb * lb)) // aligned for O_DIRECT
	if err != nil {
		return err
	}
	defer blockdev.Free(buf)
	var head [4 + 4*256]byte
	for {
		if _, err := io.ReadFull(c, head[:4]); err != nil {
			return nil // the client is done
		}
		n := int(binary.LittleEndian.Uint32(head[:4]))
		if n == 0 || n > 256 {
			return fmt.Errorf("plain server: %d chunks asked", n)
		}
		if _, err := io.ReadFull(c, head[4:4+4*n]); err != nil {
			return err
		}
		for j := range n {
			m := s.hits[int(binary.LittleEndian.Uint32(head[4+4*j:]))%len(s.hits)]
			want := (int64(m.Size) + lb - 1) / lb * lb
			if err := s.dev.Submit([]blockdev.Op{{Off: m.Offset + s.hdr, Buf: buf[:want], Handle: placement.None}}); err != nil {
				return err
			}
			var size [4]byte
			binary.LittleEndian.PutUint32(size[:], uint32(m.Size))
			bufs := net.Buffers{size[:], buf[:m.Size]}
			if _, err := bufs.WriteTo(c); err != nil {
				return err
			}
		}
	}
}

// fetch moves total bytes from s in requests of batch chunks, one request in flight, into
// reused buffers, and returns the wall and CPU time.
func (s *plainServer) fetch(tb testing.TB, total int64, batch int) (time.Duration, time.Duration) {
	tb.Helper()
	if s.c == nil {
		var err error
		if s.c, err = net.Dial("tcp", s.ln.Addr().String()); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.c.Close() })
		s.bufs = make([][]byte, batch)
		for j := range s.bufs {
			s.bufs[j] = make([]byte, s.hits[0].Size)
		}
	}
	c, bufs := s.c, s.bufs
	req := make([]byte, 4+4*batch)
	binary.LittleEndian.PutUint32(req, uint32(batch))
	t0, c0 := time.Now(), cpuTime(tb)
	var moved int64
	for i := s.next; moved < total; i += batch {
		s.next = i + batch
		for j := range batch {
			binary.LittleEndian.PutUint32(req[4+4*j:], uint32((i+j)%len(s.hits)))
		}
		if _, err := c.Write(req); err != nil {
			tb.Fatal(err)
		}
		for j := range batch {
			var size [4]byte
			if _, err := io.ReadFull(c, size[:]); err != nil {
				tb.Fatal(err)
			}
			n := int(binary.LittleEndian.Uint32(size[:]))
			if n > len(bufs[j]) {
				tb.Fatalf("plain fetch: chunk of %d bytes", n)
			}
			if _, err := io.ReadFull(c, bufs[j][:n]); err != nil {
				tb.Fatal(err)
			}
			moved += int64(n)
		}
	}
	return time.Since(t0), cpuTime(tb) - c0
}
