package nvme

import (
	"encoding/binary"
	"sync"
)

// fakeCtrl is a minimal in-memory NVMe controller for unit tests: it answers Identify,
// Get Log Page (a synthetic log whose byte i is byte(i*7)), Read/Write/Flush/DSM on one
// namespace, and records every command. It decodes with the package's own parsers.
type fakeCtrl struct {
	mu      sync.Mutex
	ctrl    ControllerData
	ns      NamespaceData
	nsid    uint32
	data    []byte
	admin   []Command
	io      []Command
	dsm     [][]DSMRange
	logSize int
	failIO  map[int]Status // by I/O command sequence number
	nIO     int
}

func newFakeCtrl(blocks uint64, lbads uint8, ms uint16) *fakeCtrl {
	f := &fakeCtrl{nsid: 1, logSize: 1 << 20}
	f.ctrl = ControllerData{
		VID: 0x1b36, SSVID: 0x1af4, SerialNumber: "deadbeef", ModelNumber: "QEMU NVMe Ctrl",
		Firmware: "7.2.0", MDTS: 2, CNTLID: 0, VER: 0x10400, CTRATT: 0x8000, ONCS: 0x15d,
		SQES: 0x66, CQES: 0x44, NN: 256, VWC: 7, SubNQN: "nqn.2019-08.org.qemu:deadbeef",
	}
	f.ns = NamespaceData{NSZE: blocks, NCAP: blocks, NUSE: blocks, NLBAF: 1, FLBAS: 1}
	f.ns.LBAF[0] = LBAFormat{LBADS: 9}
	f.ns.LBAF[1] = LBAFormat{LBADS: lbads, MS: ms}
	f.data = make([]byte, blocks<<lbads)
	return f
}

func (f *fakeCtrl) NSID() uint32 { return f.nsid }
func (f *fakeCtrl) Close() error { return nil }

func (f *fakeCtrl) Admin(c *Command) Completion {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.admin = append(f.admin, *c)
	switch c.Opcode {
	case OpIdentify:
		for i := range c.Data {
			c.Data[i] = 0
		}
		switch uint8(c.CDW10) {
		case CNSController:
			f.ctrl.Encode(c.Data)
		case CNSNamespace:
			if c.NSID != f.nsid {
				return Completion{Status: StatusInvalidNamespace}
			}
			f.ns.Encode(c.Data)
		case CNSIndependentNamespace:
			(&IndependentNamespaceData{EndGID: 3}).Encode(c.Data)
		case CNSActiveNamespaces:
			if c.NSID < f.nsid {
				EncodeNamespaceList(c.Data, []uint32{f.nsid})
			}
		default:
			return Completion{Status: StatusInvalidField}
		}
		return Completion{}
	case OpGetLogPage:
		p, n := ParseGetLogPage(c)
		if p.LID != 0x7f {
			return Completion{Status: StatusInvalidField}
		}
		if n != len(c.Data) || p.Offset+uint64(n) > uint64(f.logSize) {
			return Completion{Status: StatusInvalidField}
		}
		for i := range c.Data {
			c.Data[i] = byte((int(p.Offset) + i) * 7)
		}
		return Completion{}
	case OpGetFeatures:
		return Completion{Result: uint64(c.CDW11) + 1}
	}
	return Completion{Status: StatusInvalidOpcode}
}

func (f *fakeCtrl) IO(cmds []Command, done []Completion) {
	for i := range cmds {
		done[i] = f.one(&cmds[i])
	}
}

func (f *fakeCtrl) one(c *Command) Completion {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.io = append(f.io, *c)
	seq := f.nIO
	f.nIO++
	if s, ok := f.failIO[seq]; ok {
		return Completion{Status: s}
	}
	if c.NSID != f.nsid {
		return Completion{Status: StatusInvalidNamespace}
	}
	bs := uint64(1) << f.ns.LBAF[1].LBADS
	switch c.Opcode {
	case OpRead, OpWrite:
		rw := ParseRW(c)
		if (rw.SLBA+uint64(rw.NLB))*bs > uint64(len(f.data)) {
			return Completion{Status: StatusLBAOutOfRange}
		}
		if uint64(len(c.Data)) != uint64(rw.NLB)*bs {
			return Completion{Status: StatusInvalidField}
		}
		region := f.data[rw.SLBA*bs : (rw.SLBA+uint64(rw.NLB))*bs]
		if c.Opcode == OpRead {
			copy(c.Data, region)
		} else {
			copy(region, c.Data)
		}
		return Completion{}
	case OpFlush:
		return Completion{}
	case OpDatasetManagement:
		rs, err := DecodeDSMRanges(c.Data, int(c.CDW10&0xff)+1)
		if err != nil || c.CDW11 != DSMDeallocate {
			return Completion{Status: StatusInvalidField}
		}
		for _, r := range rs {
			if (r.SLBA+uint64(r.NLB))*bs > uint64(len(f.data)) {
				return Completion{Status: StatusLBAOutOfRange}
			}
			clear(f.data[r.SLBA*bs : (r.SLBA+uint64(r.NLB))*bs])
		}
		f.dsm = append(f.dsm, rs)
		return Completion{}
	}
	return Completion{Status: StatusInvalidOpcode}
}

func le32(b []byte, off int) uint32 { return binary.LittleEndian.Uint32(b[off:]) }
