package node

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/engine"
)

// BenchmarkRESPGet serves a node Start opens on a file as rbctl serve opens it (O_DIRECT,
// through native AIO, serve's default for a file; and, for comparison, through io_uring),
// 256 KiB payloads, over RESP in this process, and GETs 256 KiB chunks through loopback TCP
// as LMCache's client does: conns connections, one GET in flight each. allocs/op counts
// the whole process (client and server) per GET; the client reads into one buffer per
// connection. With -cpuprofile it is where a RESP GET's CPU goes (docs/resp.md, "Where a
// GET's time goes").
//
//	go test -run '^$' -bench RESPGet -benchtime 2000x -cpuprofile /tmp/get.prof ./p2p/node/
func BenchmarkRESPGet(b *testing.B) {
	const keys = 64
	p := filepath.Join(b.TempDir(), "cache.img")
	cfg := engine.DefaultConfig()
	cfg.SlotBytes, cfg.MetaTotalBytes = 4096+chunkBytes, 0
	_, _, err := cache.Format(cache.FormatOptions{Path: p, Create: 2 * keys * (4096 + chunkBytes), Config: cfg,
		Open: func() (blockdev.Device, error) { return blockdev.OpenFile(p, blockdev.FileOptions{}) }})
	if err != nil {
		b.Fatal(err)
	}
	key := func(i int) string { return fmt.Sprintf("bench/model@00000000@0@%08x@t", i%keys) }
	for _, io := range []string{devices.PathAio, devices.PathUring} {
		b.Run("io="+io, func(b *testing.B) {
			sc := startConfig(p)
			sc.Open.Device = devices.Options{IOPath: io, Direct: true, QueueDepth: 32, Exclusive: true}
			sc.RESP = &RESPConfig{Listen: "127.0.0.1:0"}
			n, err := Start(context.Background(), sc)
			if err != nil {
				b.Fatal(err)
			}
			defer n.Close() // before the next engine opens the file
			if got := n.IOEngines(); got != io {
				b.Fatalf("opened with %s, want %s", got, io)
			}
			addr := n.RESPAddr()
			c := benchConn(b, addr)
			for i := range keys { // the first engine stores them; the second finds them
				v := value(i, chunkBytes)
				fmt.Fprintf(c.w, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n", len(key(i)), key(i), len(v))
				c.w.Write(v)
				c.w.WriteString("\r\n")
				c.w.Flush()
				if l, err := c.r.ReadString('\n'); err != nil || l != "+OK\r\n" {
					b.Fatalf("SET: %q %v", l, err)
				}
			}
			for _, conns := range []int{1, 8} {
				b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
					cs := make(chan *benchClient, conns)
					for range conns {
						cs <- benchConn(b, addr)
					}
					var next atomic.Int64
					b.SetBytes(chunkBytes)
					b.ReportAllocs()
					b.SetParallelism((conns + 1) / 2) // GOMAXPROCS × this goroutines
					b.ResetTimer()
					b.RunParallel(func(pb *testing.PB) {
						c := <-cs
						defer func() { cs <- c }()
						for pb.Next() {
							if err := c.get(key(int(next.Add(1)))); err != nil {
								b.Error(err)
								return
							}
						}
					})
				})
			}
		})
	}
}

type benchClient struct {
	w   *bufio.Writer
	r   *bufio.Reader
	buf []byte
}

func benchConn(b *testing.B, addr string) *benchClient {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return &benchClient{w: bufio.NewWriter(c), r: bufio.NewReaderSize(c, 1<<20), buf: make([]byte, chunkBytes+2)}
}

func (c *benchClient) get(k string) error {
	c.w.WriteString("*2\r\n$3\r\nGET\r\n$" + strconv.Itoa(len(k)) + "\r\n" + k + "\r\n")
	if err := c.w.Flush(); err != nil {
		return err
	}
	l, err := c.r.ReadSlice('\n')
	if err != nil {
		return err
	}
	if string(l) != "$"+strconv.Itoa(chunkBytes)+"\r\n" {
		return fmt.Errorf("GET: %q", l)
	}
	_, err = io.ReadFull(c.r, c.buf)
	return err
}
