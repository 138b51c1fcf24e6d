package nvmetcp

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/nvme"
)

// Golden bytes for the PDUs the target sends, laid out by hand from the NVMe/TCP 1.0
// figures (common header: type, flags, HLEN, PDO, PLEN LE).
func TestPDUGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"ICResp", AppendICResp(nil, ICResp{MaxH2CData: 0x100000}),
			"01008000" + "80000000" + "0000" + "00" + "00" + "00001000" + zeros(128-16)},
		{"CapsuleResp", AppendCapsuleResp(nil, CQE{Result: 0x1122334455667788, SQHD: 3, SQID: 1, CID: 0xBEEF, Status: StInvalidField}),
			"05001800" + "18000000" + "88776655" + "44332211" + "0300" + "0100" + "efbe" + "0480"},
		{"R2T", AppendR2T(nil, DataPDU{CCCID: 7, TTag: 2, Offset: 0, Length: 0x10000}),
			"09001800" + "18000000" + "0700" + "0200" + "00000000" + "00000100" + "00000000"},
		{"C2HData HPDA 3", AppendDataHeader(nil, TypeC2HData, FlagLast|FlagSuccess, DataPDU{CCCID: 1, Offset: 0x2000, Length: 16}, 3),
			"070c1820" + "30000000" + "0100" + "0000" + "00200000" + "10000000" + "00000000" + zeros(8)},
		{"C2HTermReq", AppendTermReq(nil, TypeC2HTermReq, TermReq{FES: FESInvalidHeader, FEI: 2}, []byte{0xAA}),
			"03001800" + "19000000" + "0100" + "02000000" + zeros(10) + "aa"},
	} {
		if g := hex.EncodeToString(tc.got); g != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, g, tc.want)
		}
	}
	// Digests are standard CRC-32C (check value of "123456789"), little-endian on the wire.
	if got := crc32c([]byte("123456789")); got != 0xE3069283 {
		t.Errorf("CRC32C check value %#08x", got)
	}
	head, tail := Frame(AppendR2T(nil, DataPDU{CCCID: 7, TTag: 2, Length: 0x10000}), nil, Digests{Header: true, Data: true}, 0)
	if hex.EncodeToString(head[:8]) != "09011800"+"1c000000" || len(head) != 28 || tail != nil || le.Uint32(head[24:]) != crc32c(head[:24]) {
		t.Errorf("R2T with header digest: %x %x", head, tail)
	}
	head, tail = Frame(AppendDataHeader(nil, TypeC2HData, FlagLast, DataPDU{CCCID: 1, Length: 4}, 0), []byte{1, 2, 3, 4}, Digests{Header: true, Data: true}, 1)
	// HLEN 24 + 4 digest = 28, aligned to 8 → PDO 32; PLEN 32 + 4 data + 4 digest = 40.
	if hex.EncodeToString(head[:8]) != "07071820"+"28000000" || len(head) != 32 || le.Uint32(tail) != crc32c([]byte{1, 2, 3, 4}) {
		t.Errorf("C2HData with digests: %x %x", head, tail)
	}
	p, err := DecodePDUDigests(append(append(head, 1, 2, 3, 4), tail...), 1<<20, Digests{Header: true, Data: true})
	if err != nil || !bytes.Equal(p.Data, []byte{1, 2, 3, 4}) || p.DataDigestBad {
		t.Errorf("C2HData with digests decodes to %+v %v", p, err)
	}
	// CapsuleCmd: HLEN 72, in-capsule data at PDO 72 (CPDA 0) or 80 (CPDA 3 → 16-byte).
	sqe := ConnectCommand(0, 31, 0, 15000)
	for _, tc := range []struct {
		cpda uint8
		pdo  int
	}{{0, 72}, {3, 80}} {
		b := AppendCapsuleCmd(nil, &sqe, []byte{1, 2, 3, 4}, tc.cpda)
		p, err := DecodePDU(b, 1<<20)
		if err != nil || int(p.PDO) != tc.pdo || !bytes.Equal(p.Data, []byte{1, 2, 3, 4}) || p.PLen != uint32(tc.pdo+4) {
			t.Errorf("CPDA %d: %+v %v", tc.cpda, p, err)
		}
	}
	// The SQE and CQE round-trip through the nvme.Command model.
	w := nvme.Write(1, 0x123456789, 8, make([]byte, 32768), nvme.RWOptions{DType: 2, DSpec: 5})
	s := DecodeSQE(func() []byte { b := EncodeSQE(&w, 9, SGLDesc{Length: 32768, Type: SGLTransport}); return b[:] }())
	if got := s.Command(nil); got.CDW10 != w.CDW10 || got.CDW11 != w.CDW11 || got.CDW12 != w.CDW12 || got.CDW13 != w.CDW13 || s.CID != 9 || s.SGL.Type != SGLTransport || s.Flags != 0x40 {
		t.Errorf("SQE round trip: %+v", s)
	}
	var cb [CQELen]byte
	cq := CQE{Result: 5, SQHD: 1, SQID: 2, CID: 3, Status: StConnectInvalidParam}
	cq.Put(cb[:])
	if DecodeCQE(cb[:]) != cq {
		t.Errorf("CQE round trip: %+v", DecodeCQE(cb[:]))
	}
	cd := ConnectData{HostID: testHostID, CNTLID: 0xFFFF, SubNQN: testNQN, HostNQN: testHostNQN}
	if got, err := DecodeConnectData(cd.Encode()); err != nil || got != cd {
		t.Errorf("Connect data round trip: %+v %v", got, err)
	}
	if _, err := DecodeConnectData(make([]byte, 100)); !errors.Is(err, nvme.ErrShortData) {
		t.Errorf("short Connect data: %v", err)
	}
}

func zeros(n int) string { return hex.EncodeToString(make([]byte, n)) }

// FuzzDecodePDU: any bytes decode to an error or to a PDU whose parts lie inside the input.
func FuzzDecodePDU(f *testing.F) {
	sqe := ConnectCommand(0, 31, 0, 15000)
	f.Add(AppendICReq(nil, ICReq{}))
	f.Add(AppendCapsuleCmd(nil, &sqe, make([]byte, 64), 0))
	f.Add(append(AppendDataHeader(nil, TypeH2CData, FlagLast, DataPDU{Length: 4}, 1), 1, 2, 3, 4))
	f.Add(AppendTermReq(nil, TypeH2CTermReq, TermReq{FES: 1}, []byte{1, 2}))
	f.Add(AppendR2T(nil, DataPDU{Length: 9}))
	h, tl := Frame(AppendCapsuleCmd(nil, &sqe, nil, 0), make([]byte, 16), Digests{Header: true, Data: true}, 0)
	f.Add(append(append(h, make([]byte, 16)...), tl...))
	f.Fuzz(func(t *testing.T, b []byte) {
		// With digests enabled: no panic, parts inside the input.
		if p, err := DecodePDUDigests(b, 1<<16, Digests{Header: true, Data: true}); err == nil && len(p.Hdr)+len(p.Data) > len(b) {
			t.Fatalf("PDU with digests %+v from %d bytes", p.Header, len(b))
		}
		p, err := DecodePDU(b, 1<<16)
		if err != nil {
			var he *HeaderError
			if !errors.As(err, &he) {
				t.Fatalf("error without a TermReq field: %v", err)
			}
			return
		}
		if int(p.PLen) != len(b) || len(p.Hdr) != int(p.HLen) || len(p.Hdr)+len(p.Data) > len(b) {
			t.Fatalf("PDU %+v from %d bytes", p.Header, len(b))
		}
		switch p.Type {
		case TypeCapsuleCmd:
			DecodeSQE(p.Hdr[CommonHeaderLen:])
		case TypeCapsuleResp:
			DecodeCQE(p.Hdr[CommonHeaderLen:])
		case TypeH2CData, TypeC2HData:
			if d := DecodeDataPDU(p); int(d.Length) != len(p.Data) {
				t.Fatalf("DATAL %d with %d bytes", d.Length, len(p.Data))
			}
		case TypeICReq:
			DecodeICReq(p)
		}
		// ReadPDU on a stream agrees with DecodePDU on the slice.
		q, err := ReadPDU(bytes.NewReader(b), 1<<16)
		if err != nil || !bytes.Equal(q.Hdr, p.Hdr) || !bytes.Equal(q.Data, p.Data) {
			t.Fatalf("ReadPDU differs: %v", err)
		}
	})
}

var (
	fuzzOnce sync.Once
	fuzzTgt  *Target
)

// FuzzTargetConn feeds arbitrary bytes to a live target connection after a valid ICReq
// and admin Connect: it must answer or disconnect, never panic or hang, and hold no write
// budget or buffer once the connection is gone.
func FuzzTargetConn(f *testing.F) {
	fuzzOnce.Do(func() {
		ctrl, err := emu.Open("emu:mem?size=16M&ru=1M&ruhs=2")
		if err != nil {
			f.Fatal(err)
		}
		fuzzTgt, err = New(Config{NQN: testNQN, Backend: ctrl})
		if err != nil {
			f.Fatal(err)
		}
	})
	conn := ConnectCommand(0, 31, 0, 15000)
	le.PutUint16(conn[sqeCID:], 1)
	putSGL(conn[sqeDPTR:], SGLDesc{Length: ConnectDataLen, Type: SGLInCapsule})
	cd := ConnectData{HostID: testHostID, CNTLID: DynamicController, SubNQN: testNQN, HostNQN: testHostNQN}.Encode()
	// The first fuzz byte's two low bits choose the digests the connection negotiates.
	prefixes := make([][]byte, 4)
	for d := range prefixes {
		dg := Digests{Header: d&1 != 0, Data: d&2 != 0}
		head, tail := Frame(AppendCapsuleCmd(nil, &conn, nil, 0), cd, dg, 0)
		prefixes[d] = append(append(append(AppendICReq(nil, ICReq{Digest: uint8(d)}), head...), cd...), tail...)
	}
	en := PropertyCommand(true, PropCC, false, ccEN)
	id := nvme.IdentifyController(nil)
	idSQE := EncodeSQE(&id, 3, SGLDesc{Length: 4096, Type: SGLTransport})
	w := nvme.Write(1, 0, 1, nil, nvme.RWOptions{})
	wSQE := EncodeSQE(&w, 4, SGLDesc{Length: 4096, Type: SGLTransport})
	f.Add(append(AppendCapsuleCmd(nil, &en, nil, 0), AppendCapsuleCmd(nil, &idSQE, nil, 0)...))
	f.Add(append(AppendCapsuleCmd(nil, &wSQE, nil, 0), append(AppendDataHeader(nil, TypeH2CData, FlagLast, DataPDU{CCCID: 4, Length: 8}, 0), make([]byte, 8)...)...))
	f.Add([]byte{4, 0, 72, 0, 255, 255, 255, 255})
	f.Fuzz(func(t *testing.T, b []byte) {
		c1, c2 := net.Pipe()
		fuzzTgt.ServeConn(c2)
		done := make(chan struct{})
		go func() {
			io.Copy(io.Discard, c1)
			close(done)
		}()
		c1.SetWriteDeadline(time.Now().Add(2 * time.Second))
		d := 0
		if len(b) > 0 {
			d = int(b[0] & 3)
		}
		c1.Write(prefixes[d])
		c1.Write(b)
		c1.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("target connection hung")
		}
		// Whatever the bytes did, once the connection is gone its budget and buffers are back.
		eventually(t, "connection gone", func() bool { return fuzzTgt.Stats().Connections == 0 })
		if s := fuzzTgt.Stats(); s.WriteBuffered != 0 || s.WriteAllocated != 0 || s.R2TWaiting != 0 {
			t.Fatalf("after the connection: %+v", s)
		}
	})
}
