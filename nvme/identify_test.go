package nvme

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

// ctrlGolden places fields at the offsets of the NVMe base spec / libnvme struct
// nvme_id_ctrl by hand (independently of Encode).
func ctrlGolden() []byte {
	b := make([]byte, 4096)
	le := binary.LittleEndian
	le.PutUint16(b[0:], 0x1b36)
	le.PutUint16(b[2:], 0x1af4)
	copy(b[4:24], "deadbeef            ")
	copy(b[24:64], "QEMU NVMe Ctrl                          ")
	copy(b[64:72], "7.2.0   ")
	b[77] = 7                         // MDTS
	le.PutUint16(b[78:], 0x0001)      // CNTLID
	le.PutUint32(b[80:], 0x00010400)  // VER 1.4
	le.PutUint32(b[96:], 0x00088010)  // CTRATT: FDPS (19), bit 15, endurance groups (4)
	le.PutUint16(b[256:], 0x000a)     // OACS
	b[261] = 0x0e                     // LPA
	le.PutUint16(b[340:], 1)          // ENDGIDMAX
	b[512], b[513] = 0x66, 0x44       // SQES, CQES
	le.PutUint32(b[516:], 256)        // NN
	le.PutUint16(b[520:], 0x015d)     // ONCS incl. DSM (bit 2)
	b[525] = 0x07                     // VWC
	le.PutUint32(b[536:], 0x00000001) // SGLS
	copy(b[768:], "nqn.2019-08.org.qemu:deadbeef")
	return b
}

func TestDecodeControllerGolden(t *testing.T) {
	c, err := DecodeController(ctrlGolden())
	if err != nil {
		t.Fatal(err)
	}
	want := ControllerData{
		VID: 0x1b36, SSVID: 0x1af4, SerialNumber: "deadbeef", ModelNumber: "QEMU NVMe Ctrl",
		Firmware: "7.2.0", MDTS: 7, CNTLID: 1, VER: 0x10400, CTRATT: 0x88010, OACS: 0xa, LPA: 0xe,
		EndGIDMax: 1, SQES: 0x66, CQES: 0x44, NN: 256, ONCS: 0x15d, VWC: 7, SGLS: 1,
		SubNQN: "nqn.2019-08.org.qemu:deadbeef",
	}
	if !reflect.DeepEqual(*c, want) {
		t.Errorf("decoded\n %+v\nwant\n %+v", *c, want)
	}
	if !c.FDPSupported() || !c.EnduranceGroups() || !c.DSMSupported() || !c.VolatileWriteCache() {
		t.Errorf("capability bits: fdp %v endgrp %v dsm %v vwc %v", c.FDPSupported(), c.EnduranceGroups(), c.DSMSupported(), c.VolatileWriteCache())
	}
	if v := c.Version(); v != "1.4" {
		t.Errorf("Version = %q", v)
	}
	if m := c.MaxTransfer(0); m != 512<<10 {
		t.Errorf("MaxTransfer(4K pages, MDTS 7) = %d, want 512 KiB", m)
	}
	// QEMU 7.2 reports CTRATT 0x8000: no FDPS.
	c.CTRATT = 0x8000
	if c.FDPSupported() || c.EnduranceGroups() {
		t.Error("CTRATT 0x8000 decoded as FDP or endurance groups")
	}
	c.MDTS = 0
	if c.MaxTransfer(0) != 0 {
		t.Error("MDTS 0 must mean no limit")
	}
	// Encode writes the same bytes back.
	c2, _ := DecodeController(ctrlGolden())
	out := make([]byte, 4096)
	if err := c2.Encode(out); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, ctrlGolden()) {
		t.Error("Encode(Decode(b)) != b for the controller golden")
	}
	if _, err := DecodeController(make([]byte, 4095)); !errors.Is(err, ErrShortData) {
		t.Errorf("short controller: %v", err)
	}
}

func nsGolden() []byte {
	b := make([]byte, 4096)
	le := binary.LittleEndian
	le.PutUint64(b[0:], 0x40000) // NSZE
	le.PutUint64(b[8:], 0x40000) // NCAP
	le.PutUint64(b[16:], 0x1000) // NUSE
	b[24] = 0x14                 // NSFEAT
	b[25] = 7                    // NLBAF: 8 formats
	b[26] = 0x04                 // FLBAS: format 4
	le.PutUint16(b[100:], 0)     // NVMSETID
	le.PutUint16(b[102:], 1)     // ENDGID
	copy(b[104:120], "0123456789abcdef")
	copy(b[120:128], "EUI64-ID")
	lbaf := []struct {
		ms uint16
		ds uint8
	}{{0, 9}, {8, 9}, {16, 9}, {64, 9}, {0, 12}, {8, 12}, {16, 12}, {64, 12}}
	for i, f := range lbaf {
		le.PutUint16(b[128+4*i:], f.ms)
		b[128+4*i+2] = f.ds
	}
	return b
}

func TestDecodeNamespaceGolden(t *testing.T) {
	n, err := DecodeNamespace(nsGolden())
	if err != nil {
		t.Fatal(err)
	}
	if n.NSZE != 0x40000 || n.NCAP != 0x40000 || n.NUSE != 0x1000 || n.NSFEAT != 0x14 || n.NLBAF != 7 || n.FLBAS != 4 || n.EndGID != 1 {
		t.Errorf("decoded %+v", n)
	}
	if string(n.NGUID[:]) != "0123456789abcdef" || string(n.EUI64[:]) != "EUI64-ID" {
		t.Errorf("NGUID %q EUI64 %q", n.NGUID, n.EUI64)
	}
	f, err := n.Format()
	if err != nil || f.DataSize() != 4096 || f.MS != 0 || n.FormatIndex() != 4 {
		t.Errorf("format %+v %v index %d", f, err, n.FormatIndex())
	}
	out := make([]byte, 4096)
	n.Encode(out)
	if !bytes.Equal(out, nsGolden()) {
		t.Error("Encode(Decode(b)) != b for the namespace golden")
	}
	// Format 5 carries 8 bytes of metadata; extended LBA bit 4.
	n.FLBAS = 0x15
	if f, _ := n.Format(); f.MS != 8 || !n.ExtendedLBA() {
		t.Errorf("format 5: %+v ext %v", f, n.ExtendedLBA())
	}
	n.FLBAS = 9 // beyond NLBAF
	if _, err := n.Format(); !errors.Is(err, ErrBadLBAFormat) {
		t.Errorf("FLBAS beyond NLBAF: %v", err)
	}
	// More than 16 formats: FLBAS bits 6:5 are the high bits of the index.
	n.NLBAF, n.FLBAS = 40, 0x20|0x03
	if i := n.FormatIndex(); i != 0x13 {
		t.Errorf("FormatIndex with 41 formats = %d, want 19", i)
	}
	n.LBAF[0x13] = LBAFormat{LBADS: 3}
	if _, err := n.Format(); !errors.Is(err, ErrBadLBAFormat) {
		t.Errorf("LBADS 3 accepted: %v", err)
	}
}

func TestDecodeIndependentAndLists(t *testing.T) {
	b := make([]byte, 4096)
	b[0], b[1] = 0x1, 0x2
	binary.LittleEndian.PutUint32(b[4:], 9)
	binary.LittleEndian.PutUint16(b[10:], 2)
	binary.LittleEndian.PutUint16(b[12:], 5) // ENDGID at 12
	b[14] = 1
	n, err := DecodeIndependentNamespace(b)
	if err != nil {
		t.Fatal(err)
	}
	if *n != (IndependentNamespaceData{NSFEAT: 1, NMIC: 2, ANAGRPID: 9, NVMSETID: 2, EndGID: 5, NSTAT: 1}) {
		t.Errorf("decoded %+v", n)
	}
	if _, err := DecodeIndependentNamespace(b[:15]); !errors.Is(err, ErrShortData) {
		t.Error("short CNS 8 accepted")
	}

	l := make([]byte, 4096)
	for i, id := range []uint32{1, 2, 7} {
		binary.LittleEndian.PutUint32(l[4*i:], id)
	}
	if ids := DecodeNamespaceList(l); !reflect.DeepEqual(ids, []uint32{1, 2, 7}) {
		t.Errorf("ns list %v", ids)
	}
	if err := EncodeNamespaceList(make([]byte, 8), []uint32{1, 2, 3}); err == nil {
		t.Error("EncodeNamespaceList overflow accepted")
	}

	d := []byte{NIDTEUI64, 8, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, NIDTCSI, 1, 0, 0, 0, 0, 0, 0, 0}
	descs, err := DecodeNSDescriptors(d)
	if err != nil || len(descs) != 2 || descs[0].Type != NIDTEUI64 || len(descs[0].ID) != 8 || descs[1].Type != NIDTCSI || descs[1].ID[0] != 0 {
		t.Errorf("descriptors %+v %v", descs, err)
	}
	if _, err := DecodeNSDescriptors([]byte{NIDTNGUID, 16, 0, 0, 1}); !errors.Is(err, ErrShortData) {
		t.Errorf("truncated descriptor: %v", err)
	}
}

func FuzzDecodeController(f *testing.F) {
	f.Add(ctrlGolden())
	f.Add(make([]byte, 100))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeController(b)
		if err != nil {
			if len(b) >= IdentifyDataLen {
				t.Fatalf("rejected %d bytes: %v", len(b), err)
			}
			return
		}
		_ = c.Version()
		_ = c.MaxTransfer(0)
		out := make([]byte, IdentifyDataLen)
		if err := c.Encode(out); err != nil {
			t.Fatal(err)
		}
		c2, err := DecodeController(out)
		if err != nil {
			t.Fatal(err)
		}
		// Strings lose trailing spaces/NULs; everything must survive a second round trip.
		out2 := make([]byte, IdentifyDataLen)
		c2.Encode(out2)
		if !bytes.Equal(out, out2) {
			t.Fatal("controller encode is not stable")
		}
		if c.CTRATT != c2.CTRATT || c.ONCS != c2.ONCS || c.MDTS != c2.MDTS || c.NN != c2.NN {
			t.Fatal("numeric fields changed in a round trip")
		}
	})
}

func FuzzDecodeNamespace(f *testing.F) {
	f.Add(nsGolden())
	f.Add(make([]byte, 10))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := DecodeNamespace(b)
		if err != nil {
			if len(b) >= IdentifyDataLen {
				t.Fatalf("rejected %d bytes: %v", len(b), err)
			}
			return
		}
		if fm, err := n.Format(); err == nil {
			if fm.DataSize() < 512 || n.FormatIndex() > int(n.NLBAF) {
				t.Fatalf("accepted format %+v index %d nlbaf %d", fm, n.FormatIndex(), n.NLBAF)
			}
		}
		out := make([]byte, IdentifyDataLen)
		n.Encode(out)
		n2, _ := DecodeNamespace(out)
		if *n2 != *n {
			// RP keeps 2 bits; everything else is exact.
			for i := range n.LBAF {
				n.LBAF[i].RP &= 3
			}
			if *n2 != *n {
				t.Fatal("namespace round trip differs")
			}
		}
	})
}

func FuzzDecodeIndependentNamespace(f *testing.F) {
	f.Add(make([]byte, 4096))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := DecodeIndependentNamespace(b)
		if err != nil {
			return
		}
		out := make([]byte, 16)
		n.Encode(out)
		if n2, _ := DecodeIndependentNamespace(out); *n2 != *n {
			t.Fatal("round trip differs")
		}
	})
}

func FuzzDecodeNamespaceList(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 2, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		ids := DecodeNamespaceList(b)
		if len(ids)*4 > len(b) {
			t.Fatal("more ids than bytes")
		}
		out := make([]byte, len(b))
		if err := EncodeNamespaceList(out, ids); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(DecodeNamespaceList(out), ids) {
			t.Fatal("round trip differs")
		}
	})
}

func FuzzDecodeNSDescriptors(f *testing.F) {
	f.Add([]byte{NIDTEUI64, 8, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Fuzz(func(t *testing.T, b []byte) {
		ds, _ := DecodeNSDescriptors(b)
		total := 0
		for _, d := range ds {
			total += 4 + len(d.ID)
		}
		if total > len(b) {
			t.Fatal("descriptors exceed the data")
		}
	})
}

func FuzzDecodeDSMRanges(f *testing.F) {
	f.Add(make([]byte, 32), 2)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		rs, err := DecodeDSMRanges(b, n)
		if err != nil {
			return
		}
		out := make([]byte, len(rs)*DSMRangeLen)
		if _, err := EncodeDSMRanges(out, rs); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, b[:len(out)]) {
			t.Fatal("DSM range round trip differs")
		}
	})
}
