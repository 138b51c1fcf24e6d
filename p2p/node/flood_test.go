package node

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"

	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/p2p/dataplane"
	"github.com/rbctl/rbctl/p2p/p2ppb"
	"github.com/rbctl/rbctl/p2p/p2ptest"
)

// Flood sizes of issue 28: idle connections that only said the data plane's hello, and
// idle HTTP/2 connections (the client preface; every other one also its SETTINGS frame,
// which completes the server's handshake), all from one namespace.
const floodData, floodControl = 200, 5000

// floodRSSBound is what the flood may add to the serving process's resident memory.
const floodRSSBound = 32 << 20

// A node in one namespace, a flood of idle connections from a second (another process),
// a real peer in a third: the peer's lookup and fetch succeed within their timeouts while
// the flood runs, the node's memory and descriptors stay bounded, and the refusals are
// counted. The flood redials what the node closes, so it keeps up its pressure.
func TestIdleFloodDoesNotLockOutAPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a 15 s flood")
	}
	nt := p2ptest.NewNet(t, 3)
	raiseNoFile(t, 4*floodControl)
	e := newEngine(t, nil)
	n := startNodeIn(t, nt, 0, e, fastOptions("a", nil), "7470", "7471")
	keys := make([]engine.Key, 8)
	vals := make([][]byte, 8)
	for i := range keys {
		keys[i], vals[i] = keyN(i), payloadN(i, chunkBytes)
	}
	if _, err := n.Put(keys, vals); err != nil {
		t.Fatal(err)
	}

	// The real peer: what fetchFrom does, from its own namespace, with the node's default
	// timeouts (lookup 2 s, transfer 10 s, a new data connection each time), every second
	// for 10 s of flood.
	dial1 := nt.Dialer(1)
	cc := rawConn(t, n.Peer().Control, grpc.WithContextDialer(func(_ context.Context, a string) (net.Conn, error) { return dial1("tcp", a, 2*time.Second) }))
	peer := p2ppb.NewPeerClient(cc)
	// Its control connection is up before the flood, as a member's is: a flood that fills
	// the listen backlog (4,096 here) makes a new connection wait for SYN retransmits, which
	// no accept policy can prevent (docs/p2p.md).
	if err := peerFetch(nt, peer, n.Peer().Data, keys[:1], vals[:1]); err != nil {
		t.Fatal(err)
	}
	rss0, fds0 := rssBytes(t), openFDs(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := nt.Command(ctx, 2, os.Args[0], "-test.run=^TestFloodHelper$")
	cmd.Env = append(os.Environ(), "RBCTL_FLOOD_CTL="+nt.Nodes[0].IP+":7470", "RBCTL_FLOOD_DATA="+nt.Nodes[0].IP+":7471")
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	lines := bufio.NewScanner(out)
	for lines.Scan() && !strings.HasPrefix(lines.Text(), "ready") {
	}
	t.Logf("flood: %s", lines.Text())
	go func() {
		for lines.Scan() {
			t.Log("flood: " + lines.Text())
		}
	}()

	var worst time.Duration
	var rssMax int64
	for round := range 10 {
		time.Sleep(time.Second)
		start := time.Now()
		if err := peerFetch(nt, peer, n.Peer().Data, keys[round%8:round%8+1], vals[round%8:round%8+1]); err != nil {
			t.Fatalf("round %d: the real peer's fetch failed under the flood: %v", round, err)
		}
		took := time.Since(start)
		worst = max(worst, took)
		t.Logf("round %d: peer fetch %v", round, took.Round(time.Millisecond))
		rssMax = max(rssMax, rssBytes(t))
	}
	fds := openFDs(t)
	c := n.Stats().Counters
	t.Logf("peer fetches: 10 of 10 within their timeouts, slowest %v", worst.Round(time.Millisecond))
	t.Logf("node RSS %.1f MiB before the flood, at most %.1f MiB during it (+%.1f MiB, bound %d MiB); fds %d before, %d during",
		mib(rss0), mib(rssMax), mib(rssMax-rss0), floodRSSBound>>20, fds0, fds)
	t.Logf("control_conns_refused %d, data_conns_refused %d, data_conns_unproven %d",
		c["control_conns_refused"], c["data_conns_refused"], c["data_conns_unproven"])
	if rssMax-rss0 > floodRSSBound {
		t.Errorf("the flood grew the node by %.1f MiB, bound %d MiB", mib(rssMax-rss0), floodRSSBound>>20)
	}
	// Held at once: the control plane's per-address cap, the data plane's strangers per
	// address, and what is between accept and close.
	if lim := 64 + 8 + 32; fds-fds0 > lim {
		t.Errorf("the node holds %d more descriptors under the flood, bound %d", fds-fds0, lim)
	}
	if c["control_conns_refused"] == 0 || c["data_conns_refused"] == 0 || c["data_conns_unproven"] == 0 {
		t.Errorf("refusals not counted: %v", c)
	}
}

// peerFetch locks keys on the node through the peer service and pulls them over the data
// plane from namespace 1, as a peer node does, verifying the bytes.
func peerFetch(nt *p2ptest.Net, api p2ppb.PeerClient, data string, keys []engine.Key, vals [][]byte) error {
	lctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := api.LookupAndLock(lctx, &p2ppb.LookupAndLockRequest{Keys: wireKeys(keys), LeaseMs: 10000})
	if err != nil {
		return fmt.Errorf("lookup: %w", err)
	}
	if resp.LeaseId == 0 || len(resp.Hits) != len(keys) {
		return fmt.Errorf("lookup: lease %d, %d hits", resp.LeaseId, len(resp.Hits))
	}
	defer api.Unlock(context.Background(), &p2ppb.UnlockRequest{LeaseId: resp.LeaseId})
	return nt.Do(1, func() error {
		fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := dataplane.Dial(fctx, data)
		if err != nil {
			return err
		}
		defer conn.Close()
		want := make([]dataplane.Want, len(resp.Hits))
		for i, h := range resp.Hits {
			want[i] = dataplane.Want{Index: uint32(i), Size: h.Size, CRC: h.Checksum, HasCRC: h.HasChecksum}
		}
		got := 0
		err = conn.Fetch(fctx, resp.LeaseId, want, func(i int, p []byte) {
			if string(p) == string(vals[i]) {
				got++
			}
		})
		if err == nil && got != len(keys) {
			err = fmt.Errorf("%d of %d chunks right", got, len(keys))
		}
		return err
	})
}

// TestFloodHelper is the flood's process (run by TestIdleFloodDoesNotLockOutAPeer in its
// own namespace); it does nothing in a normal run.
func TestFloodHelper(t *testing.T) {
	ctlAddr, dataAddr := os.Getenv("RBCTL_FLOOD_CTL"), os.Getenv("RBCTL_FLOOD_DATA")
	if ctlAddr == "" {
		t.Skip("the flood of TestIdleFloodDoesNotLockOutAPeer")
	}
	var open [2]atomic.Int64
	var closed [2]atomic.Int64
	preface := []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	settings := []byte{0, 0, 0, 4, 0, 0, 0, 0, 0} // an empty SETTINGS frame
	hello := []byte{'R', 'B', 'D', 'P', 1, 0, 0, 0}
	hold := func(kind int, addr string, i int) {
		for {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			if kind == 0 {
				c.Write(hello)
			} else {
				c.Write(preface)
				if i%2 == 1 {
					c.Write(settings)
				}
			}
			open[kind].Add(1)
			io.Copy(io.Discard, c) // until the node closes it
			open[kind].Add(-1)
			closed[kind].Add(1)
			c.Close()
			time.Sleep(300 * time.Millisecond) // then dial again
		}
	}
	var wg sync.WaitGroup
	for i := range floodData {
		wg.Go(func() { hold(0, dataAddr, i) })
	}
	for i := range floodControl {
		wg.Go(func() { hold(1, ctlAddr, i) })
	}
	time.Sleep(2 * time.Second)
	fmt.Printf("ready: %d data and %d control connections started\n", floodData, floodControl)
	go func() { io.Copy(io.Discard, os.Stdin); os.Exit(0) }()
	for {
		time.Sleep(2 * time.Second)
		fmt.Printf("open now: data %d, control %d; closed by the node so far: data %d, control %d\n",
			open[0].Load(), open[1].Load(), closed[0].Load(), closed[1].Load())
	}
}

func raiseNoFile(t *testing.T, want uint64) {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
		t.Fatal(err)
	}
	if r.Cur < want {
		r.Cur = min(want, r.Max)
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &r); err != nil || r.Cur < want {
			t.Skipf("RLIMIT_NOFILE %d below the flood's %d: %v", r.Cur, want, err)
		}
	}
}

// rssBytes is the process's resident memory after the heap's free pages went back to the
// kernel (so readings taken after different pasts compare).
func rssBytes(t *testing.T) int64 {
	debug.FreeOSMemory()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
