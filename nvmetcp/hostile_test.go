package nvmetcp

import (
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/nvme"
)

// Tests of the target against hostile or broken hosts (issue 15): each finding has a test
// that fails on the target as it was.

// eventually polls cond until it holds, failing after 20 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not so after 20 s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// readUntilClosed returns what the target sends before it closes c, failing if it does not
// close it within 20 s.
func readUntilClosed(t testing.TB, c net.Conn) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection from %s still open after 20 s", c.LocalAddr())
	}
	return b
}

// pdus splits what a target sent into PDUs.
func pdus(t testing.TB, b []byte) []*PDU {
	t.Helper()
	var out []*PDU
	for len(b) >= CommonHeaderLen {
		h, err := DecodeHeader(b, 1<<24)
		if err != nil || int(h.PLen) > len(b) {
			t.Fatalf("target sent a bad PDU: %v", err)
		}
		p, err := DecodePDU(b[:h.PLen], 1<<24)
		if err != nil {
			t.Fatalf("target sent a bad PDU: %v", err)
		}
		out = append(out, p)
		b = b[h.PLen:]
	}
	return out
}

// writeCapsule sends a Write of blocks 4 KiB blocks at slba whose data is to come after an
// R2T (transport SGL), with command identifier cid.
func writeCapsule(t testing.TB, q *hostQueue, cid uint16, slba uint64, blocks int) {
	t.Helper()
	w := nvme.Write(1, slba, uint32(blocks), nil, nvme.RWOptions{})
	sqe := EncodeSQE(&w, cid, SGLDesc{Length: uint32(blocks * 4096), Type: SGLTransport})
	if _, err := q.c.Write(AppendCapsuleCmd(nil, &sqe, nil, 0)); err != nil {
		t.Fatal(err)
	}
}

// h2c returns the H2CData PDUs carrying data for transfer tag of command cid, in pieces.
func h2c(cid, tag uint16, data []byte, piece int) []byte {
	var b []byte
	for off := 0; off < len(data); off += piece {
		n := min(piece, len(data)-off)
		var fl uint8
		if off+n == len(data) {
			fl = FlagLast
		}
		b = AppendDataHeader(b, TypeH2CData, fl, DataPDU{CCCID: cid, TTag: tag, Offset: uint32(off), Length: uint32(n)}, 0)
		b = append(b, data[off:off+n]...)
	}
	return b
}

// expectCQE reads the completion of command cid (skipping R2Ts for other writes).
func expectCQE(t testing.TB, q *hostQueue, cid uint16, want nvme.Status) {
	t.Helper()
	p, err := ReadPDU(q.r, 1<<24)
	for err == nil && p.Type == TypeR2T && DecodeDataPDU(p).CCCID != cid {
		p, err = ReadPDU(q.r, 1<<24)
	}
	if err != nil {
		t.Fatalf("command %d: %v", cid, err)
	}
	if p.Type != TypeCapsuleResp {
		t.Fatalf("command %d: got %v, want a CapsuleResp with %v", cid, p.Type, want)
	}
	if cqe := DecodeCQE(p.Hdr[CommonHeaderLen:]); cqe.CID != cid || cqe.Status != want {
		t.Fatalf("command %d: %+v, want status %v", cid, cqe, want)
	}
}

// TestHandshakeTimeout (finding: 64 connections that never send ICReq were all still open
// after 30 s): connections that never send ICReq, and ones that send ICReq but never
// Connect, are closed once the handshake timeout passes; an attached host is not disturbed.
func TestHandshakeTimeout(t *testing.T) {
	tgt, addr, _ := startTargetWith(t, func(c *Config) { c.HandshakeTimeout = 200 * time.Millisecond })
	h := attach(t, addr) // connected before: keeps working
	var silent []net.Conn
	for range 64 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		silent = append(silent, c)
	}
	for range 8 {
		silent = append(silent, dialQueue(t, addr, 0).c) // ICReq, no Connect
	}
	for _, c := range silent {
		readUntilClosed(t, c)
	}
	eventually(t, "connections back to the attached host's two", func() bool { return tgt.Stats().Connections == 2 })
	if s := tgt.Stats(); s.HandshakeTimeouts != 72 {
		t.Errorf("%d handshake timeouts, want 72", s.HandshakeTimeouts)
	}
	if c := h.io.run(ptr(nvme.Flush(1))); !c.Status.OK() || c.Err != nil {
		t.Fatalf("attached host after the timeouts: %+v", c)
	}
	attach(t, addr) // and a new one attaches
}

// TestStalledWritesWithinBudget (finding: 8 controllers × 127 stalled 1 MiB writes pinned
// +1.8 GiB): R2Ts wait for the write budget instead of allocating; writes whose data never
// comes cost budget, not memory; data that does come is granted to the next waiting writes
// in order; everything is returned when the hosts go.
func TestStalledWritesWithinBudget(t *testing.T) {
	const (
		hosts, depth = 8, 127
		blocks       = 64 // 256 KiB: the emulator's MDTS
		size         = blocks * 4096
		budgetBytes  = 16 * size
	)
	goroutines := runtime.NumGoroutine()
	tgt, addr, _ := startTargetWith(t, func(c *Config) { c.WriteBudget = budgetBytes; c.MaxControllers = hosts })
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var hs []*testHost
	for range hosts {
		h := attach(t, addr)
		hs = append(hs, h)
		for cid := uint16(1); cid <= depth; cid++ {
			writeCapsule(t, h.io, cid, uint64(cid)*blocks, blocks)
		}
	}
	eventually(t, "every write granted or waiting", func() bool {
		s := tgt.Stats()
		return int(s.WriteBuffered/size)+s.R2TWaiting == hosts*depth
	})
	s := tgt.Stats()
	if s.WriteBuffered != budgetBytes || s.R2TWaiting != hosts*depth-budgetBytes/size || s.WriteAllocated != 0 {
		t.Fatalf("stalled writes: %+v, want the %d-byte budget spent, the rest waiting, nothing allocated", s, budgetBytes)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 32<<20 {
		t.Errorf("heap grew %d MiB with %d stalled writes", grew>>20, hosts*depth)
	}
	// The R2Ts that went out: exactly the budget's worth, first come first served.
	type grant struct {
		h   *testHost
		r2t DataPDU
	}
	var grants []grant
	for _, h := range hs {
		h.io.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		for {
			p, err := ReadPDU(h.io.r, 1<<20)
			if err != nil {
				break
			}
			if p.Type != TypeR2T {
				t.Fatalf("got %v while writes wait", p.Type)
			}
			grants = append(grants, grant{h, DecodeDataPDU(p)})
		}
		h.io.c.SetReadDeadline(time.Time{})
	}
	if len(grants) != budgetBytes/size {
		t.Fatalf("%d R2Ts sent, want %d (the budget's worth)", len(grants), budgetBytes/size)
	}
	// Data for four granted writes: they run, and four waiting writes get their R2Ts.
	data := bytes.Repeat([]byte{0x5A}, size)
	for _, g := range grants[:4] {
		g.h.io.c.Write(h2c(g.r2t.CCCID, g.r2t.TTag, data, 64<<10))
		expectCQE(t, g.h.io, g.r2t.CCCID, 0)
	}
	eventually(t, "four more writes granted", func() bool { return tgt.Stats().R2TWaiting == hosts*depth-budgetBytes/size-4 })
	if s := tgt.Stats(); s.WriteBufferedPeak > budgetBytes || s.WriteBuffered != budgetBytes || s.WriteAllocated != 0 {
		t.Errorf("after four writes completed: %+v", s)
	}
	for _, h := range hs {
		h.Close()
	}
	eventually(t, "all connections gone", func() bool { return tgt.Stats().Connections == 0 })
	if s := tgt.Stats(); s.WriteBuffered != 0 || s.R2TWaiting != 0 || s.WriteAllocated != 0 || s.Controllers != 0 {
		t.Errorf("after the hosts left: %+v", s)
	}
	eventually(t, "goroutines back to the baseline", func() bool { return runtime.NumGoroutine() <= goroutines+1 }) // + Serve
}

// TestLimitsRefusedBeforeData (findings: writes above MDTS got an R2T; in-capsule data
// beyond IOCCSZ was accepted): both are refused with Invalid Field in Command before any
// data is asked for or kept, and the connection goes on.
func TestLimitsRefusedBeforeData(t *testing.T) {
	tgt, addr, _ := startTargetWith(t, nil)
	h := attach(t, addr)
	buf := make([]byte, nvme.IdentifyDataLen)
	if c := h.Admin(&nvme.Command{Opcode: nvme.OpIdentify, CDW10: uint32(nvme.CNSController), Data: buf}); !c.Status.OK() {
		t.Fatal(c)
	}
	id, _ := nvme.DecodeController(buf)
	if id.MDTS != 6 || id.MaxTransfer(0) != int(tgt.maxData) {
		t.Fatalf("MDTS %d (%d bytes), the target enforces %d", id.MDTS, id.MaxTransfer(0), tgt.maxData)
	}
	q := h.io
	// 512 KiB and 1 MiB writes: Invalid Field at once, no R2T.
	for i, blocks := range []int{128, 256} {
		writeCapsule(t, q, uint16(10+i), 0, blocks)
		expectCQE(t, q, uint16(10+i), StInvalidField)
	}
	// A Write whose descriptor asks for more (or less) than its blocks: Data SGL Length
	// Invalid, no R2T.
	w := nvme.Write(1, 0, 1, nil, nvme.RWOptions{})
	sqe := EncodeSQE(&w, 20, SGLDesc{Length: 8192, Type: SGLTransport})
	q.c.Write(AppendCapsuleCmd(nil, &sqe, nil, 0))
	expectCQE(t, q, 20, StSGLLength)
	// 16 KiB in the capsule of an I/O queue (IOCCSZ allows 8 KiB) and 12 KiB on the admin
	// queue: Invalid Field; the data is drained, not kept, and both queues go on.
	big := make([]byte, 16<<10)
	w = nvme.Write(1, 0, 4, nil, nvme.RWOptions{})
	sqe = EncodeSQE(&w, 21, SGLDesc{Length: uint32(len(big)), Type: SGLInCapsule})
	q.c.Write(AppendCapsuleCmd(nil, &sqe, big, 0))
	expectCQE(t, q, 21, StInvalidField)
	set := nvme.SetFeatures(nvme.FeatFDPEvents, false, 1, fdp.EventsFeatureCDW11(0, 1), 1, nil)
	sqe = EncodeSQE(&set, 22, SGLDesc{Length: 12 << 10, Type: SGLInCapsule})
	h.admin.c.Write(AppendCapsuleCmd(nil, &sqe, make([]byte, 12<<10), 0))
	expectCQE(t, h.admin, 22, StInvalidField)
	if s := tgt.Stats(); s.Rejected != 5 || s.WriteBufferedPeak != 0 {
		t.Errorf("%+v: want 5 rejected, no budget ever used", s)
	}
	out := bytes.Repeat([]byte{7}, 8192)
	if c := q.run(ptr(nvme.Write(1, 0, 2, out, nvme.RWOptions{}))); !c.Status.OK() {
		t.Fatalf("write after the refusals: %+v", c)
	}
	in := make([]byte, 8192)
	if c := q.run(ptr(nvme.Read(1, 0, 2, in))); !c.Status.OK() || !bytes.Equal(in, out) {
		t.Fatalf("read after the refusals: %+v", c)
	}
}

// TestReplySizedByCommand (finding: a reply buffer was sized by the host's descriptor; an
// Identify asking for 1 MiB got 1 MiB): Identify returns 4096 bytes, a log its real size,
// a read its blocks, whatever the descriptor offers.
func TestReplySizedByCommand(t *testing.T) {
	_, addr, ctrl := startTargetWith(t, nil)
	h := attach(t, addr)
	a := h.admin
	huge := make([]byte, 1<<20)
	run := func(q *hostQueue, cmd nvme.Command) int {
		t.Helper()
		if c := q.run(&cmd); c.Err != nil || !c.Status.OK() {
			t.Fatalf("opcode %#x: %+v", cmd.Opcode, c)
		}
		return q.lastRecvd
	}
	if n := run(a, nvme.Command{Opcode: nvme.OpIdentify, CDW10: uint32(nvme.CNSController), Data: huge}); n != nvme.IdentifyDataLen {
		t.Errorf("Identify into 1 MiB: %d bytes", n)
	}
	cfgs, _, err := fdp.ReadConfigs(ctrl, 1)
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := cfgs.Encode()
	for _, tc := range []struct {
		name string
		p    nvme.LogPage
		want int
	}{
		{"SMART", nvme.LogPage{LID: nvme.LogSMART, NSID: nvme.NSIDAll}, smartLogLen},
		{"FDP statistics", nvme.LogPage{LID: nvme.LogFDPStats, LSI: 1}, fdp.StatsLogSize},
		{"FDP configurations", nvme.LogPage{LID: nvme.LogFDPConfigs, LSI: 1}, len(enc)},
		{"FDP usage", nvme.LogPage{LID: nvme.LogRUHUsage, LSI: 1}, fdp.UsageLogSize(4)},
		{"FDP events", nvme.LogPage{LID: nvme.LogFDPEvents, LSI: 1, LSP: 1}, fdp.EventsLogSize},
		{"error information", nvme.LogPage{LID: nvme.LogErrorInfo}, errorEntryLen},
		{"SMART from offset 256", nvme.LogPage{LID: nvme.LogSMART, NSID: nvme.NSIDAll, Offset: 256}, smartLogLen - 256},
	} {
		cmd, err := nvme.GetLogPage(tc.p, make([]byte, 256<<10))
		if err != nil {
			t.Fatal(err)
		}
		if n := run(a, cmd); n != tc.want {
			t.Errorf("%s log asked for 256 KiB: %d bytes, want %d", tc.name, n, tc.want)
		}
	}
	// A Read's descriptor must match its blocks.
	if c := h.io.run(ptr(nvme.Read(1, 0, 1, make([]byte, 8192)))); c.Status != StSGLLength {
		t.Errorf("1-block read into 8 KiB: %+v", c)
	}
	if c := h.io.run(ptr(nvme.Read(1, 0, 2, make([]byte, 4096)))); c.Status != StSGLLength {
		t.Errorf("2-block read into 4 KiB: %+v", c)
	}
}

// TestH2CDataReadInPlace (finding: every H2CData PDU was read into a fresh buffer and copied
// again): a stream of 256 KiB writes allocates far less than the data it carries, because
// the data goes from the socket straight into a reused buffer.
func TestH2CDataReadInPlace(t *testing.T) {
	_, addr, _ := startTargetWith(t, nil)
	h := attach(t, addr)
	q := h.io
	const size, writes = 256 << 10, 64
	const piece = 64 << 10
	// The client reuses one capsule and one run of H2CData PDUs, patching CID and tag, so
	// what is allocated is the target's doing.
	w := nvme.Write(1, 0, size/4096, nil, nvme.RWOptions{})
	sqe := EncodeSQE(&w, 0, SGLDesc{Length: size, Type: SGLTransport})
	capsule := AppendCapsuleCmd(nil, &sqe, nil, 0)
	data := h2c(0, 0, bytes.Repeat([]byte{0xC3}, size), piece)
	var hb [maxHeadLen]byte
	one := func(cid uint16) {
		le.PutUint16(capsule[CommonHeaderLen+sqeCID:], cid)
		q.c.Write(capsule)
		h, head, err := readHead(q.r, hb[:], 1<<20, Digests{}, nil)
		if err != nil || h.Type != TypeR2T {
			t.Fatalf("want R2T: %v %v", h.Type, err)
		}
		tag := le.Uint16(head[dataTTagOff:])
		for off := 0; off < len(data); off += DataHLen + piece {
			le.PutUint16(data[off+dataCCCIDOff:], cid)
			le.PutUint16(data[off+dataTTagOff:], tag)
		}
		q.c.Write(data)
		h, head, err = readHead(q.r, hb[:], 1<<20, Digests{}, nil)
		if cqe := DecodeCQE(head[CommonHeaderLen:]); err != nil || h.Type != TypeCapsuleResp || cqe.CID != cid || !cqe.Status.OK() {
			t.Fatalf("write %d: %v %+v %v", cid, h.Type, cqe, err)
		}
	}
	for cid := range uint16(4) {
		one(cid) // warm the buffer pool
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for cid := range uint16(writes) {
		one(100 + cid)
	}
	runtime.ReadMemStats(&after)
	per := int64(after.TotalAlloc-before.TotalAlloc) / writes
	if per > size/4 && !raceEnabled {
		t.Errorf("target allocated %d bytes per %d-byte write", per, size)
	}
	t.Logf("target allocated %d bytes per %d KiB write", per, size>>10)
}

// TestQueueDepthAtMQES (finding: a queue let MQES+1 writes wait): with SQSIZE s (0's based,
// s+1 entries) at most s commands are outstanding; one more ends the connection with a
// PDU Sequence Error.
func TestQueueDepthAtMQES(t *testing.T) {
	_, addr, _ := startTargetWith(t, nil)
	h := attach(t, addr)
	q := dialQueue(t, addr, 0)
	const sqsize = 7
	if _, st, err := q.connect(2, sqsize, 0, h.cntlid, testNQN); err != nil || !st.OK() {
		t.Fatalf("connect: %v %v", st, err)
	}
	for cid := uint16(1); cid <= sqsize; cid++ {
		writeCapsule(t, q, cid, 0, 1)
		if p, err := ReadPDU(q.r, 1<<20); err != nil || p.Type != TypeR2T {
			t.Fatalf("write %d of %d: %v %v", cid, sqsize, p, err)
		}
	}
	writeCapsule(t, q, sqsize+1, 0, 1)
	got := pdus(t, readUntilClosed(t, q.c))
	if len(got) != 1 || got[0].Type != TypeC2HTermReq || DecodeTermReq(got[0]).FES != FESSequence {
		t.Fatalf("write %d on a queue of %d entries: %v", sqsize+1, sqsize+1, got)
	}
}

// TestKeepAlive (finding: queues with KATO 0 never time out): a controller whose host sends
// no Keep Alive within KATO (+ slack) is ended with its I/O queues, also after Set Features
// shortens KATO; one that sends them lives on; with KATO 0 an idle controller ends after the
// idle timeout.
func TestKeepAlive(t *testing.T) {
	tgt, addr, _ := startTargetWith(t, func(c *Config) {
		c.KeepAliveSlack = 300 * time.Millisecond
		c.IdleTimeout = 500 * time.Millisecond
	})
	connectKATO := func(kato uint32) *hostQueue {
		a := dialQueue(t, addr, 0)
		sqe := ConnectCommand(0, 31, 0, kato)
		data := ConnectData{HostID: testHostID, CNTLID: DynamicController, SubNQN: testNQN, HostNQN: testHostNQN}.Encode()
		if cqe, err := a.submitRaw(sqe, data, nil); err != nil || !cqe.Status.OK() {
			t.Fatalf("Connect: %+v %v", cqe, err)
		}
		if _, st, err := a.property(true, PropCC, false, ccEN); err != nil || !st.OK() {
			t.Fatal(st, err)
		}
		return a
	}
	live := connectKATO(700)
	quiet := connectKATO(200)
	idle := connectKATO(0)
	shortened := connectKATO(60000)
	if c := shortened.run(&nvme.Command{Opcode: nvme.OpSetFeatures, CDW10: uint32(featKATO), CDW11: 100}); !c.Status.OK() {
		t.Fatal(c)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // Keep Alive every 100 ms on the live controller, for 2 s
		defer wg.Done()
		for range 20 {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if c := live.run(&nvme.Command{Opcode: opKeepAlive}); !c.Status.OK() || c.Err != nil {
				t.Errorf("keep alive: %+v", c)
				return
			}
		}
	}()
	for _, q := range []*hostQueue{quiet, idle, shortened} {
		readUntilClosed(t, q.c)
	}
	wg.Wait()
	close(stop)
	if c := live.run(&nvme.Command{Opcode: opKeepAlive}); !c.Status.OK() || c.Err != nil {
		t.Errorf("controller that kept alive was ended: %+v", c)
	}
	if n := tgt.Stats().KeepAliveExpired; n != 3 {
		t.Errorf("%d controllers expired, want 3", n)
	}
}

// TestConnectionAndControllerLimits: connections beyond MaxConnections are closed at
// accept, admin Connects beyond MaxControllers get Connect Controller Busy; both free up
// when others leave.
func TestConnectionAndControllerLimits(t *testing.T) {
	tgt, addr, _ := startTargetWith(t, func(c *Config) { c.MaxConnections = 5; c.MaxControllers = 2 })
	h1 := attach(t, addr)
	h2 := attach(t, addr)
	third := dialQueue(t, addr, 0)
	if _, st, err := third.connect(0, 31, 0, DynamicController, testNQN); err != nil || st != StConnectBusy {
		t.Fatalf("third controller: %v %v, want Connect Controller Busy", st, err)
	}
	// Five connections are open: a sixth is closed without an ICResp.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(AppendICReq(nil, ICReq{}))
	if b := readUntilClosed(t, c); len(b) != 0 {
		t.Errorf("refused connection got %d bytes", len(b))
	}
	h1.Close()
	third.c.Close()
	eventually(t, "room again", func() bool { s := tgt.Stats(); return s.Connections == 2 && s.Controllers == 1 })
	attach(t, addr)
	if c := h2.io.run(ptr(nvme.Flush(1))); !c.Status.OK() {
		t.Fatalf("second host: %+v", c)
	}
	if s := tgt.Stats(); s.Refused != 1 || s.ControllersBusy != 1 {
		t.Errorf("%+v", s)
	}
}

// TestStalls: a host that receives an R2T and sends no (or only part of the) data, stops in
// the middle of a PDU, or stops reading the target's replies is disconnected after the stall
// timeout, and the budget it held is returned.
func TestStalls(t *testing.T) {
	tgt, addr, _ := startTargetWith(t, func(c *Config) { c.StallTimeout = 200 * time.Millisecond })
	h := attach(t, addr)
	check := func(name string, q *hostQueue, stalls int64) {
		t.Helper()
		readUntilClosed(t, q.c)
		eventually(t, name+": budget returned", func() bool {
			s := tgt.Stats()
			return s.Stalls >= stalls && s.WriteBuffered == 0 && s.WriteAllocated == 0
		})
	}
	newIO := func(qid uint16) *hostQueue {
		q := dialQueue(t, addr, 0)
		if _, st, err := q.connect(qid, 31, 0, h.cntlid, testNQN); err != nil || !st.OK() {
			t.Fatalf("connect %d: %v %v", qid, st, err)
		}
		return q
	}
	// R2T, no data.
	q := newIO(2)
	writeCapsule(t, q, 1, 0, 16)
	check("no data", q, 1)
	// R2T, half the data.
	q = newIO(2)
	writeCapsule(t, q, 1, 0, 16)
	p, err := ReadPDU(q.r, 1<<20)
	if err != nil || p.Type != TypeR2T {
		t.Fatal(p, err)
	}
	d := DecodeDataPDU(p)
	q.c.Write(AppendDataHeader(nil, TypeH2CData, 0, DataPDU{CCCID: 1, TTag: d.TTag, Length: 32 << 10}, 0))
	q.c.Write(make([]byte, 32<<10))
	check("half the data", q, 2)
	// A capsule header promising data that never comes.
	q = newIO(2)
	w := nvme.Write(1, 0, 1, nil, nvme.RWOptions{})
	sqe := EncodeSQE(&w, 1, SGLDesc{Length: 4096, Type: SGLInCapsule})
	b := AppendCapsuleCmd(nil, &sqe, make([]byte, 4096), 0)
	q.c.Write(b[:CapsuleCmdHLen+100])
	check("half a PDU", q, 3)
	// A host that sends reads and never reads the replies: the target's writes block, then
	// time out.
	q = newIO(2)
	rd := nvme.Read(1, 0, 64, nil)
	var burst []byte
	for cid := range uint16(200) {
		sqe := EncodeSQE(&rd, cid, SGLDesc{Length: 256 << 10, Type: SGLTransport})
		burst = AppendCapsuleCmd(burst, &sqe, nil, 0)
	}
	q.c.Write(burst)
	eventually(t, "a reader that does not read is dropped", func() bool { return tgt.Stats().Stalls >= 4 })
	if c := h.admin.run(&nvme.Command{Opcode: opKeepAlive}); !c.Status.OK() {
		t.Errorf("admin queue after the stalls: %+v", c)
	}
}

// TestMalformedDataPDUs: data PDUs that break the rules end the connection with the right
// fatal error status (and the target keeps serving).
func TestMalformedDataPDUs(t *testing.T) {
	tgt, addr, _ := startTargetWith(t, nil)
	h := attach(t, addr)
	for _, tc := range []struct {
		name string
		pdu  func(tag uint16) []byte
		fes  uint16
		fei  uint32
	}{
		{"DATAL above MAXH2CDATA", func(tag uint16) []byte {
			// Within the PDU length limit, but more data than one PDU may carry.
			return AppendDataHeader(nil, TypeH2CData, FlagLast, DataPDU{CCCID: 1, TTag: tag, Length: tgt.maxData + 4}, 0)
		}, FESDataLimit, dataLenOff},
		{"data beyond the R2T", func(tag uint16) []byte {
			return append(AppendDataHeader(nil, TypeH2CData, FlagLast, DataPDU{CCCID: 1, TTag: tag, Offset: 4096, Length: 4096}, 0), make([]byte, 4096)...)
		}, FESDataOutOfRange, dataOffOff},
		{"wrong CCCID", func(tag uint16) []byte {
			return append(AppendDataHeader(nil, TypeH2CData, FlagLast, DataPDU{CCCID: 2, TTag: tag, Length: 4096}, 0), make([]byte, 4096)...)
		}, FESInvalidHeader, dataCCCIDOff},
		{"LAST_PDU early", func(tag uint16) []byte {
			return append(AppendDataHeader(nil, TypeH2CData, FlagLast, DataPDU{CCCID: 1, TTag: tag, Length: 1024}, 0), make([]byte, 1024)...)
		}, FESInvalidHeader, hdrFlagsOff},
	} {
		q := dialQueue(t, addr, 0)
		if _, st, err := q.connect(2, 31, 0, h.cntlid, testNQN); err != nil || !st.OK() {
			t.Fatalf("%s: connect: %v %v", tc.name, st, err)
		}
		writeCapsule(t, q, 1, 0, 1)
		p, err := ReadPDU(q.r, 1<<20)
		if err != nil || p.Type != TypeR2T {
			t.Fatalf("%s: %v %v", tc.name, p, err)
		}
		q.c.Write(tc.pdu(DecodeDataPDU(p).TTag))
		got := pdus(t, readUntilClosed(t, q.c))
		if len(got) != 1 || got[0].Type != TypeC2HTermReq {
			t.Fatalf("%s: %v", tc.name, got)
		}
		if tr := DecodeTermReq(got[0]); tr.FES != tc.fes || tr.FEI != tc.fei {
			t.Errorf("%s: TermReq %+v, want FES %d FEI %d", tc.name, tr, tc.fes, tc.fei)
		}
		eventually(t, tc.name+": budget returned", func() bool { return tgt.Stats().WriteBuffered == 0 })
	}
	if c := h.io.run(ptr(nvme.Flush(1))); !c.Status.OK() {
		t.Fatalf("after malformed data PDUs: %+v", c)
	}
}
