package dataplane

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"time"
)

// Conn is one client connection to a peer's data plane. It is not safe for concurrent use;
// a caller pools connections and drops one after any error.
type Conn struct {
	c        net.Conn
	br       *bufio.Reader
	maxChunk uint32
	features uint16 // the server's hello ack flags
	used     time.Time
	alloc    func(size int) []byte // payload buffers (SetAlloc); nil: make
}

// SetAlloc makes the connection read payloads into buffers from alloc (len size) instead
// of fresh ones: a pool the caller refills with buffers it is done with.
func (c *Conn) SetAlloc(alloc func(size int) []byte) { c.alloc = alloc }

func (c *Conn) buffer(size uint32) []byte {
	if c.alloc != nil {
		return c.alloc(int(size))[:size]
	}
	return make([]byte, size)
}

// Dial connects to addr and runs the handshake within ctx.
func Dial(ctx context.Context, addr string) (*Conn, error) { return dial(ctx, addr, nil) }

// dial connects, runs wrap (TLS) on the connection when set, then the hello.
func dial(ctx context.Context, addr string, wrap func(net.Conn) (net.Conn, error)) (*Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if wrap != nil {
		raw := c
		if c, err = wrap(raw); err != nil {
			raw.Close()
			return nil, err
		}
	}
	if _, err := c.Write(appendHello(nil)); err != nil {
		c.Close()
		return nil, err
	}
	var ack [helloAckLen]byte
	if n, err := io.ReadFull(c, ack[:]); err != nil {
		c.Close()
		if wrap == nil && isTLSAlert(ack[:n]) {
			return nil, fmt.Errorf("data plane handshake with %s: %w", addr, ErrPeerWantsTLS)
		}
		return nil, fmt.Errorf("data plane handshake with %s: %w", addr, ctxErr(ctx, noEOF(err)))
	}
	m, feat, err := parseHelloAckFlags(ack[:])
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("data plane handshake with %s: %w", addr, err)
	}
	c.SetDeadline(time.Time{})
	return &Conn{c: c, br: bufio.NewReaderSize(c, readBuf), maxChunk: m, features: feat, used: time.Now()}, nil
}

// readBuf is the connection's read buffer: it gathers chunk headers (and small chunks); a
// payload larger than what it holds is read straight into the payload's buffer, so the
// buffer's size is what a chunk's bytes are copied twice (64 KiB was a quarter of a
// 256 KiB chunk).
const readBuf = 4 << 10

// TakesFlags says whether the server takes request flags (FlagWait, FlagRelease).
func (c *Conn) TakesFlags() bool { return c.features&featLeaseFlags != 0 }

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// LastUsed is when the connection last finished a handshake or a fetch.
func (c *Conn) LastUsed() time.Time { return c.used }

// Want is one chunk a fetch expects, as the control plane described it.
type Want struct {
	Index  uint32
	Size   uint32
	CRC    uint32
	HasCRC bool // the source stored a checksum: the data plane's must equal it
}

// ChunkError is a chunk the source refused or could not read.
type ChunkError struct {
	Index  uint32
	Status Status
}

func (e *ChunkError) Error() string {
	return fmt.Sprintf("data plane: chunk %d: %s", e.Index, e.Status)
}

// Fetch asks for the wanted chunks of lease and calls deliver(i, payload) for want[i], in
// order, once its size and checksum are verified; it stops at the first failure and returns
// it (the chunks delivered before stay good). After an error the connection is unusable.
// ctx bounds the whole transfer.
func (c *Conn) Fetch(ctx context.Context, lease uint64, want []Want, deliver func(i int, payload []byte)) error {
	return c.FetchWith(ctx, lease, 0, want, deliver)
}

// FetchWith is Fetch with request flags (other than 0: a server that TakesFlags).
func (c *Conn) FetchWith(ctx context.Context, lease uint64, flags Flags, want []Want, deliver func(i int, payload []byte)) error {
	idx := make([]uint32, len(want))
	for i, w := range want {
		idx[i] = w.Index
	}
	if err := c.Send(ctx, lease, flags, idx); err != nil {
		return err
	}
	return c.Receive(ctx, want, 0, deliver)
}

// Send writes a request for the chunks of lease at indexes without reading the answer
// (Receive reads it): a client sends it, then asks the control plane for the lease
// (FlagWait), and the answer streams while the control plane answers.
func (c *Conn) Send(ctx context.Context, lease uint64, flags Flags, indexes []uint32) error {
	if flags != 0 && !c.TakesFlags() {
		return fmt.Errorf("%w: request flags %#x to a server that does not take them", ErrFrame, uint8(flags))
	}
	b, err := AppendRequest(nil, Request{Lease: lease, Flags: flags, Indexes: indexes})
	if err != nil {
		return err
	}
	return c.send(ctx, b)
}

// send writes an encoded request within ctx.
func (c *Conn) send(ctx context.Context, b []byte) error {
	defer c.bound(ctx)()
	if _, err := c.c.Write(b); err != nil {
		return ctxErr(ctx, err)
	}
	return nil
}

// Receive reads the answer to the request Send wrote last: want[i] describes its i-th
// index; each chunk is delivered once its size and checksum are verified. The answers to
// the request's rest indexes after those of want are read and dropped (a chunk the caller
// cannot use, or "no such lease" to a request it sent before the lease was refused): a
// chunk there costs a read of at most the server's max chunk, never an allocation. It
// stops at the first failure; after an error the connection is unusable.
func (c *Conn) Receive(ctx context.Context, want []Want, rest int, deliver func(i int, payload []byte)) error {
	for _, w := range want {
		if w.Size > c.maxChunk {
			return fmt.Errorf("%w: chunk %d of %d bytes, the peer sends at most %d", ErrTooLarge, w.Index, w.Size, c.maxChunk)
		}
	}
	defer c.bound(ctx)()
	for i, w := range want {
		h, err := ReadChunkHeader(c.br, c.maxChunk)
		if err != nil {
			return ctxErr(ctx, noEOF(err))
		}
		if h.Index != w.Index {
			return fmt.Errorf("%w: chunk %d answered for %d", ErrFrame, h.Index, w.Index)
		}
		if h.Status != StatusOK {
			return &ChunkError{Index: h.Index, Status: h.Status}
		}
		if h.Size != w.Size {
			return fmt.Errorf("%w: chunk %d has %d bytes, the lease said %d", ErrFrame, w.Index, h.Size, w.Size)
		}
		p := c.buffer(h.Size)
		got, err := c.readCRC(p)
		if err != nil {
			return ctxErr(ctx, noEOF(err))
		}
		if got != h.CRC || (w.HasCRC && got != w.CRC) {
			return fmt.Errorf("%w: chunk %d crc %08x, frame says %08x, lease says %08x", ErrChecksum, w.Index, got, h.CRC, w.CRC)
		}
		deliver(i, p)
	}
	for range rest {
		h, err := ReadChunkHeader(c.br, c.maxChunk)
		if err != nil {
			return ctxErr(ctx, noEOF(err))
		}
		if _, err := c.br.Discard(int(h.Size)); err != nil {
			return ctxErr(ctx, noEOF(err))
		}
	}
	c.used = time.Now()
	return nil
}

// Frame is one answer ReceiveAll read.
type Frame struct {
	ChunkHeader
	Payload []byte // Status OK and at most ReceiveAll's maxSize: the bytes, checked against CRC
}

// Check says whether f is the chunk w describes: answered, of w's size and, when w has
// one, of w's checksum (ReceiveAll checked f's bytes against the frame's own checksum).
// The errors are Receive's.
func (f *Frame) Check(w Want) error {
	switch {
	case f.Index != w.Index:
		return fmt.Errorf("%w: chunk %d answered for %d", ErrFrame, f.Index, w.Index)
	case f.Status != StatusOK:
		return &ChunkError{Index: f.Index, Status: f.Status}
	case f.Size != w.Size || f.Payload == nil:
		return fmt.Errorf("%w: chunk %d has %d bytes, the lease said %d", ErrFrame, w.Index, f.Size, w.Size)
	case w.HasCRC && f.CRC != w.CRC:
		return fmt.Errorf("%w: chunk %d crc %08x, lease says %08x", ErrChecksum, w.Index, f.CRC, w.CRC)
	}
	return nil
}

// ReceiveAll reads the answer to the request Send wrote last for indexes, before the
// caller knows what the lease holds (FlagWait: the lookup is still on its way back): each
// chunk is checked against its frame's checksum only, and the caller checks it against
// the lease before using it. A chunk above maxSize is read and dropped (Payload nil),
// never allocated. It returns the frames read and checked, also with an error (the caller
// frees their payloads); after an error the connection is unusable.
func (c *Conn) ReceiveAll(ctx context.Context, indexes []uint32, maxSize uint32) ([]Frame, error) {
	defer c.bound(ctx)()
	frames := make([]Frame, 0, len(indexes))
	for _, idx := range indexes {
		h, err := ReadChunkHeader(c.br, c.maxChunk)
		if err != nil {
			return frames, ctxErr(ctx, noEOF(err))
		}
		if h.Index != idx {
			return frames, fmt.Errorf("%w: chunk %d answered for %d", ErrFrame, h.Index, idx)
		}
		f := Frame{ChunkHeader: h}
		if h.Size > maxSize {
			if _, err := c.br.Discard(int(h.Size)); err != nil {
				return frames, ctxErr(ctx, noEOF(err))
			}
		} else if h.Status == StatusOK {
			f.Payload = c.buffer(h.Size)
			got, err := c.readCRC(f.Payload)
			if err != nil {
				return frames, ctxErr(ctx, noEOF(err))
			}
			if got != h.CRC { // its buffer is left to the garbage collector
				return frames, fmt.Errorf("%w: chunk %d crc %08x, frame says %08x", ErrChecksum, idx, got, h.CRC)
			}
		}
		frames = append(frames, f)
	}
	c.used = time.Now()
	return frames, nil
}

// readCRC fills p and returns its CRC-32C, summing each read's bytes as it lands (while
// they are still in the cache) rather than the whole chunk after its last byte.
func (c *Conn) readCRC(p []byte) (uint32, error) {
	var crc uint32
	for off := 0; off < len(p); {
		n, err := c.br.Read(p[off:])
		crc = crc32.Update(crc, castagnoli, p[off:off+n])
		off += n
		if err != nil && off < len(p) {
			return 0, err
		}
	}
	return crc, nil
}

// bound makes ctx's deadline and cancellation end the connection's blocked reads and
// writes; call the function it returns when the operation is over.
func (c *Conn) bound(ctx context.Context) func() bool {
	if dl, ok := ctx.Deadline(); ok {
		c.c.SetDeadline(dl)
	} else {
		c.c.SetDeadline(time.Time{})
	}
	return context.AfterFunc(ctx, func() { c.c.SetDeadline(time.Unix(1, 0)) })
}

// ctxErr prefers the context's reason over the i/o error its deadline caused.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
	}
	return err
}
