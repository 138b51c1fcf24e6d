package nvmetcp

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/nvme"
)

const testSpec = "emu:mem?size=64M&ru=1M&ruhs=4&op=0.25"

// startTarget serves a fresh in-memory emulated FDP SSD on a loopback port.
func startTarget(t testing.TB) (*Target, string, *emu.Controller) {
	t.Helper()
	return startTargetWith(t, nil)
}

// startTargetWith is startTarget with the configuration adjusted by tune.
func startTargetWith(t testing.TB, tune func(*Config)) (*Target, string, *emu.Controller) {
	t.Helper()
	ctrl, err := emu.Open(testSpec)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{NQN: testNQN, Backend: ctrl, MaxIOQueues: 4}
	if tune != nil {
		tune(&cfg)
	}
	tgt, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go tgt.Serve(ln)
	t.Cleanup(func() {
		tgt.Close()
		ctrl.Close()
	})
	return tgt, ln.Addr().String(), ctrl
}

func TestIdentifyOverFabric(t *testing.T) {
	_, addr, _ := startTarget(t)
	h := attach(t, addr)
	buf := make([]byte, nvme.IdentifyDataLen)
	c := h.Admin(&nvme.Command{Opcode: nvme.OpIdentify, CDW10: uint32(nvme.CNSController), Data: buf})
	if c.Err != nil || !c.Status.OK() {
		t.Fatalf("Identify Controller: %+v", c)
	}
	id, err := nvme.DecodeController(buf)
	if err != nil {
		t.Fatal(err)
	}
	if id.CNTLID != h.cntlid || id.CNTRLTYPE != 1 || id.SubNQN != testNQN || id.ModelNumber != emu.ModelNumber {
		t.Errorf("CNTLID %d (connect gave %d) CNTRLTYPE %d SUBNQN %q MN %q", id.CNTLID, h.cntlid, id.CNTRLTYPE, id.SubNQN, id.ModelNumber)
	}
	if id.SGLS&3 != 1 || id.SGLS&(1<<20) == 0 || id.MAXCMD != DefaultQueueSize || id.CTRATT&nvme.CTRATTFDPS == 0 {
		t.Errorf("SGLS %#x MAXCMD %d CTRATT %#x", id.SGLS, id.MAXCMD, id.CTRATT)
	}
	if got := le.Uint32(buf[idIOCCSZ:]); got != (SQELen+DefaultInlineData)/16 || le.Uint32(buf[idIORCSZ:]) != 1 || buf[idMSDBD] != 1 || le.Uint16(buf[idKAS:]) == 0 {
		t.Errorf("IOCCSZ %d IORCSZ %d MSDBD %d KAS %d", got, le.Uint32(buf[idIORCSZ:]), buf[idMSDBD], le.Uint16(buf[idKAS:]))
	}
	// Namespace descriptors: NGUID, UUID and CSI, the same every time.
	var first []nvme.NSDescriptor
	for range 2 {
		c = h.Admin(&nvme.Command{Opcode: nvme.OpIdentify, NSID: 1, CDW10: uint32(nvme.CNSNSDescriptors), Data: buf})
		if !c.Status.OK() || c.Err != nil {
			t.Fatalf("Identify NS descriptors: %+v", c)
		}
		d, err := nvme.DecodeNSDescriptors(buf)
		if err != nil || len(d) != 3 || d[0].Type != nvme.NIDTNGUID || d[1].Type != nvme.NIDTUUID || d[2].Type != nvme.NIDTCSI || d[1].ID[6]>>4 != 8 {
			t.Fatalf("descriptors %+v %v", d, err)
		}
		if first != nil && !reflect.DeepEqual(first, d) {
			t.Errorf("descriptors changed: %x then %x", first, d)
		}
		first = d
	}
	c = h.Admin(&nvme.Command{Opcode: nvme.OpIdentify, NSID: 2, CDW10: uint32(nvme.CNSNSDescriptors), Data: buf})
	if c.Status != StInvalidNS {
		t.Errorf("descriptors of NSID 2: %v", c.Status)
	}
	// The namespace itself comes from the emulator.
	c = h.Admin(&nvme.Command{Opcode: nvme.OpIdentify, NSID: 1, CDW10: uint32(nvme.CNSNamespace), Data: buf})
	ns, err := nvme.DecodeNamespace(buf)
	if !c.Status.OK() || err != nil || ns.NSZE != 64<<20/4096 {
		t.Errorf("Identify Namespace: %+v %+v %v", c, ns, err)
	}
}

func TestWriteReadOverFabric(t *testing.T) {
	_, addr, ctrl := startTarget(t)
	h := attach(t, addr)
	rng := rand.New(rand.NewPCG(1, 2))
	// 4 KiB goes in the capsule; 64 KiB and 256 KiB need an R2T and several H2CData PDUs;
	// 256 KiB comes back in two C2HData PDUs.
	for i, n := range []int{4096, 8192, 64 << 10, 256 << 10} {
		out := make([]byte, n)
		for j := range out {
			out[j] = byte(rng.Uint32())
		}
		slba := uint64(i) * 1024
		c := h.io.run(ptr(nvme.Write(1, slba, uint32(n/4096), out, nvme.RWOptions{DType: nvme.DirTypeDataPlacement, DSpec: uint16(i % 4)})))
		if c.Err != nil || !c.Status.OK() {
			t.Fatalf("write %d bytes: %+v", n, c)
		}
		in := make([]byte, n)
		c = h.io.run(ptr(nvme.Read(1, slba, uint32(n/4096), in)))
		if c.Err != nil || !c.Status.OK() || !bytes.Equal(in, out) {
			t.Fatalf("read %d bytes: %+v, equal %v", n, c, bytes.Equal(in, out))
		}
		// And the emulator holds the same bytes.
		direct := make([]byte, n)
		var done [1]nvme.Completion
		ctrl.IO([]nvme.Command{nvme.Read(1, slba, uint32(n/4096), direct)}, done[:])
		if !done[0].Status.OK() || !bytes.Equal(direct, out) {
			t.Fatalf("emulator after a %d-byte write over the fabric: %+v", n, done[0])
		}
	}
	// Out of range and unknown opcodes are NVMe errors, not disconnects.
	c := h.io.run(ptr(nvme.Read(1, 1<<40, 1, make([]byte, 4096))))
	if c.Err != nil || c.Status.SC() != 0x80 {
		t.Errorf("read beyond the namespace: %+v", c)
	}
	c = h.io.run(&nvme.Command{Opcode: 0x7C, NSID: 1})
	if c.Err != nil || c.Status != StInvalidOpcode {
		t.Errorf("unknown I/O opcode: %+v", c)
	}
	c = h.admin.run(&nvme.Command{Opcode: 0xC4})
	if c.Err != nil || c.Status != StInvalidOpcode {
		t.Errorf("unknown admin opcode: %+v", c)
	}
}

func ptr(c nvme.Command) *nvme.Command { return &c }

// TestFDPOverFabricMatchesInProcess: what rbctl's FDP code reads over NVMe/TCP equals what
// it reads from the emulator in-process, before and after placed writes, a deallocate and
// an RUH update.
func TestFDPOverFabricMatchesInProcess(t *testing.T) {
	_, addr, ctrl := startTarget(t)
	h := attach(t, addr)
	compare := func(stage string) {
		t.Helper()
		remote, err := fdp.Discover(h)
		if err != nil {
			t.Fatalf("%s: Discover over the fabric: %v", stage, err)
		}
		local, err := fdp.Discover(ctrl)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(remote, local) {
			t.Errorf("%s: Discover differs:\nfabric %+v\nlocal  %+v", stage, remote, local)
		}
		rs, rb, err := fdp.ReadStats(h, 1)
		if err != nil {
			t.Fatal(err)
		}
		ls, lb, _ := fdp.ReadStats(ctrl, 1)
		if *rs != *ls || !bytes.Equal(rb, lb) {
			t.Errorf("%s: stats differ: %+v vs %+v", stage, rs, ls)
		}
		for _, host := range []bool{false, true} {
			re, _, err := fdp.ReadEvents(h, 1, host)
			ev, _, _ := fdp.ReadEvents(ctrl, 1, host)
			if err != nil || !reflect.DeepEqual(re, ev) {
				t.Errorf("%s: events (host %v) differ: %v", stage, host, err)
			}
		}
	}
	compare("fresh")
	disc, _ := fdp.Discover(h)
	if len(disc.PIDs) != 4 || !disc.Feature.Enabled {
		t.Fatalf("discovery over the fabric: %+v", disc)
	}
	buf := make([]byte, 128<<10)
	var written uint64
	for i := range 32 {
		pid := disc.PIDs[i%len(disc.PIDs)]
		c := h.io.run(ptr(nvme.Write(1, uint64(i)*32, 32, buf, nvme.RWOptions{DType: nvme.DirTypeDataPlacement, DSpec: pid})))
		if !c.Status.OK() || c.Err != nil {
			t.Fatalf("placed write: %+v", c)
		}
		written += uint64(len(buf))
	}
	st, _, err := fdp.ReadStats(h, 1)
	if err != nil || st.HBMW.Lo != written {
		t.Fatalf("HBMW %+v after %d bytes: %v", st, written, err)
	}
	compare("after writes")
	dsm := make([]byte, 4096)
	c, err := nvme.Deallocate(1, []nvme.DSMRange{{SLBA: 0, NLB: 64}}, dsm)
	if err != nil {
		t.Fatal(err)
	}
	if r := h.io.run(&c); !r.Status.OK() || r.Err != nil {
		t.Fatalf("deallocate: %+v", r)
	}
	if err := fdp.UpdateRUH(h, 1, disc.PIDs[:2]); err != nil {
		t.Fatalf("RUH update over the fabric: %v", err)
	}
	compare("after deallocate and update")
	// A Set Feature with data (FDP events enables) through R2T-less in-capsule data.
	if err := fdp.SetEventEnables(h, 1, 0, []fdp.EventType{fdp.EventInvalidPID}, false, false); err != nil {
		t.Fatalf("set event enables: %v", err)
	}
	en, err := fdp.GetEventEnables(h, 1, 0)
	local, _ := fdp.GetEventEnables(ctrl, 1, 0)
	if err != nil || !reflect.DeepEqual(en, local) {
		t.Errorf("event enables %+v vs %+v: %v", en, local, err)
	}
}

func TestConnectRules(t *testing.T) {
	tgt, addr, _ := startTarget(t)
	// Wrong subsystem NQN: Connect Invalid Parameters pointing at SUBNQN in the data.
	q := dialQueue(t, addr, 0)
	dw, st, err := q.connect(0, 31, 0, DynamicController, "nqn.2026-11.io.rbctl:other")
	if err != nil || st != StConnectInvalidParam || q.lastCQE.Result != uint64(connDataSubNQN)<<16|1 {
		t.Errorf("wrong NQN: dw %#x status %v %v", dw, st, err)
	}
	// Commands other than Connect before Connect: Command Sequence Error.
	q2 := dialQueue(t, addr, 0)
	if c := q2.run(&nvme.Command{Opcode: nvme.OpIdentify, CDW10: 1, Data: make([]byte, 4096)}); c.Status != StSeqError {
		t.Errorf("Identify before Connect: %+v", c)
	}
	// An admin queue whose controller is not enabled yet refuses I/O queue Connects and
	// admin commands; after CC.EN, queue IDs above the granted count are refused.
	a := dialQueue(t, addr, 0)
	id, st, err := a.connect(0, 31, 0, DynamicController, testNQN)
	if err != nil || !st.OK() {
		t.Fatal(st, err)
	}
	if c := a.run(&nvme.Command{Opcode: nvme.OpIdentify, CDW10: 1, Data: make([]byte, 4096)}); c.Status != StSeqError {
		t.Errorf("Identify with CC.EN=0: %+v", c)
	}
	io1 := dialQueue(t, addr, 0)
	if _, st, _ := io1.connect(1, 31, 0, id, testNQN); st.OK() {
		t.Error("I/O queue connected to a disabled controller")
	}
	if v, _, _ := a.property(false, PropCAP, true, 0); v&0xffff != DefaultQueueSize-1 || v>>37&1 != 1 {
		t.Errorf("CAP %#x", v)
	}
	if v, _, _ := a.property(false, PropVS, false, 0); v != 0x00020000 {
		t.Errorf("VS %#x", v)
	}
	a.property(true, PropCC, false, ccEN)
	a.run(&nvme.Command{Opcode: nvme.OpSetFeatures, CDW10: uint32(nvme.FeatNumQueues), CDW11: 1 | 1<<16})
	for _, tc := range []struct {
		name   string
		qid    uint16
		sqsize uint16
		cntlid uint16
		ok     bool
	}{
		{"unknown controller", 1, 31, id + 100, false},
		{"queue 3 of 2", 3, 31, id, false},
		{"sqsize above MQES", 1, DefaultQueueSize, id, false},
		{"queue 2", 2, 31, id, true},
		{"queue 2 again", 2, 31, id, false},
	} {
		q := dialQueue(t, addr, 0)
		_, st, err := q.connect(tc.qid, tc.sqsize, 0, tc.cntlid, testNQN)
		if err != nil || st.OK() != tc.ok {
			t.Errorf("%s: status %v %v", tc.name, st, err)
		}
	}
	// Connect data that does not fit in the capsule comes through R2T/H2CData.
	q3 := dialQueue(t, addr, 0)
	q3.inline, q3.h2c = 0, 100
	if _, st, err := q3.connect(1, 31, 0, id, testNQN); err != nil || !st.OK() {
		t.Errorf("I/O queue 1 with Connect data through R2T: %v %v", st, err)
	}
	// Shutdown through CC.SHN completes at once.
	a.property(true, PropCC, false, ccEN|1<<ccSHNShift)
	if v, _, _ := a.property(false, PropCSTS, false, 0); v&(3<<2) != cstsSHST {
		t.Errorf("CSTS after shutdown %#x", v)
	}
	if n := tgt.Controllers(); n != 1 {
		t.Errorf("%d controllers, want 1", n)
	}
}

func TestAERHeldAndKeepAlive(t *testing.T) {
	_, addr, _ := startTarget(t)
	h := attach(t, addr)
	a := h.admin
	// Four AERs are held open (no response); the keep-alive after them is answered first.
	for cid := uint16(1000); cid < 1000+aerLimit; cid++ {
		var sqe [SQELen]byte
		sqe[sqeOpcode], sqe[sqeFlags] = opAER, 0x40
		le.PutUint16(sqe[sqeCID:], cid)
		if _, err := a.c.Write(AppendCapsuleCmd(nil, &sqe, nil, 0)); err != nil {
			t.Fatal(err)
		}
	}
	if c := a.run(&nvme.Command{Opcode: opKeepAlive}); c.Err != nil || !c.Status.OK() {
		t.Fatalf("keep alive after held AERs: %+v", c)
	}
	if c := a.run(&nvme.Command{Opcode: opAER}); c.Status != StAERLimit {
		t.Errorf("fifth AER: %+v", c)
	}
	// Get Features Number of Queues reports what was granted.
	if c := a.run(&nvme.Command{Opcode: nvme.OpGetFeatures, CDW10: uint32(nvme.FeatNumQueues)}); c.Result != 1|1<<16 {
		t.Errorf("Get Features Number of Queues: %+v", c)
	}
	// Error log and SMART log answer.
	if c := a.run(ptr(mustLog(t, nvme.LogErrorInfo, 0, 4096))); !c.Status.OK() {
		t.Errorf("error log: %+v", c)
	}
	if c := a.run(ptr(mustLog(t, nvme.LogSMART, nvme.NSIDAll, 512))); !c.Status.OK() {
		t.Errorf("SMART log: %+v", c)
	}
	// Commands Supported and Effects: Write changes data, Read is supported, 0x7C is not.
	eff := mustLog(t, nvme.LogCommandsEffects, 0, 4096)
	if c := a.run(&eff); !c.Status.OK() || le.Uint32(eff.Data[1024+4*int(nvme.OpWrite):]) != 3 ||
		le.Uint32(eff.Data[1024+4*int(nvme.OpRead):]) != 1 || le.Uint32(eff.Data[1024+4*0x7C:]) != 0 {
		t.Errorf("effects log: %+v", c)
	}
	// Keep Alive Timer and Async Event Configuration round-trip; Abort aborts nothing.
	for _, fid := range []nvme.FeatureID{featKATO, featAsyncEventCfg} {
		a.run(&nvme.Command{Opcode: nvme.OpSetFeatures, CDW10: uint32(fid), CDW11: 12345})
		if c := a.run(&nvme.Command{Opcode: nvme.OpGetFeatures, CDW10: uint32(fid)}); c.Result != 12345 {
			t.Errorf("feature %#x: %+v", fid, c)
		}
	}
	if c := a.run(&nvme.Command{Opcode: opAbort, CDW10: 5}); !c.Status.OK() || c.Result&1 != 1 {
		t.Errorf("abort: %+v", c)
	}
	// Identify CNS 0x06 (NVM command set controller data): all zero; another CSI: invalid.
	buf := bytes.Repeat([]byte{0xFF}, 4096)
	if c := a.run(&nvme.Command{Opcode: nvme.OpIdentify, CDW10: uint32(nvme.CNSCSIController), Data: buf}); !c.Status.OK() || !bytes.Equal(buf, make([]byte, 4096)) {
		t.Errorf("Identify CNS 6: %+v", c)
	}
	if c := a.run(&nvme.Command{Opcode: nvme.OpIdentify, CDW10: uint32(nvme.CNSCSIController), CDW11: 2 << 24, Data: buf}); c.Status != StInvalidField {
		t.Errorf("Identify CNS 6 CSI 2: %+v", c)
	}
}

func mustLog(t *testing.T, lid nvme.LogID, nsid uint32, n int) nvme.Command {
	c, err := nvme.GetLogPage(nvme.LogPage{LID: lid, NSID: nsid}, make([]byte, n))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestR2TInterleaved: a command arriving while another waits for its H2CData runs; the
// waiting write completes when its data arrives.
func TestR2TInterleaved(t *testing.T) {
	_, addr, _ := startTarget(t)
	h := attach(t, addr)
	q := h.io
	out := bytes.Repeat([]byte{0xA5}, 64<<10)
	w := nvme.Write(1, 100, 16, out, nvme.RWOptions{})
	sqe := EncodeSQE(&w, 77, SGLDesc{Length: uint32(len(out)), Type: SGLTransport})
	q.c.Write(AppendCapsuleCmd(nil, &sqe, nil, 0))
	p, err := ReadPDU(q.r, 1<<20)
	if err != nil || p.Type != TypeR2T {
		t.Fatalf("want R2T: %v %v", p, err)
	}
	r2t := DecodeDataPDU(p)
	if r2t.CCCID != 77 || r2t.Length != uint32(len(out)) {
		t.Fatalf("R2T %+v", r2t)
	}
	if c := q.run(ptr(nvme.Flush(1))); !c.Status.OK() || c.Err != nil {
		t.Fatalf("flush while a write waits for data: %+v", c)
	}
	var b []byte
	b = AppendDataHeader(b, TypeH2CData, 0, DataPDU{CCCID: 77, TTag: r2t.TTag, Offset: 0, Length: 32 << 10}, 0)
	b = append(b, out[:32<<10]...)
	b = AppendDataHeader(b, TypeH2CData, FlagLast, DataPDU{CCCID: 77, TTag: r2t.TTag, Offset: 32 << 10, Length: 32 << 10}, 0)
	b = append(b, out[32<<10:]...)
	q.c.Write(b)
	p, err = ReadPDU(q.r, 1<<20)
	if err != nil || p.Type != TypeCapsuleResp {
		t.Fatalf("want CapsuleResp: %v %v", p, err)
	}
	if cqe := DecodeCQE(p.Hdr[CommonHeaderLen:]); cqe.CID != 77 || !cqe.Status.OK() || cqe.SQID != 1 {
		t.Fatalf("write completion %+v", cqe)
	}
	in := make([]byte, len(out))
	if c := q.run(ptr(nvme.Read(1, 100, 16, in))); !c.Status.OK() || !bytes.Equal(in, out) {
		t.Fatalf("read back: %+v", c)
	}
}

// TestSQFlowDisabledAndHPDA: with SQ flow control off a successful read ends with the
// SUCCESS flag and no CapsuleResp; a host asking for 16-byte data alignment gets it.
func TestSQFlowDisabledAndHPDA(t *testing.T) {
	_, addr, _ := startTarget(t)
	h := attach(t, addr)
	q := dialQueue(t, addr, 3)
	if _, st, err := q.connect(2, 31, cattrDisableSQFlow, h.cntlid, testNQN); err != nil || !st.OK() {
		t.Fatalf("connect: %v %v", st, err)
	}
	out := bytes.Repeat([]byte("fabric"), 4096/6+1)[:4096]
	if c := q.run(ptr(nvme.Write(1, 7, 1, out, nvme.RWOptions{}))); !c.Status.OK() {
		t.Fatalf("write: %+v", c)
	}
	in := make([]byte, 4096)
	if c := q.run(ptr(nvme.Read(1, 7, 1, in))); !c.Status.OK() || c.Err != nil || !q.gotSucc || !bytes.Equal(in, out) {
		t.Fatalf("read: %+v success flag %v", c, q.gotSucc)
	}
	// A failed read still gets a CapsuleResp with the status.
	if c := q.run(ptr(nvme.Read(1, 1<<40, 1, in))); c.Status.OK() || q.gotSucc {
		t.Fatalf("failed read: %+v success flag %v", c, q.gotSucc)
	}
}

// TestAdminDisconnectDropsController: closing the admin queue ends the controller and its
// I/O queues.
func TestAdminDisconnectDropsController(t *testing.T) {
	tgt, addr, _ := startTarget(t)
	h := attach(t, addr)
	if tgt.Controllers() != 1 {
		t.Fatalf("%d controllers", tgt.Controllers())
	}
	h.admin.c.Close()
	h.io.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := h.io.r.ReadByte(); err != io.EOF {
		t.Errorf("I/O queue after the admin queue closed: %v, want EOF", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for tgt.Controllers() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := tgt.Controllers(); n != 0 {
		t.Errorf("%d controllers after disconnect", n)
	}
}

// TestMalformedPDUs: protocol errors end the connection with a C2HTermReq naming the bad
// field; the target keeps serving other connections.
func TestMalformedPDUs(t *testing.T) {
	_, addr, _ := startTarget(t)
	icreq := AppendICReq(nil, ICReq{})
	capsule := func(mut func(b []byte)) []byte {
		sqe := ConnectCommand(0, 31, 0, 0)
		b := AppendCapsuleCmd(nil, &sqe, nil, 0)
		mut(b)
		return b
	}
	for _, tc := range []struct {
		name string
		send []byte
		fes  uint16
		fei  uint32
	}{
		{"capsule before ICReq", capsule(func([]byte) {}), FESSequence, hdrTypeOff},
		{"ICReq PFV 1", func() []byte { b := AppendICReq(nil, ICReq{}); b[icPFVOff] = 1; return b }(), FESUnsupportedParam, icPFVOff},
		{"unknown PDU type", append(icreq, capsule(func(b []byte) { b[0] = 0x0B })...), FESInvalidHeader, hdrTypeOff},
		{"wrong HLEN", append(icreq, capsule(func(b []byte) { b[hdrHLenOff] = 64 })...), FESInvalidHeader, hdrHLenOff},
		{"PLEN below HLEN", append(icreq, capsule(func(b []byte) { le.PutUint32(b[hdrPLenOff:], 16) })...), FESInvalidHeader, hdrPLenOff},
		{"PLEN huge", append(icreq, capsule(func(b []byte) { le.PutUint32(b[hdrPLenOff:], 1<<31) })...), FESDataLimit, hdrPLenOff},
		{"digest flag", append(icreq, capsule(func(b []byte) { b[hdrFlagsOff] = FlagHDGST })...), FESInvalidHeader, hdrFlagsOff},
		{"PDO inside header", append(icreq, func() []byte {
			sqe := ConnectCommand(0, 31, 0, 0)
			b := AppendCapsuleCmd(nil, &sqe, make([]byte, 16), 0)
			b[hdrPDOOff] = 8
			return b
		}()...), FESInvalidHeader, hdrPDOOff},
		{"H2CData without R2T", append(icreq, append(AppendDataHeader(nil, TypeH2CData, FlagLast, DataPDU{TTag: 9, Length: 4}, 0), 1, 2, 3, 4)...), FESInvalidHeader, dataTTagOff},
		{"ICResp from host", append(icreq, AppendICResp(nil, ICResp{})...), FESInvalidHeader, hdrTypeOff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			c.Write(tc.send)
			all, _ := io.ReadAll(c) // the target closes the connection
			var term *PDU
			for len(all) >= CommonHeaderLen {
				h, err := DecodeHeader(all, 1<<20)
				if err != nil || int(h.PLen) > len(all) {
					t.Fatalf("target sent a bad PDU: %v", err)
				}
				p, _ := DecodePDU(all[:h.PLen], 1<<20)
				all = all[h.PLen:]
				if p.Type == TypeC2HTermReq {
					term = p
				}
			}
			if term == nil {
				t.Fatal("no C2HTermReq before the disconnect")
			}
			if tr := DecodeTermReq(term); tr.FES != tc.fes || tr.FEI != tc.fei {
				t.Errorf("TermReq FES %d FEI %d, want %d %d", tr.FES, tr.FEI, tc.fes, tc.fei)
			}
			// The TermReq carries the offending PDU's header (its first bytes at least).
			off := offsetOfBad(tc.send)
			if len(term.Data) < CommonHeaderLen || !bytes.Equal(term.Data[:CommonHeaderLen], tc.send[off:off+CommonHeaderLen]) {
				t.Errorf("TermReq data %x does not start with the bad header", term.Data)
			}
		})
	}
	// Still serving.
	h := attach(t, addr)
	if c := h.admin.run(&nvme.Command{Opcode: opKeepAlive}); !c.Status.OK() {
		t.Fatalf("keep alive after malformed connections: %+v", c)
	}
	// NVMe-level errors do not disconnect: PRP data pointer, bad SGL type, oversize SGL.
	w := nvme.Write(1, 0, 1, make([]byte, 4096), nvme.RWOptions{})
	for _, tc := range []struct {
		name  string
		flags uint8
		sgl   SGLDesc
		data  []byte
		want  nvme.Status
	}{
		{"PRP", 0x00, SGLDesc{Length: 4096, Type: SGLInCapsule}, make([]byte, 4096), StInvalidField},
		{"keyed SGL", 0x40, SGLDesc{Length: 4096, Type: 0x40}, nil, StSGLType},
		{"in-capsule length beyond data", 0x40, SGLDesc{Length: 8192, Type: SGLInCapsule}, make([]byte, 4096), StSGLLength},
		{"in-capsule offset beyond data", 0x40, SGLDesc{Addr: 8192, Length: 16, Type: SGLInCapsule}, make([]byte, 4096), StSGLOffset},
		{"transfer above MDTS", 0x40, SGLDesc{Length: 64 << 20, Type: SGLTransport}, nil, StInvalidField},
		{"transfer unlike NLB", 0x40, SGLDesc{Length: 8192, Type: SGLTransport}, nil, StSGLLength},
	} {
		sqe := EncodeSQE(&w, 500, tc.sgl)
		sqe[sqeFlags] = tc.flags
		h.io.c.Write(AppendCapsuleCmd(nil, &sqe, tc.data, 0))
		p, err := ReadPDU(h.io.r, 1<<20)
		if err != nil || p.Type != TypeCapsuleResp {
			t.Fatalf("%s: %v %v", tc.name, p, err)
		}
		if cqe := DecodeCQE(p.Hdr[CommonHeaderLen:]); cqe.Status != tc.want || cqe.CID != 500 {
			t.Errorf("%s: %+v, want %v", tc.name, cqe, tc.want)
		}
	}
}

// TestDigests: header and data digests (CRC32C) as the host asks for them — each one alone
// and both — over in-capsule writes, R2T writes, multi-PDU reads and admin data; a corrupt
// header digest ends the connection (FES header digest), a corrupt data digest fails the
// command with a transient transport error and the connection goes on.
func TestDigests(t *testing.T) {
	_, addr, _ := startTarget(t)
	for _, digest := range []uint8{digestHeader, digestData, digestHeader | digestData} {
		h := attachDigests(t, addr, digest)
		for i, n := range []int{4096, 64 << 10, 256 << 10} {
			out := bytes.Repeat([]byte{byte(digest), byte(i), 0x5A, 0xC3}, n/4)
			if c := h.io.run(ptr(nvme.Write(1, uint64(i)*64, uint32(n/4096), out, nvme.RWOptions{}))); !c.Status.OK() || c.Err != nil {
				t.Fatalf("digest %d: write %d: %+v", digest, n, c)
			}
			in := make([]byte, n)
			if c := h.io.run(ptr(nvme.Read(1, uint64(i)*64, uint32(n/4096), in))); !c.Status.OK() || c.Err != nil || !bytes.Equal(in, out) {
				t.Fatalf("digest %d: read %d: %+v", digest, n, c)
			}
		}
		if _, err := fdp.Discover(h); err != nil {
			t.Fatalf("digest %d: FDP discovery: %v", digest, err)
		}
	}
	// A corrupt data digest on in-capsule data: Transient Transport Error, connection kept.
	h := attachDigests(t, addr, digestHeader|digestData)
	w := nvme.Write(1, 0, 1, make([]byte, 4096), nvme.RWOptions{})
	sqe := EncodeSQE(&w, 900, SGLDesc{Length: 4096, Type: SGLInCapsule})
	data := make([]byte, 4096)
	head, tail := Frame(AppendCapsuleCmd(nil, &sqe, nil, 0), data, h.io.dg, 0)
	tail[0] ^= 1
	h.io.c.Write(append(append(head, data...), tail...))
	p, err := ReadPDUDigests(h.io.r, 1<<20, h.io.dg)
	if err != nil || p.Type != TypeCapsuleResp {
		t.Fatalf("after a bad data digest: %v %v", p, err)
	}
	if cqe := DecodeCQE(p.Hdr[CommonHeaderLen:]); cqe.CID != 900 || cqe.Status != StTransientTransport {
		t.Errorf("bad data digest: %+v, want transient transport error", cqe)
	}
	if c := h.io.run(ptr(nvme.Flush(1))); !c.Status.OK() || c.Err != nil {
		t.Fatalf("flush after a bad data digest: %+v", c)
	}
	// A corrupt header digest: C2HTermReq with FES header digest, FEI = HLEN.
	head, _ = Frame(AppendCapsuleCmd(nil, &sqe, nil, 0), nil, Digests{Header: true}, 0)
	head[CapsuleCmdHLen] ^= 1
	h.io.c.Write(head)
	p, err = ReadPDUDigests(h.io.r, 1<<20, h.io.dg)
	if err != nil || p.Type != TypeC2HTermReq {
		t.Fatalf("after a bad header digest: %v %v", p, err)
	}
	if tr := DecodeTermReq(p); tr.FES != FESHeaderDigest || tr.FEI != CapsuleCmdHLen {
		t.Errorf("bad header digest: TermReq %+v", tr)
	}
	// Digest flags on a connection that did not negotiate them are refused.
	if _, err := DecodePDU(head, 1<<20); !errors.Is(err, ErrDigest) {
		t.Errorf("digest flag without digests: %v", err)
	}
}

// BenchmarkFabricRead4K: one 4 KiB read at a time over loopback NVMe/TCP, against the same
// read in-process (compare ns/op of the two sub-benchmarks).
func BenchmarkFabricRead4K(b *testing.B) {
	_, addr, ctrl := startTarget(b)
	h := attach(b, addr)
	buf := make([]byte, 4096)
	b.Run("fabric", func(b *testing.B) {
		b.SetBytes(4096)
		for i := range b.N {
			if c := h.io.run(ptr(nvme.Read(1, uint64(i%1024), 1, buf))); !c.Status.OK() || c.Err != nil {
				b.Fatal(c)
			}
		}
	})
	b.Run("in-process", func(b *testing.B) {
		b.SetBytes(4096)
		var done [1]nvme.Completion
		for i := range b.N {
			ctrl.IO([]nvme.Command{nvme.Read(1, uint64(i%1024), 1, buf)}, done[:])
			if !done[0].Status.OK() {
				b.Fatal(done[0])
			}
		}
	})
}

func TestCheckListen(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		remote bool
		ok     bool
	}{
		{"127.0.0.1:4420", false, true},
		{"[::1]:4420", false, true},
		{"localhost:4420", false, true},
		{"0.0.0.0:4420", false, false},
		{":4420", false, false},
		{"[::]:4420", false, false},
		{"192.0.2.1:4420", false, false},
		{"0.0.0.0:4420", true, true},
		{"127.0.0.1", false, false}, // no port
	} {
		if err := CheckListen(tc.addr, tc.remote); (err == nil) != tc.ok {
			t.Errorf("CheckListen(%q, %v) = %v, want ok=%v", tc.addr, tc.remote, err, tc.ok)
		}
	}
	if err := CheckListen("0.0.0.0:1", false); !errors.Is(err, ErrNotLoopback) {
		t.Errorf("wildcard: %v, want ErrNotLoopback", err)
	}
}

// offsetOfBad is where the PDU after the ICReq starts in a test's bytes (0 when the first PDU
// is the bad one).
func offsetOfBad(b []byte) int {
	if len(b) > ICLen && b[0] == byte(TypeICReq) {
		return ICLen
	}
	return 0
}
