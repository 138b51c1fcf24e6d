package nvmetcp

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/nvme"
)

// TestSoak: many initiators at once doing mixed, verified I/O — placed writes of 4 KiB to
// the MDTS (in-capsule and through R2T), reads, deallocates, flushes, FDP log reads, with
// and without digests — against one target with a small write budget, while faults are
// injected: connections dropped in the middle of a transfer, R2Ts left unanswered, admin
// queues closed under their I/O queues, malformed PDUs, connections that never send ICReq.
// Every read is checked against a model of what each block may hold; at the end nothing is
// leaked (connections, controllers, budget, buffers, goroutines, file descriptors).
//
// It runs for 2 s; RBCTL_SOAK=5m runs it for that long and logs the figures.
func TestSoak(t *testing.T) {
	dur := 2 * time.Second
	if v := os.Getenv("RBCTL_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("RBCTL_SOAK=%q: %v", v, err)
		}
		dur = d
	} else if testing.Short() {
		dur = 500 * time.Millisecond
	}
	goroutines, fds := runtime.NumGoroutine(), openFDs(t)
	ctrl, err := emu.Open("emu:mem?size=192M&ru=4M&ruhs=4&op=0.25")
	if err != nil {
		t.Fatal(err)
	}
	defer ctrl.Close()
	tgt, err := New(Config{NQN: testNQN, Backend: ctrl, MaxIOQueues: 4, MaxControllers: 64,
		WriteBudget: 1 << 20, StallTimeout: 500 * time.Millisecond, HandshakeTimeout: time.Second,
		KeepAliveSlack: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- tgt.Serve(ln) }()
	addr := ln.Addr().String()

	const workers = 12
	span := uint64(192<<20/4096) / workers
	var (
		wg     sync.WaitGroup
		stats  soakStats
		stopAt = time.Now().Add(dur)
	)
	models := make([]*soakModel, workers)
	for w := range workers {
		models[w] = newSoakModel(w, uint64(w)*span, span)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 15))
			for time.Now().Before(stopAt) && !t.Failed() {
				if err := soakSession(addr, models[w], rng, &stats); err != nil {
					t.Errorf("worker %d: %v", w, err)
					return
				}
			}
		}()
	}
	// Connections that never send ICReq, all along.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for time.Now().Before(stopAt) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			stats.silent.Add(1)
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			go func() {
				defer c.Close()
				var b [1]byte
				c.Read(b[:]) // returns when the target closes it
			}()
			time.Sleep(50 * time.Millisecond)
		}
	}()
	wg.Wait()
	if t.Failed() {
		tgt.Close()
		return
	}
	// Nothing left behind on the target while it still runs...
	eventually(t, "target back to idle", func() bool {
		s := tgt.Stats()
		return s.Connections == 0 && s.Controllers == 0 && s.WriteBuffered == 0 && s.WriteAllocated == 0 && s.R2TWaiting == 0
	})
	// ...and every block holds what the model allows.
	h, err := attachE(addr, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range models {
		if err := m.verifyAll(h.io, &stats); err != nil {
			t.Error(err)
		}
	}
	h.Close()
	eventually(t, "verifier gone", func() bool { return tgt.Stats().Connections == 0 })
	s := tgt.Stats()
	tgt.Close()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	eventually(t, "goroutines back to the baseline", func() bool { return runtime.NumGoroutine() <= goroutines })
	eventually(t, "file descriptors back to the baseline", func() bool { return openFDs(t) <= fds })
	t.Logf("soak %v: %d connections (%d never sent ICReq), %.2f GiB moved (%d writes, %d reads, %d verified blocks), "+
		"peak RSS %d MiB, write budget peak %d KiB of %d, faults injected: %d dropped mid-transfer, %d stalled R2Ts, "+
		"%d admin queues dropped, %d malformed PDUs; target: %d R2Ts waited for budget, %d handshake timeouts, %d stalls, %d TermReqs; leaks 0",
		dur, s.Accepted, stats.silent.Load(), float64(stats.bytes.Load())/(1<<30), stats.writes.Load(), stats.reads.Load(),
		stats.verified.Load(), peakRSS()>>20, s.WriteBufferedPeak>>10, 1<<10, stats.dropped.Load(), stats.stalled.Load(),
		stats.adminDropped.Load(), stats.malformed.Load(), s.R2TWaited, s.HandshakeTimeouts, s.Stalls, s.TermReqs)
	if s.WriteBufferedPeak > 1<<20 {
		t.Errorf("write budget peak %d above the 1 MiB budget", s.WriteBufferedPeak)
	}
}

type soakStats struct {
	bytes, writes, reads, verified                    atomic.Int64
	dropped, stalled, adminDropped, malformed, silent atomic.Int64
}

// soakSession attaches one host, runs a few dozen operations and ends with a fault or a
// clean close.
func soakSession(addr string, m *soakModel, rng *rand.Rand, st *soakStats) error {
	var digest uint8
	if rng.IntN(4) == 0 {
		digest = digestHeader | digestData
	}
	h, err := attachE(addr, digest)
	if err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	defer h.Close()
	for range 10 + rng.IntN(40) {
		h.io.c.SetDeadline(time.Now().Add(20 * time.Second))
		h.admin.c.SetDeadline(time.Now().Add(20 * time.Second))
		switch k := rng.IntN(100); {
		case k < 40:
			if err := m.write(h.io, rng, st); err != nil {
				return err
			}
		case k < 80:
			if err := m.read(h.io, rng, st); err != nil {
				return err
			}
		case k < 85:
			if err := m.deallocate(h.io, rng); err != nil {
				return err
			}
		case k < 88:
			if c := h.io.run(ptr(nvme.Flush(1))); !c.Status.OK() || c.Err != nil {
				return fmt.Errorf("flush: %+v", c)
			}
		case k < 91:
			if _, _, err := fdp.ReadStats(h, 1); err != nil {
				return fmt.Errorf("FDP statistics: %w", err)
			}
			if _, _, err := fdp.ReadConfigs(h, 1); err != nil {
				return fmt.Errorf("FDP configurations: %w", err)
			}
		default:
			return m.fault(h, rng, st)
		}
	}
	return nil
}

// soakModel is what one worker's blocks may hold: for each block the versions it may carry
// (0: zeroes). A write acknowledged leaves one; a write cut off by a fault adds its version
// to those already possible; a read narrows them to what it saw.
type soakModel struct {
	w          int
	base, span uint64
	next       uint32
	may        [][]uint32
}

const soakBlock = 4096

func newSoakModel(w int, base, span uint64) *soakModel {
	m := &soakModel{w: w, base: base, span: span, may: make([][]uint32, span)}
	for i := range m.may {
		m.may[i] = []uint32{0}
	}
	return m
}

// fill writes the content of block lba at version v: a header naming both, then bytes
// derived from them.
func fill(b []byte, lba uint64, v uint32) {
	if v == 0 {
		clear(b)
		return
	}
	binary.LittleEndian.PutUint64(b, lba)
	binary.LittleEndian.PutUint32(b[8:], v)
	x := lba*0x9E3779B97F4A7C15 ^ uint64(v)
	for i := 16; i < len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(b[i:], x)
	}
}

// extent picks blocks to work on: at least least of them, up to 256 KiB (the MDTS), a
// third of the time small enough to go in the capsule.
func (m *soakModel) extent(rng *rand.Rand, least int) (uint64, int) {
	n := 1 + rng.IntN(64)
	if rng.IntN(3) == 0 {
		n = 1 + rng.IntN(2)
	}
	n = max(n, least)
	return uint64(rng.IntN(int(m.span) - n)), n
}

func (m *soakModel) payload(off uint64, n int) ([]byte, []uint32) {
	b := make([]byte, n*soakBlock)
	vs := make([]uint32, n)
	for i := range n {
		m.next++
		vs[i] = m.next
		fill(b[i*soakBlock:(i+1)*soakBlock], m.base+off+uint64(i), vs[i])
	}
	return b, vs
}

func (m *soakModel) write(q *hostQueue, rng *rand.Rand, st *soakStats) error {
	off, n := m.extent(rng, 1)
	b, vs := m.payload(off, n)
	o := nvme.RWOptions{}
	if rng.IntN(2) == 0 {
		o = nvme.RWOptions{DType: nvme.DirTypeDataPlacement, DSpec: uint16(rng.IntN(4))}
	}
	if c := q.run(ptr(nvme.Write(1, m.base+off, uint32(n), b, o))); !c.Status.OK() || c.Err != nil {
		return fmt.Errorf("write of %d blocks at %d: %+v", n, m.base+off, c)
	}
	for i, v := range vs {
		m.may[off+uint64(i)] = []uint32{v}
	}
	st.writes.Add(1)
	st.bytes.Add(int64(len(b)))
	return nil
}

func (m *soakModel) read(q *hostQueue, rng *rand.Rand, st *soakStats) error {
	off, n := m.extent(rng, 1)
	b := make([]byte, n*soakBlock)
	if c := q.run(ptr(nvme.Read(1, m.base+off, uint32(n), b))); !c.Status.OK() || c.Err != nil {
		return fmt.Errorf("read of %d blocks at %d: %+v", n, m.base+off, c)
	}
	st.reads.Add(1)
	st.bytes.Add(int64(len(b)))
	return m.check(off, b, st)
}

// check compares blocks read at off with what the model allows, and narrows the model.
func (m *soakModel) check(off uint64, b []byte, st *soakStats) error {
	want := make([]byte, soakBlock)
	for i := 0; i < len(b)/soakBlock; i++ {
		got := b[i*soakBlock : (i+1)*soakBlock]
		lba := m.base + off + uint64(i)
		seen := false
		for _, v := range m.may[off+uint64(i)] {
			fill(want, lba, v)
			if bytes.Equal(got, want) {
				m.may[off+uint64(i)] = []uint32{v}
				seen = true
				break
			}
		}
		if !seen {
			return fmt.Errorf("worker %d: block %d holds %x… (version %d), allowed versions %v", m.w, lba, got[:16],
				binary.LittleEndian.Uint32(got[8:]), m.may[off+uint64(i)])
		}
		st.verified.Add(1)
	}
	return nil
}

func (m *soakModel) verifyAll(q *hostQueue, st *soakStats) error {
	for off := uint64(0); off < m.span; off += 64 {
		n := int(min(64, m.span-off))
		b := make([]byte, n*soakBlock)
		q.c.SetDeadline(time.Now().Add(20 * time.Second))
		if c := q.run(ptr(nvme.Read(1, m.base+off, uint32(n), b))); !c.Status.OK() || c.Err != nil {
			return fmt.Errorf("final read at %d: %+v", m.base+off, c)
		}
		if err := m.check(off, b, st); err != nil {
			return err
		}
	}
	return nil
}

func (m *soakModel) deallocate(q *hostQueue, rng *rand.Rand) error {
	off, n := m.extent(rng, 1)
	c, err := nvme.Deallocate(1, []nvme.DSMRange{{SLBA: m.base + off, NLB: uint32(n)}}, make([]byte, 4096))
	if err != nil {
		return err
	}
	if r := q.run(&c); !r.Status.OK() || r.Err != nil {
		return fmt.Errorf("deallocate: %+v", r)
	}
	for i := range n {
		m.may[off+uint64(i)] = []uint32{0} // the emulator reads deallocated blocks as zeroes
	}
	return nil
}

// fault ends the session with one injected fault.
func (m *soakModel) fault(h *testHost, rng *rand.Rand, st *soakStats) error {
	q := h.io
	switch rng.IntN(4) {
	case 0, 1: // a write whose host goes away (case 0) or falls silent (case 1) after the R2T
		off, n := m.extent(rng, 3) // beyond the in-capsule limit: through an R2T
		b, vs := m.payload(off, n)
		for i, v := range vs {
			m.may[off+uint64(i)] = append(m.may[off+uint64(i)], v)
		}
		w := nvme.Write(1, m.base+off, uint32(n), nil, nvme.RWOptions{})
		sqe := EncodeSQE(&w, 0xF00, SGLDesc{Length: uint32(len(b)), Type: SGLTransport})
		head, tail := Frame(AppendCapsuleCmd(nil, &sqe, nil, 0), nil, q.dg, 0)
		q.c.Write(append(head, tail...))
		p, err := ReadPDUDigests(q.r, 1<<20, q.dg)
		if err != nil {
			return fmt.Errorf("waiting for the R2T: %w", err)
		}
		if p.Type != TypeR2T {
			return fmt.Errorf("got %v, want R2T", p.Type)
		}
		if rng.IntN(2) == 0 {
			st.dropped.Add(1)
			d := DecodeDataPDU(p)
			half := len(b) / 2 / 4096 * 4096
			hd, tl := Frame(AppendDataHeader(nil, TypeH2CData, 0, DataPDU{CCCID: 0xF00, TTag: d.TTag, Length: uint32(half)}, 0), b[:half], q.dg, 0)
			q.c.Write(append(append(hd, b[:half]...), tl...))
			return nil // the deferred Close drops both queues mid-transfer
		}
		st.stalled.Add(1)
		return waitClosed(q) // the target gives up on the transfer
	case 2: // the admin queue goes: its I/O queue must follow
		st.adminDropped.Add(1)
		h.admin.c.Close()
		return waitClosed(q)
	default: // a malformed PDU: a C2HTermReq, then the close
		st.malformed.Add(1)
		bad := AppendCapsuleCmd(nil, new([SQELen]byte), nil, 0)
		bad[hdrHLenOff] = 40
		q.c.Write(bad)
		for {
			p, err := ReadPDUDigests(q.r, 1<<20, q.dg)
			if err != nil {
				return fmt.Errorf("malformed PDU: no C2HTermReq before the close (%v)", err)
			}
			if p.Type == TypeC2HTermReq {
				return waitClosed(q)
			}
		}
	}
}

// waitClosed reads q until the target closes it (error if it does not within the deadline).
func waitClosed(q *hostQueue) error {
	q.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(q.r)
	for {
		if _, err := r.ReadByte(); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return fmt.Errorf("target did not close the connection")
			}
			return nil
		}
	}
}

func openFDs(t testing.TB) int {
	d, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(d)
}

// peakRSS is the process's peak resident set (VmHWM), in bytes.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n << 10
		}
	}
	return 0
}
