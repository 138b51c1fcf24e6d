package node

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
)

// cpuTime is this process's user + system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// tcpCopy moves total bytes over a loopback TCP connection in writes of chunk bytes and
// returns the wall and CPU time: the plain copy a peer fetch is compared with.
func tcpCopy(b *testing.B, total int64, chunk int) (time.Duration, time.Duration) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		buf := make([]byte, chunk)
		for sent := int64(0); sent < total; sent += int64(chunk) {
			if _, err := c.Write(buf); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, chunk)
	t0, c0 := time.Now(), cpuTime(b)
	for got := int64(0); got < total; got += int64(chunk) {
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return time.Since(t0), cpuTime(b) - c0
}

// BenchmarkPeerFetchThroughput moves 1 GiB of chunks from a holder to a requester over
// loopback (fetch-only, 16 chunks per Get, 1 or 4 Gets at a time: lookup-and-lock,
// data-plane pull, CRC check; the holder reads from an in-memory cache) and, in the same run, 1 GiB over a plain
// loopback TCP connection in writes of one chunk. It reports both rates, their ratio and
// the process's CPU seconds per GB of each (both ends run in this process).
//
//	go test -run '^$' -bench PeerFetchThroughput -benchtime 1x ./p2p/node/
func BenchmarkPeerFetchThroughput(b *testing.B) {
	for _, tc := range []struct{ chunk, workers int }{{1 << 20, 1}, {1 << 20, 4}, {256 << 10, 1}, {256 << 10, 4}} {
		chunk, workers := tc.chunk, tc.workers
		b.Run(fmt.Sprintf("%dKiB-x%d", chunk>>10, workers), func(b *testing.B) {
			const total, batch = int64(1 << 30), 16
			keys := int((64 << 20) / chunk)
			cfg := engine.DefaultConfig()
			cfg.SlotBytes, cfg.MetaTotalBytes, cfg.Periodic, cfg.QueueDepth = int64(4096+chunk), 1<<20, false, 32
			ea, err := engine.Format(blockdev.NewMem(1<<20+int64(keys)*cfg.SlotBytes, 4096), cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { ea.Close() })
			eb, err := engine.Format(blockdev.NewMem(1<<20+4*cfg.SlotBytes, 4096), cfg) // fetch-only: holds nothing
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { eb.Close() })
			a := startNode(b, ea, fastOptions("a", nil))
			all := make([]engine.Key, keys)
			for i := range keys {
				all[i] = keyN(i)
				if _, err := a.Put(all[i:i+1], [][]byte{payloadN(i, chunk)}); err != nil {
					b.Fatal(err)
				}
			}
			ob := fastOptions("b", NewStaticDirectory(a.Peer()))
			ob.FetchOnly, ob.FetchTimeout = true, time.Minute
			bn := startNode(b, eb, ob)
			for b.Loop() {
				t0, c0 := time.Now(), cpuTime(b)
				var wg sync.WaitGroup
				per := total / int64(workers)
				for w := range workers {
					wg.Go(func() {
						var moved int64
						for i := w * batch; moved < per; i += batch {
							ks := make([]engine.Key, batch)
							for j := range ks {
								ks[j] = all[(i+j)%keys]
							}
							r, err := bn.Get(context.Background(), ks, false)
							if err != nil {
								b.Error(err)
								return
							}
							for _, x := range r {
								if x.Source != Peer {
									b.Errorf("source %v", x.Source)
									return
								}
								moved += int64(len(x.Payload))
							}
						}
					})
				}
				wg.Wait()
				peerWall, peerCPU := time.Since(t0), cpuTime(b)-c0
				tcpWall, tcpCPU := tcpCopy(b, total, chunk)
				gb := float64(total) / 1e9
				b.ReportMetric(gb/peerWall.Seconds(), "peer-GB/s")
				b.ReportMetric(gb/tcpWall.Seconds(), "tcp-GB/s")
				b.ReportMetric(tcpWall.Seconds()/peerWall.Seconds(), "ratio")
				b.ReportMetric(peerCPU.Seconds()/gb, "peer-cpu-s/GB")
				b.ReportMetric(tcpCPU.Seconds()/gb, "tcp-cpu-s/GB")
			}
		})
	}
}
