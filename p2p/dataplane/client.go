package dataplane

import (
	"bufio"
	"context"
	"errors"
	"fmt"
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
	used     time.Time
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
	m, err := parseHelloAck(ack[:])
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("data plane handshake with %s: %w", addr, err)
	}
	c.SetDeadline(time.Time{})
	return &Conn{c: c, br: bufio.NewReaderSize(c, 64<<10), maxChunk: m, used: time.Now()}, nil
}

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
	req := Request{Lease: lease, Indexes: make([]uint32, len(want))}
	for i, w := range want {
		if w.Size > c.maxChunk {
			return fmt.Errorf("%w: chunk %d of %d bytes, the peer sends at most %d", ErrTooLarge, w.Index, w.Size, c.maxChunk)
		}
		req.Indexes[i] = w.Index
	}
	b, err := AppendRequest(nil, req)
	if err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok {
		c.c.SetDeadline(dl)
	} else {
		c.c.SetDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { c.c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := c.c.Write(b); err != nil {
		return ctxErr(ctx, err)
	}
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
		p := make([]byte, h.Size)
		if _, err := io.ReadFull(c.br, p); err != nil {
			return ctxErr(ctx, noEOF(err))
		}
		got := Checksum(p)
		if got != h.CRC || (w.HasCRC && got != w.CRC) {
			return fmt.Errorf("%w: chunk %d crc %08x, frame says %08x, lease says %08x", ErrChecksum, w.Index, got, h.CRC, w.CRC)
		}
		deliver(i, p)
	}
	c.used = time.Now()
	return nil
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
