package nvme

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
	"unsafe"
)

// TestBuildersGolden checks every builder's dwords against the encodings in
// nvme-fdp-reference.md §2.2 (libnvme, fio and nvme-cli agree on them).
func TestBuildersGolden(t *testing.T) {
	b4k := make([]byte, 4096)
	b16 := make([]byte, 16)
	b1m := make([]byte, 1<<20)
	dsmBuf := make([]byte, 4096)
	must := func(c Command, err error) Command {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	type dw struct{ op, nsid, c10, c11, c12, c13, c14 uint32 }
	cases := []struct {
		name string
		cmd  Command
		want dw
		dlen int
	}{
		{"identify ctrl CNS1", IdentifyController(b4k), dw{0x06, 0, 0x01, 0, 0, 0, 0}, 4096},
		{"identify ns CNS0", IdentifyNamespace(1, b4k), dw{0x06, 1, 0x00, 0, 0, 0, 0}, 4096},
		{"identify indep ns CNS8", IdentifyIndependentNamespace(1, b4k), dw{0x06, 1, 0x08, 0, 0, 0, 0}, 4096},
		{"identify active list CNS2", IdentifyActiveNamespaces(0, b4k), dw{0x06, 0, 0x02, 0, 0, 0, 0}, 4096},
		{"identify ns descs CNS3", IdentifyNSDescriptors(2, b4k), dw{0x06, 2, 0x03, 0, 0, 0, 0}, 4096},
		{"identify CSI ns cntid", Identify(CNSCSINamespace, 1, 0x12, 2, b4k), dw{0x06, 1, 0x00120005, 0x02000000, 0, 0, 0}, 4096},
		// FDP configs: LID 0x20, LSI = endgid 1, 4096 bytes -> NUMD 1023.
		{"get log fdp configs", must(GetLogPage(LogPage{LID: 0x20, LSI: 1}, b4k)), dw{0x02, 0, 0x03FF0020, 0x00010000, 0, 0, 0}, 4096},
		// FDP events, host (LSP 1), RAE.
		{"get log fdp events host", must(GetLogPage(LogPage{LID: 0x23, LSP: 1, LSI: 1, RAE: true}, b4k)), dw{0x02, 0, 0x03FF8123, 0x00010000, 0, 0, 0}, 4096},
		// 1 MiB at offset 0x1_0000_2000: NUMD 0x3FFFF split NUMDL 0xFFFF / NUMDU 3.
		{"get log numdu offset", must(GetLogPage(LogPage{LID: 0x02, NSID: NSIDAll, Offset: 0x100002000, UUIDX: 3, CSI: 0}, b1m)), dw{0x02, 0xFFFFFFFF, 0xFFFF0002, 0x00000003, 0x2000, 1, 3}, 1 << 20},
		{"get log OT CSI", must(GetLogPage(LogPage{LID: 0x0D, OT: true, CSI: 2}, b16)), dw{0x02, 0, 0x0003000D, 0, 0, 0, 0x02800000}, 16},
		{"get features fdp", GetFeatures(FeatFDP, SelCurrent, 0, 1, nil), dw{0x0A, 0, 0x1D, 1, 0, 0, 0}, 0},
		{"get features supported", GetFeatures(FeatFDP, SelSupported, 0, 1, nil), dw{0x0A, 0, 0x31D, 1, 0, 0, 0}, 0},
		{"set features fdp save", SetFeatures(FeatFDP, true, NSIDAll, 1, 0x0101, nil), dw{0x09, 0xFFFFFFFF, 0x8000001D, 1, 0x0101, 0, 0}, 0},
		{"set features events", SetFeatures(FeatFDPEvents, false, 1, 0x00020000, 1, b16), dw{0x09, 1, 0x1E, 0x00020000, 1, 0, 0}, 16},
		// fio: cdw12 = nlb-1 | dtype<<20 | flags(FUA 1<<30), cdw13 = dspec<<16.
		{"write fdp fua", Write(1, 0x100000010, 8, b4k, RWOptions{FUA: true, DType: 2, DSpec: 5}), dw{0x01, 1, 0x10, 1, 0x40200007, 0x00050000, 0}, 4096},
		{"write plain", Write(1, 7, 1, b4k[:512], RWOptions{}), dw{0x01, 1, 7, 0, 0, 0, 0}, 512},
		{"read max nlb", Read(1, 0, MaxNLB, b1m), dw{0x02, 1, 0, 0, 0xFFFF, 0, 0}, 1 << 20},
		{"flush", Flush(1), dw{0x00, 1, 0, 0, 0, 0, 0}, 0},
		{"dsm deallocate 2 ranges", must(Deallocate(1, []DSMRange{{NLB: 8, SLBA: 0x10}, {Attrs: 1, NLB: 1, SLBA: 0x200000000}}, dsmBuf)), dw{0x09, 1, 1, 4, 0, 0, 0}, 32},
		// RUH status: MO 1, NUMD = 16/4-1 = 3 in CDW11.
		{"io mgmt recv", must(IOMgmtRecv(1, IOMgmtRecvRUHStatus, 0, b16)), dw{0x12, 1, 1, 3, 0, 0, 0}, 16},
		// RUH update of 3 PIDs: CDW10 = 1 | (3-1)<<16.
		{"io mgmt send", IOMgmtSend(1, IOMgmtSendRUHUpdate, 2, b16[:6]), dw{0x1D, 1, 0x00020001, 0, 0, 0, 0}, 6},
	}
	for _, tc := range cases {
		c := tc.cmd
		got := dw{uint32(c.Opcode), c.NSID, c.CDW10, c.CDW11, c.CDW12, c.CDW13, c.CDW14}
		if got != tc.want {
			t.Errorf("%s: got %#x, want %#x", tc.name, got, tc.want)
		}
		if len(c.Data) != tc.dlen {
			t.Errorf("%s: data length %d, want %d", tc.name, len(c.Data), tc.dlen)
		}
		if c.BufIndex != -1 || c.Flags != 0 || c.CDW15 != 0 || c.CDW2 != 0 || c.CDW3 != 0 {
			t.Errorf("%s: unexpected BufIndex/flags/cdw2/3/15: %+v", tc.name, c)
		}
	}
	// DSM range bytes: {le32 cattr; le32 nlb (1-based); le64 slba}.
	want, _ := hex.DecodeString("00000000" + "08000000" + "1000000000000000" + "01000000" + "01000000" + "0000000002000000")
	if !bytes.Equal(dsmBuf[:32], want) {
		t.Errorf("DSM ranges:\n got %x\nwant %x", dsmBuf[:32], want)
	}
}

// TestPassthruGolden checks the 72-byte struct nvme_passthru_cmd handed to the kernel.
func TestPassthruGolden(t *testing.T) {
	c := Write(1, 0x100000010, 8, make([]byte, 4096), RWOptions{FUA: true, DType: 2, DSpec: 5})
	c.TimeoutMs = 1000
	pc := passthru(&c)
	got := unsafe.Slice((*byte)(unsafe.Pointer(&pc)), unsafe.Sizeof(pc))
	want := strings.Join([]string{
		"01000000", "01000000", // opcode, flags, rsvd; nsid
		"00000000", "00000000", // cdw2, cdw3
		"0000000000000000", "0000000000000000", // metadata, addr (filled at submit)
		"00000000", "00100000", // metadata_len, data_len 4096
		"10000000", "01000000", "07002040", "00000500", "00000000", "00000000", // cdw10..15
		"e8030000", "00000000", // timeout_ms, result
	}, "")
	if hex.EncodeToString(got) != want {
		t.Errorf("passthru bytes\n got %x\nwant %s", got, want)
	}
}

func TestParseRoundTrip(t *testing.T) {
	c := Write(3, 0xABCDEF0123, 0x10000, nil, RWOptions{DType: 2, DSpec: 0xBEEF, FUA: true})
	rw := ParseRW(&c)
	if rw.SLBA != 0xABCDEF0123 || rw.NLB != 0x10000 || rw.DType != 2 || rw.DSpec != 0xBEEF || !rw.FUA {
		t.Errorf("ParseRW = %+v", rw)
	}
	p := LogPage{LID: 0x23, LSP: 1, LSI: 7, RAE: true, Offset: 0x123456780, NSID: 9, CSI: 2, UUIDX: 5, OT: false}
	lc, err := GetLogPage(p, make([]byte, 0x40000*4))
	if err != nil {
		t.Fatal(err)
	}
	gp, n := ParseGetLogPage(&lc)
	if gp != p || n != 0x40000*4 {
		t.Errorf("ParseGetLogPage = %+v, %d", gp, n)
	}
	if _, err := GetLogPage(LogPage{}, make([]byte, 6)); err == nil {
		t.Error("GetLogPage accepted a length that is not a multiple of 4")
	}
	if _, err := GetLogPage(LogPage{Offset: 2}, make([]byte, 8)); err == nil {
		t.Error("GetLogPage accepted an unaligned offset")
	}
	if _, err := DatasetManagement(1, DSMDeallocate, make([]DSMRange, 257), make([]byte, 257*16)); err == nil {
		t.Error("DatasetManagement accepted 257 ranges")
	}
	if _, err := DatasetManagement(1, DSMDeallocate, make([]DSMRange, 2), make([]byte, 31)); err == nil {
		t.Error("DatasetManagement accepted a short buffer")
	}
	if _, err := IOMgmtRecv(1, 1, 0, make([]byte, 5)); err == nil {
		t.Error("IOMgmtRecv accepted a length that is not a multiple of 4")
	}
}

func TestCommandName(t *testing.T) {
	lc, _ := GetLogPage(LogPage{LID: 0x20}, make([]byte, 4))
	rc, _ := IOMgmtRecv(1, 1, 0, make([]byte, 4))
	for _, tc := range []struct {
		admin bool
		c     Command
		want  string
	}{
		{true, IdentifyController(nil), "Identify (CNS 0x01)"},
		{true, lc, "Get Log Page (LID 0x20)"},
		{true, GetFeatures(0x1D, 0, 0, 0, nil), "Get Features (FID 0x1d)"},
		{false, Write(1, 0, 1, nil, RWOptions{}), "Write"},
		{false, rc, "I/O Management Receive (MO 1)"},
		{false, Command{Opcode: 0x7E}, "I/O opcode 0x7e"},
		{true, Command{Opcode: 0xC0}, "admin opcode 0xc0"},
	} {
		if got := CommandName(tc.admin, &tc.c); got != tc.want {
			t.Errorf("CommandName = %q, want %q", got, tc.want)
		}
	}
}
