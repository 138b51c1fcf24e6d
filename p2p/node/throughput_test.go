package node

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/blockdev/faultdev"
	"github.com/rbctl/rbctl/engine"
)

// cpuTime is this process's user + system CPU time.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// tcpStream is one loopback TCP connection whose writer sends, on each call of copy, the
// bytes asked for in writes of one chunk: the streaming copy a peer fetch is compared with.
type tcpStream struct {
	c     net.Conn
	chunk int
	buf   []byte
	ask   chan int64
	done  chan error
}

func newTCPStream(b *testing.B, chunk int) *tcpStream {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	t := &tcpStream{chunk: chunk, buf: make([]byte, chunk), ask: make(chan int64), done: make(chan error, 1)}
	go func() {
		defer ln.Close()
		c, err := ln.Accept()
		if err != nil {
			t.done <- err
			return
		}
		defer c.Close()
		buf := make([]byte, chunk)
		for n := range t.ask {
			for sent := int64(0); sent < n; sent += int64(chunk) {
				if _, err := c.Write(buf); err != nil {
					t.done <- err
					return
				}
			}
		}
		t.done <- nil
	}()
	if t.c, err = net.Dial("tcp", ln.Addr().String()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { close(t.ask); t.c.Close(); <-t.done })
	return t
}

// copy moves n bytes and returns the wall and CPU time.
func (t *tcpStream) copy(b *testing.B, n int64) (time.Duration, time.Duration) {
	t0, c0 := time.Now(), cpuTime(b)
	t.ask <- n
	for got := int64(0); got < n; got += int64(t.chunk) {
		if _, err := io.ReadFull(t.c, t.buf); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(t0), cpuTime(b) - c0
}

// throughputDevice is the holder's device: memory, or a file opened with O_DIRECT (in
// dir, which must not be a tmpfs).
func throughputDevice(b *testing.B, kind, dir string, size int64) blockdev.Device {
	switch kind {
	case "mem":
		return blockdev.NewMem(size, 4096)
	case "mem100us":
		// A device whose reads take 100 µs more, without using a core: what a flash read
		// costs that a memory copy does not, so that overlapping reads with socket writes
		// shows (the holder's read-ahead).
		return faultdev.New(blockdev.NewMem(size, 4096), 1, faultdev.Rule{Name: "read-latency", Class: faultdev.ClassRead,
			Fault: faultdev.Fault{Kind: faultdev.FaultLatency, Delay: 100 * time.Microsecond}})
	}
	p := filepath.Join(dir, "holder.img")
	if err := blockdev.CreateFile(p, size); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.Remove(p) })
	var d blockdev.Device
	var err error
	switch kind {
	case "file-aio": // native AIO, what rbctl serve opens a file with
		d, err = blockdev.OpenAio(p, blockdev.DefaultFileOptions())
	case "file-uring":
		d, err = blockdev.OpenUring(p, blockdev.UringOptions{QueueDepth: 32})
	default: // "file": the posix engine
		d, err = blockdev.OpenFile(p, blockdev.DefaultFileOptions())
	}
	if err != nil {
		b.Skipf("O_DIRECT file in %s (%s): %v", dir, kind, err)
	}
	return d
}

// BenchmarkPeerFetchThroughput moves 1 GiB of chunks from a holder to a requester over
// loopback (fetch-only, 16 chunks per Get, 1 or 4 Gets at a time: lookup-and-lock,
// data-plane pull, CRC check) and, in the same run, the same 1 GiB two plain ways: a
// request/response pair over TCP whose server reads each request's 16 chunks from the
// holder's device and writes them (plainref_test.go; one request in flight), and one
// streaming TCP connection in writes of one chunk. The three take turns in 8 rounds of
// 128 MiB each, so that a change in the machine's load falls on all three alike. It reports the three rates, the peer
// fetch's ratio to each (rr-ratio, tcp-ratio), the process's CPU seconds per GB of each
// (both ends run in this process) and the peer fetch's round trips per Get (control-plane
// calls the requester made, data-plane requests).
//
// The requester's caller hands each Get's payloads back (Node.Recycle) once it has counted
// them, as the reference's client reuses its buffers; the "-fresh" cases do not, so every
// chunk is read into fresh memory. The holder's device is memory; RBCTL_BENCH_FILE_DIR=DIR adds a file on DIR opened with
// O_DIRECT (not a tmpfs: it refuses O_DIRECT) through each engine: posix ("file"), native
// AIO ("file-aio", what rbctl serve opens a file with) and io_uring ("file-uring").
//
//	go test -run '^$' -bench PeerFetchThroughput -benchtime 1x -count 3 ./p2p/node/
func BenchmarkPeerFetchThroughput(b *testing.B) {
	devs := []string{"mem", "mem100us"}
	dir := os.Getenv("RBCTL_BENCH_FILE_DIR")
	if dir != "" {
		devs = append(devs, "file", "file-aio", "file-uring")
	}
	for _, dev := range devs {
		for _, tc := range []struct {
			chunk, workers int
			fresh          bool
		}{{1 << 20, 1, false}, {1 << 20, 4, false}, {256 << 10, 1, false}, {256 << 10, 4, false}, {1 << 20, 1, true}, {256 << 10, 1, true}} {
			name := fmt.Sprintf("%s-%dKiB-x%d", dev, tc.chunk>>10, tc.workers)
			if tc.fresh {
				name += "-fresh"
			}
			b.Run(name, func(b *testing.B) {
				size := 1<<20 + int64(holderBytes/tc.chunk)*int64(4096+tc.chunk)
				peerFetchThroughput(b, throughputDevice(b, dev, dir, size), tc.chunk, tc.workers, !tc.fresh)
			})
		}
	}
}

// holderBytes is what the holder holds: 8 batches of 16 chunks of 1 MiB, so that four Gets
// in flight never ask for the same keys (they would share one fetch: flights.go).
const holderBytes = 128 << 20

func peerFetchThroughput(b *testing.B, dev blockdev.Device, chunk, workers int, recycle bool) {
	const total, batch, rounds = int64(1 << 30), 16, 8
	keys := holderBytes / chunk
	cfg := engine.DefaultConfig()
	cfg.SlotBytes, cfg.MetaTotalBytes, cfg.Periodic, cfg.QueueDepth = int64(4096+chunk), 1<<20, false, 32
	ea, err := engine.Format(dev, cfg)
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
	plain, stream := startPlainServer(b, ea, all), newTCPStream(b, chunk)
	for b.Loop() {
		var peerWall, peerCPU, rrWall, rrCPU, tcpWall, tcpCPU time.Duration
		g0, r0, x0, d0 := a.leases.granted.Load()-a.leases.grantedData.Load(), a.leases.released.Load(), a.leases.releasedData.Load(), a.data.Stats()
		var nGets atomic.Int64
		next := 0 // the next batch of keys, taken in turn by the Gets of all rounds
		var mu sync.Mutex
		for range rounds {
			t0, c0 := time.Now(), cpuTime(b)
			var wg sync.WaitGroup
			var moved atomic.Int64
			for range workers {
				wg.Go(func() {
					for moved.Load() < total/rounds {
						mu.Lock()
						i := next
						next += batch
						mu.Unlock()
						// Each Get its own keys: the same keys in two Gets at once would share
						// one fetch (flights.go) and count its bytes twice.
						ks := make([]engine.Key, batch)
						for j := range ks {
							ks[j] = all[(i+j)%keys]
						}
						r, err := bn.Get(context.Background(), ks, false)
						if err != nil {
							b.Error(err)
							return
						}
						nGets.Add(1)
						for _, x := range r {
							if x.Source != Peer {
								b.Errorf("source %v", x.Source)
								return
							}
							moved.Add(int64(len(x.Payload)))
						}
						if recycle {
							bn.Recycle(r) // as the reference reuses its buffers
						}
					}
				})
			}
			wg.Wait()
			peerWall, peerCPU = peerWall+time.Since(t0), peerCPU+cpuTime(b)-c0
			if os.Getenv("RBCTL_BENCH_PEER_ONLY") != "" { // profiling the peer fetch alone
				continue
			}
			w, c := plain.fetch(b, total/rounds, batch)
			rrWall, rrCPU = rrWall+w, rrCPU+c
			w, c = stream.copy(b, total/rounds)
			tcpWall, tcpCPU = tcpWall+w, tcpCPU+c
		}
		g1, r1, x1, d1 := a.leases.granted.Load()-a.leases.grantedData.Load(), a.leases.released.Load(), a.leases.releasedData.Load(), a.data.Stats()
		gb := float64(total) / 1e9
		b.ReportMetric(gb/peerWall.Seconds(), "peer-GB/s")
		b.ReportMetric(peerCPU.Seconds()/gb, "peer-cpu-s/GB")
		ctl := float64(g1-g0) + float64(r1-r0) - float64(x1-x0) // control-plane lookups that took a lease, Unlock calls
		b.ReportMetric(ctl/float64(nGets.Load()), "ctl-calls/Get")
		b.ReportMetric(float64(d1.Requests-d0.Requests)/float64(nGets.Load()), "data-reqs/Get")
		if rrWall == 0 {
			continue
		}
		b.ReportMetric(gb/rrWall.Seconds(), "rr-GB/s")
		b.ReportMetric(gb/tcpWall.Seconds(), "tcp-GB/s")
		b.ReportMetric(rrWall.Seconds()/peerWall.Seconds(), "rr-ratio")
		b.ReportMetric(tcpWall.Seconds()/peerWall.Seconds(), "tcp-ratio")
		b.ReportMetric(rrCPU.Seconds()/gb, "rr-cpu-s/GB")
		b.ReportMetric(tcpCPU.Seconds()/gb, "tcp-cpu-s/GB")
	}
}
