package nvmetcp

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/rbctl/rbctl/nvme"
)

// testHost is a minimal NVMe/TCP initiator for tests: one connection per queue, one command
// at a time, in-capsule data for small writes and R2T/H2CData for large ones, as the Linux
// host does. It implements nvme.Transport over an admin queue and one I/O queue.
type testHost struct {
	admin, io *hostQueue
	cntlid    uint16
}

type hostQueue struct {
	mu        sync.Mutex
	c         net.Conn
	r         *bufio.Reader
	cid       uint16
	qid       uint16
	inline    int    // in-capsule data limit
	h2c       int    // H2CData PDU size the host uses (splits R2T transfers)
	maxH2C    uint32 // from ICResp
	hpda      uint8
	dg        Digests
	lastCQE   CQE
	lastRecvd int  // data bytes the last command returned
	gotSucc   bool // the last read completed through a C2HData SUCCESS flag
}

const (
	testHostNQN = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-000000000001"
	testNQN     = "nqn.2026-11.io.rbctl:test"
)

var testHostID = [16]byte{1, 2, 3}

func dialQueue(t testing.TB, addr string, hpda uint8) *hostQueue {
	t.Helper()
	return dialQueueDigests(t, addr, hpda, 0)
}

// dialQueueDigests connects a queue asking for the digests in digest (ICReq bits).
func dialQueueDigests(t testing.TB, addr string, hpda, digest uint8) *hostQueue {
	t.Helper()
	q, err := dialQueueE(addr, hpda, digest)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.c.Close() })
	return q
}

// dialQueueE connects a queue and exchanges ICReq/ICResp (connection deadline 20 s).
func dialQueueE(addr string, hpda, digest uint8) (*hostQueue, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	q := &hostQueue{c: c, r: bufio.NewReader(c), inline: adminInlineData, h2c: 16 << 10, hpda: hpda,
		dg: Digests{Header: digest&digestHeader != 0, Data: digest&digestData != 0}}
	fail := func(err error) (*hostQueue, error) {
		c.Close()
		return nil, err
	}
	if _, err := c.Write(AppendICReq(nil, ICReq{HPDA: hpda, Digest: digest})); err != nil {
		return fail(err)
	}
	p, err := ReadPDU(q.r, ICLen)
	if err != nil {
		return fail(err)
	}
	ic, err := DecodeICResp(p)
	if err != nil || ic.PFV != 0 || ic.Digest != digest || ic.MaxH2CData < 4096 {
		return fail(fmt.Errorf("ICResp %+v %v", ic, err))
	}
	q.maxH2C = ic.MaxH2CData
	return q, nil
}

// connect sends a Fabrics Connect and returns DW0 (the controller ID) and the status.
func (q *hostQueue) connect(qid, sqsize uint16, cattr uint8, cntlid uint16, subnqn string) (uint16, nvme.Status, error) {
	sqe := ConnectCommand(qid, sqsize, cattr, 15000)
	data := ConnectData{HostID: testHostID, CNTLID: cntlid, SubNQN: subnqn, HostNQN: testHostNQN}.Encode()
	cqe, err := q.submitRaw(sqe, data, nil)
	if err != nil {
		return 0, 0, err
	}
	q.qid = qid
	return uint16(cqe.Result), cqe.Status, nil
}

func (q *hostQueue) property(set bool, off uint32, size8 bool, v uint64) (uint64, nvme.Status, error) {
	cqe, err := q.submitRaw(PropertyCommand(set, off, size8, v), nil, nil)
	return cqe.Result, cqe.Status, err
}

// submitRaw sends one command with its data out (H2C) or buffer in (C2H) and waits for
// the completion. The SQE's CID and SGL are filled in here.
func (q *hostQueue) submitRaw(sqe [SQELen]byte, out, in []byte) (CQE, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.cid++
	cid := q.cid
	le.PutUint16(sqe[sqeCID:], cid)
	var sgl SGLDesc
	var capsule []byte
	switch {
	case len(out) > 0 && len(out) <= q.inline:
		sgl, capsule = SGLDesc{Length: uint32(len(out)), Type: SGLInCapsule}, out
	case len(out) > 0:
		sgl = SGLDesc{Length: uint32(len(out)), Type: SGLTransport}
	case len(in) > 0:
		sgl = SGLDesc{Length: uint32(len(in)), Type: SGLTransport}
	default:
		sgl = SGLDesc{Type: SGLTransport}
	}
	putSGL(sqe[sqeDPTR:], sgl)
	head, tail := Frame(AppendCapsuleCmd(nil, &sqe, nil, 0), capsule, q.dg, 0)
	if _, err := q.c.Write(append(append(head, capsule...), tail...)); err != nil {
		return CQE{}, err
	}
	q.gotSucc = false
	sent := len(capsule) == len(out)
	recvd := 0
	for {
		p, err := ReadPDUDigests(q.r, 1<<24, q.dg)
		if err != nil {
			return CQE{}, err
		}
		if p.DataDigestBad {
			return CQE{}, errors.New("data digest mismatch from the target")
		}
		switch p.Type {
		case TypeR2T:
			d := DecodeDataPDU(p)
			if sent || d.CCCID != cid || d.Offset != 0 || int(d.Length) != len(out) {
				return CQE{}, fmt.Errorf("unexpected R2T %+v", d)
			}
			var b []byte
			for off := 0; off < len(out); off += q.h2c {
				n := min(q.h2c, len(out)-off)
				var fl uint8
				if off+n == len(out) {
					fl = FlagLast
				}
				head, tail := Frame(AppendDataHeader(nil, TypeH2CData, fl, DataPDU{CCCID: cid, TTag: d.TTag, Offset: uint32(off), Length: uint32(n)}, 0), out[off:off+n], q.dg, 0)
				b = append(append(append(b, head...), out[off:off+n]...), tail...)
			}
			if _, err := q.c.Write(b); err != nil {
				return CQE{}, err
			}
			sent = true
		case TypeC2HData:
			d := DecodeDataPDU(p)
			if d.CCCID != cid || int(d.Offset) != recvd || int(d.Offset)+len(p.Data) > len(in) {
				return CQE{}, fmt.Errorf("unexpected C2HData %+v (have %d of %d)", d, recvd, len(in))
			}
			hl := DataHLen
			if q.dg.Header {
				hl += digestLen
			}
			if want := alignUp(hl, (int(q.hpda)+1)*4); int(p.PDO) != want {
				return CQE{}, fmt.Errorf("C2HData PDO %d, want %d for HPDA %d", p.PDO, want, q.hpda)
			}
			copy(in[d.Offset:], p.Data)
			recvd += len(p.Data)
			if p.Flags&FlagSuccess != 0 {
				if p.Flags&FlagLast == 0 {
					return CQE{}, errors.New("SUCCESS without LAST_PDU")
				}
				q.gotSucc, q.lastRecvd = true, recvd
				return CQE{CID: cid}, nil
			}
		case TypeCapsuleResp:
			cqe := DecodeCQE(p.Hdr[CommonHeaderLen:])
			if cqe.CID != cid {
				return cqe, fmt.Errorf("completion for CID %d, want %d", cqe.CID, cid)
			}
			// A command may return less than the host's buffer holds (a log shorter than
			// asked for, a 4096-byte Identify into a larger buffer), never more.
			q.lastCQE, q.lastRecvd = cqe, recvd
			return cqe, nil
		case TypeC2HTermReq:
			tr := DecodeTermReq(p)
			return CQE{}, fmt.Errorf("target terminated: FES 0x%x FEI %d", tr.FES, tr.FEI)
		default:
			return CQE{}, fmt.Errorf("unexpected %v", p.Type)
		}
	}
}

// run sends an nvme.Command the way the kernel turns a passthrough command into a capsule.
func (q *hostQueue) run(cmd *nvme.Command) nvme.Completion {
	sqe := EncodeSQE(cmd, 0, SGLDesc{})
	var out, in []byte
	switch cmd.DataDirection() {
	case nvme.DirHostToCtrl:
		out = cmd.Data
	case nvme.DirCtrlToHost:
		in = cmd.Data
	}
	cqe, err := q.submitRaw(sqe, out, in)
	if err != nil {
		return nvme.Completion{Err: err}
	}
	return nvme.Completion{Status: cqe.Status, Result: cqe.Result}
}

// attach connects an admin queue, enables the controller, asks for ioq I/O queues and
// connects I/O queue 1.
func attach(t testing.TB, addr string) *testHost {
	t.Helper()
	return attachDigests(t, addr, 0)
}

// attachDigests is attach with the digests in digest (ICReq bits) on both queues.
func attachDigests(t testing.TB, addr string, digest uint8) *testHost {
	t.Helper()
	h, err := attachE(addr, digest)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// attachE attaches a host (admin queue, controller enabled, I/O queue 1 of 2 granted) and
// returns an error instead of failing the test, for use from other goroutines.
func attachE(addr string, digest uint8) (*testHost, error) {
	a, err := dialQueueE(addr, 0, digest)
	if err != nil {
		return nil, err
	}
	fail := func(format string, v ...any) (*testHost, error) {
		a.c.Close()
		return nil, fmt.Errorf(format, v...)
	}
	id, st, err := a.connect(0, 31, 0, DynamicController, testNQN)
	if err != nil || !st.OK() {
		return fail("admin Connect: %v %v", st, err)
	}
	if _, st, err := a.property(true, PropCC, false, ccEN|6<<16|4<<20); err != nil || !st.OK() {
		return fail("Property Set CC: %v %v", st, err)
	}
	if v, st, err := a.property(false, PropCSTS, false, 0); err != nil || !st.OK() || v&cstsRDY == 0 {
		return fail("CSTS %#x: %v %v", v, st, err)
	}
	c := a.run(&nvme.Command{Opcode: nvme.OpSetFeatures, CDW10: uint32(nvme.FeatNumQueues), CDW11: 1 | 1<<16})
	if c.Err != nil || !c.Status.OK() || c.Result != 1|1<<16 {
		return fail("Set Features Number of Queues: %+v", c)
	}
	io, err := dialQueueE(addr, 0, digest)
	if err != nil {
		return fail("I/O queue: %v", err)
	}
	io.inline = DefaultInlineData
	if _, st, err := io.connect(1, 127, 0, id, testNQN); err != nil || !st.OK() {
		io.c.Close()
		return fail("I/O Connect: %v %v", st, err)
	}
	return &testHost{admin: a, io: io, cntlid: id}, nil
}

func (h *testHost) Admin(cmd *nvme.Command) nvme.Completion { return h.admin.run(cmd) }
func (h *testHost) IO(cmds []nvme.Command, done []nvme.Completion) {
	for i := range cmds {
		done[i] = h.io.run(&cmds[i])
	}
}
func (h *testHost) NSID() uint32 { return 1 }
func (h *testHost) Close() error {
	h.io.c.Close()
	return h.admin.c.Close()
}

var _ nvme.Transport = (*testHost)(nil)
