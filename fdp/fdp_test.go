package fdp

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/nvme"
)

// unhex decodes hex with spaces and newlines ignored; tests write golden bytes field by field.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	s = strings.Map(func(r rune) rune {
		if r == ' ' || r == '\n' || r == '\t' {
			return -1
		}
		return r
	}, s)
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func pad(b []byte, n int) []byte { return append(b, make([]byte, n-len(b))...) }

func TestUint128(t *testing.T) {
	max := Uint128{^uint64(0), ^uint64(0)}
	cases := []struct {
		v    Uint128
		want string
	}{
		{U128(0), "0"},
		{U128(18446744073709551615), "18446744073709551615"},
		{Uint128{0, 1}, "18446744073709551616"},
		{max, "340282366920938463463374607431768211455"},
	}
	for _, c := range cases {
		if got := c.v.String(); got != c.want {
			t.Errorf("%#v.String() = %s, want %s", c.v, got, c.want)
		}
		j, _ := json.Marshal(c.v)
		if string(j) != c.want {
			t.Errorf("json %s, want %s", j, c.want)
		}
		var back Uint128
		if err := json.Unmarshal(j, &back); err != nil || back != c.v {
			t.Errorf("json round trip %s: %v %v", j, back, err)
		}
		var s Uint128
		if err := json.Unmarshal([]byte(`"`+c.want+`"`), &s); err != nil || s != c.v {
			t.Errorf("json string %s: %v %v", c.want, s, err)
		}
	}
	if got := U128(^uint64(0)).Add(U128(1)); got != (Uint128{0, 1}) {
		t.Errorf("carry: %v", got)
	}
	if got := (Uint128{0, 1}).Sub(U128(1)); got != U128(^uint64(0)) {
		t.Errorf("borrow: %v", got)
	}
	if !U128(3).Less(Uint128{0, 1}) || (Uint128{0, 1}).Less(U128(3)) {
		t.Error("Less")
	}
	var bad Uint128
	if err := json.Unmarshal([]byte(`"340282366920938463463374607431768211456"`), &bad); err == nil {
		t.Error("2^128 accepted")
	}
}

func TestPID(t *testing.T) {
	cases := []struct {
		rg, ph uint16
		rgif   uint8
		pid    uint16
		err    bool
	}{
		{0, 5, 0, 5, false},
		{1, 5, 0, 0, true}, // RG needs RGIF bits
		{1, 2, 1, 0x8002, false},
		{3, 7, 2, 0xc007, false},
		{2, 0x3fff, 2, 0xbfff, false},
		{4, 0, 2, 0, true},      // RG too wide
		{0, 0x4000, 2, 0, true}, // PH too wide
		{0, 1, 16, 0, true},
	}
	for _, c := range cases {
		pid, err := MakePID(c.rg, c.ph, c.rgif)
		if c.err {
			if !errors.Is(err, ErrBadPID) {
				t.Errorf("MakePID(%d,%d,%d) = %#x, %v; want ErrBadPID", c.rg, c.ph, c.rgif, pid, err)
			}
			continue
		}
		if err != nil || pid != c.pid {
			t.Errorf("MakePID(%d,%d,%d) = %#x, %v; want %#x", c.rg, c.ph, c.rgif, pid, err, c.pid)
		}
		if rg, ph := SplitPID(pid, c.rgif); rg != c.rg || ph != c.ph {
			t.Errorf("SplitPID(%#x,%d) = %d,%d", pid, c.rgif, rg, ph)
		}
	}
	for nrg, want := range map[uint32]uint8{1: 0, 2: 1, 3: 2, 4: 2, 5: 3, 8: 3, 9: 4} {
		if got := RGIFFor(nrg); got != want {
			t.Errorf("RGIFFor(%d) = %d, want %d", nrg, got, want)
		}
	}
}

// goldenConfigLog: one valid configuration, RGIF 1, 2 RGs, 3 RUHs (II, PI, II), 1 vendor byte.
func goldenConfigLog(t testing.TB) ([]byte, *ConfigLog) {
	desc := unhex(t, `
		4d00 81 01 02000000 0300 7f00 00010000
		0000000400000000 3c000000`)
	desc = pad(desc, 64)
	desc = append(desc, unhex(t, "01000000 02000000 01000000 aa")...)
	hdr := pad(unhex(t, "0000 01 00 5d000000"), 16)
	want := &ConfigLog{Version: 1, Configs: []Config{{
		FDPA: 0x81, VSS: 1, NRG: 2, NRUH: 3, MaxPIDs: 127, NNSS: 256, RUNS: 64 << 20, ERUTL: 60,
		RUHs:   []RUHType{RUHInitiallyIsolated, RUHPersistentlyIsolated, RUHInitiallyIsolated},
		Vendor: []byte{0xaa},
	}}}
	return append(hdr, desc...), want
}

func TestConfigLogGolden(t *testing.T) {
	golden, want := goldenConfigLog(t)
	got, err := DecodeConfigLog(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decode:\n got %+v\nwant %+v", got, want)
	}
	c := got.Configs[0]
	if c.RGIF() != 1 || !c.Valid() || c.RUHs[1].String() != "Persistently Isolated" {
		t.Errorf("accessors: rgif %d valid %v %s", c.RGIF(), c.Valid(), c.RUHs[1])
	}
	enc, err := want.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc, golden) {
		t.Fatalf("encode:\n got %x\nwant %x", enc, golden)
	}
	if n, err := ConfigLogSize(golden[:16]); err != nil || n != len(golden) {
		t.Errorf("ConfigLogSize = %d, %v", n, err)
	}
	// Two configurations round trip, and errors.
	two := &ConfigLog{Configs: []Config{want.Configs[0], {FDPA: 0x80, NRG: 1, NRUH: 1, RUNS: 1 << 20, RUHs: []RUHType{2}}}}
	b, err := two.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeConfigLog(b)
	if err != nil || !reflect.DeepEqual(back, two) {
		t.Fatalf("two configs: %+v %v", back, err)
	}
	if _, err := DecodeConfigLog(golden[:len(golden)-1]); !errors.Is(err, ErrShort) {
		t.Errorf("truncated: %v", err)
	}
	bad := append([]byte{}, golden...)
	bad[16] = 0x40 // descriptor size smaller than its RUH list
	if _, err := DecodeConfigLog(bad); !errors.Is(err, ErrBadSize) {
		t.Errorf("small descriptor: %v", err)
	}
	if _, err := (&ConfigLog{Configs: []Config{{NRUH: 2}}}).Encode(); !errors.Is(err, ErrBadSize) {
		t.Errorf("NRUH mismatch: %v", err)
	}
}

func TestUsageLogGolden(t *testing.T) {
	golden := unhex(t, "0300 000000000000  0100000000000000 0200000000000000 0000000000000000")
	want := &UsageLog{Attrs: []RUHAttr{RUHHostSpecified, RUHControllerSpecified, RUHUnused}}
	got, err := DecodeUsageLog(golden)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("decode %+v %v", got, err)
	}
	enc, _ := want.Encode()
	if !bytes.Equal(enc, golden) {
		t.Fatalf("encode %x", enc)
	}
	if _, err := DecodeUsageLog(golden[:20]); !errors.Is(err, ErrShort) {
		t.Errorf("short: %v", err)
	}
	if RUHAttr(9).String() != "Unknown" || RUHHostSpecified.String() != "Host Specified" {
		t.Error("RUHAttr strings")
	}
}

func TestStatsGolden(t *testing.T) {
	golden := pad(unhex(t, `
		0010000000000000 0000000000000000
		0030000000000000 0100000000000000
		0000400000000000 0000000000000000`), 64)
	want := &Stats{HBMW: U128(0x1000), MBMW: Uint128{0x3000, 1}, MBE: U128(0x400000)}
	got, err := DecodeStats(golden)
	if err != nil || *got != *want {
		t.Fatalf("decode %+v %v", got, err)
	}
	if !bytes.Equal(want.Encode(), golden) {
		t.Fatalf("encode %x", want.Encode())
	}
	j, _ := json.Marshal(want)
	if string(j) != `{"hbmw":4096,"mbmw":18446744073709563904,"mbe":4194304}` {
		t.Errorf("json %s", j)
	}
	s := Stats{HBMW: U128(1000), MBMW: U128(2500)}
	if s.WAF() != 2.5 || (&Stats{}).WAF() != 0 {
		t.Errorf("WAF %v", s.WAF())
	}
	d := s.Sub(&Stats{HBMW: U128(500), MBMW: U128(500)})
	if d.WAF() != 4 {
		t.Errorf("delta WAF %v", d.WAF())
	}
	if _, err := DecodeStats(golden[:40]); !errors.Is(err, ErrShort) {
		t.Errorf("short: %v", err)
	}
}

func TestEventsLogGolden(t *testing.T) {
	ev0 := pad(unhex(t, `03 03 0580 e803000000000100 01000000`), 64) // invalid PID 0x8005, ts 1000 ms attr 1, nsid 1
	ev1 := unhex(t, `80 05 0000 0000000000000000 00000000
		01 00 1000 00000000 4000000000000000
		0100 02 0000000000`)
	ev1 = pad(ev1, 64)
	ev1[63] = 0x5a // vendor specific
	golden := pad(append(pad(unhex(t, "02000000"), 64), append(ev0, ev1...)...), EventsLogSize)
	want := &EventsLog{Events: []Event{
		{Type: EventInvalidPID, Flags: EventFlagPIV | EventFlagNSIDV, PID: 0x8005, Timestamp: 1000, TSAttr: 1, NSID: 1},
		{Type: EventMediaReallocated, Flags: EventFlagPIV | EventFlagLV, MRFlags: 1, NLBAM: 16, LBA: 64, RGID: 1, RUHID: 2},
	}}
	want.Events[1].Vendor[23] = 0x5a
	got, err := DecodeEventsLog(golden)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("decode %+v %v", got, err)
	}
	if !bytes.Equal(want.Encode(), golden) {
		t.Fatalf("encode differs")
	}
	if !got.Events[1].LBAValid() || got.Events[0].Type.String() != "Invalid Placement Identifier" || got.Events[1].Type.HostEvent() {
		t.Error("accessors")
	}
	if _, err := DecodeEventsLog(golden[:64+64]); !errors.Is(err, ErrShort) {
		t.Errorf("short: %v", err)
	}
	bad := append([]byte{}, golden...)
	bad[0] = 64
	if _, err := DecodeEventsLog(bad); !errors.Is(err, ErrBadSize) {
		t.Errorf("count 64: %v", err)
	}
	// Encode keeps the newest 63.
	many := &EventsLog{}
	for i := 0; i < 70; i++ {
		many.Events = append(many.Events, Event{Type: EventRUNotFullyWritten, PID: uint16(i)})
	}
	back, err := DecodeEventsLog(many.Encode())
	if err != nil || len(back.Events) != MaxEvents || back.Events[0].PID != 7 || back.Events[62].PID != 69 {
		t.Errorf("overflow: %d events, %v", len(back.Events), err)
	}
}

func TestRUHStatusGolden(t *testing.T) {
	golden := append(pad(nil, 14), unhex(t, `0200
		0000 0000 00000000 0040000000000000 00000000000000000000000000000000
		0180 0300 3c000000 0100000000000000 00000000000000000000000000000000`)...)
	want := &RUHStatus{Descs: []RUHStatusDesc{{PID: 0, RUHID: 0, RUAMW: 0x4000}, {PID: 0x8001, RUHID: 3, EARUTR: 60, RUAMW: 1}}}
	got, err := DecodeRUHStatus(golden)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("decode %+v %v", got, err)
	}
	enc, _ := want.Encode()
	if !bytes.Equal(enc, golden) {
		t.Fatalf("encode %x", enc)
	}
	if n, _ := RUHStatusCount(golden[:16]); n != 2 {
		t.Errorf("count %d", n)
	}
	if _, err := DecodeRUHStatus(golden[:47]); !errors.Is(err, ErrShort) {
		t.Errorf("short: %v", err)
	}
	j, _ := json.Marshal(got.Descs[1])
	if string(j) != `{"pid":32769,"ruhid":3,"earutr":60,"ruamw":1}` {
		t.Errorf("json %s", j)
	}
}

func TestRUHUpdateGolden(t *testing.T) {
	u := &RUHUpdate{PIDs: []uint16{0, 0x8001, 7}}
	cdw10, err := u.CDW10()
	if err != nil || cdw10 != 0x00020001 {
		t.Fatalf("cdw10 %#x %v", cdw10, err)
	}
	golden := unhex(t, "0000 0180 0700")
	if !bytes.Equal(u.Encode(), golden) {
		t.Fatalf("encode %x", u.Encode())
	}
	back, err := DecodeRUHUpdate(cdw10, golden)
	if err != nil || !reflect.DeepEqual(back, u) {
		t.Fatalf("decode %+v %v", back, err)
	}
	if _, err := DecodeRUHUpdate(cdw10, golden[:5]); !errors.Is(err, ErrShort) {
		t.Errorf("short: %v", err)
	}
	if _, err := DecodeRUHUpdate(0x2, golden); !errors.Is(err, ErrBadSize) {
		t.Errorf("MO 2: %v", err)
	}
	if _, err := (&RUHUpdate{}).CDW10(); !errors.Is(err, ErrBadSize) {
		t.Errorf("empty: %v", err)
	}
}

func TestFeatures(t *testing.T) {
	for _, c := range []struct {
		f FeatureState
		v uint32
	}{{FeatureState{}, 0}, {FeatureState{Enabled: true}, 1}, {FeatureState{true, 3}, 0x301}, {FeatureState{false, 0x12}, 0x1200}} {
		if c.f.Value() != c.v || DecodeFeature(c.v) != c.f {
			t.Errorf("%+v <-> %#x", c.f, c.v)
		}
	}
	if EventsFeatureCDW11(0x1234, 2) != 0x021234 {
		t.Error("cdw11")
	}
	if ph, n := SplitEventsFeatureCDW11(0x021234); ph != 0x1234 || n != 2 {
		t.Error("split cdw11")
	}
	en := []EventEnable{{EventRUNotFullyWritten, true}, {EventInvalidPID, false}, {EventMediaReallocated, true}}
	b := EncodeEventEnables(en)
	if !bytes.Equal(b, unhex(t, "0001 0300 8001")) {
		t.Errorf("enables %x", b)
	}
	back, err := DecodeEventEnables(b, 3)
	if err != nil || !reflect.DeepEqual(back, en) {
		t.Errorf("enables back %+v %v", back, err)
	}
	if _, err := DecodeEventEnables(b, 4); !errors.Is(err, ErrShort) {
		t.Errorf("short enables %v", err)
	}
	types := []EventType{EventInvalidPID, EventMediaReallocated}
	if tb := EncodeEventTypes(types); !bytes.Equal(tb, []byte{3, 0x80}) {
		t.Errorf("types %x", tb)
	}
	if got, err := DecodeEventTypes([]byte{3, 0x80, 9}, 2); err != nil || !reflect.DeepEqual(got, types) {
		t.Errorf("types back %v %v", got, err)
	}
}

// Fuzzers: every decoder must not panic on device bytes, and what decodes must re-encode to
// something that decodes to the same value.

func FuzzDecodeConfigLog(f *testing.F) {
	g, _ := goldenConfigLog(f)
	f.Add(g)
	f.Add(make([]byte, 16))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := DecodeConfigLog(b)
		if err != nil {
			return
		}
		enc, err := l.Encode()
		if err != nil {
			t.Fatalf("decoded log does not encode: %v", err)
		}
		back, err := DecodeConfigLog(enc)
		if err != nil || !reflect.DeepEqual(back, l) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func FuzzDecodeUsageLog(f *testing.F) {
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := DecodeUsageLog(b)
		if err != nil {
			return
		}
		enc, _ := l.Encode()
		if back, err := DecodeUsageLog(enc); err != nil || !reflect.DeepEqual(back, l) {
			t.Fatal("round trip")
		}
	})
}

func FuzzDecodeStats(f *testing.F) {
	f.Add(make([]byte, 64))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeStats(b)
		if err != nil {
			return
		}
		_ = s.HBMW.String() + s.MBMW.String()
		if back, _ := DecodeStats(s.Encode()); *back != *s {
			t.Fatal("round trip")
		}
	})
}

func FuzzDecodeEventsLog(f *testing.F) {
	f.Add((&EventsLog{Events: []Event{{Type: EventInvalidPID, PID: 3, Timestamp: 99}}}).Encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := DecodeEventsLog(b)
		if err != nil {
			return
		}
		if back, err := DecodeEventsLog(l.Encode()); err != nil || !reflect.DeepEqual(back, l) {
			t.Fatal("round trip")
		}
	})
}

func FuzzDecodeRUHStatus(f *testing.F) {
	s, _ := (&RUHStatus{Descs: []RUHStatusDesc{{PID: 1, RUHID: 1, RUAMW: 10}}}).Encode()
	f.Add(s)
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := DecodeRUHStatus(b)
		if err != nil {
			return
		}
		enc, _ := l.Encode()
		if back, err := DecodeRUHStatus(enc); err != nil || !reflect.DeepEqual(back, l) {
			t.Fatal("round trip")
		}
	})
}

func FuzzDecodeRUHUpdate(f *testing.F) {
	f.Add(uint32(0x00010001), []byte{1, 0, 2, 0})
	f.Fuzz(func(t *testing.T, cdw10 uint32, b []byte) {
		u, err := DecodeRUHUpdate(cdw10, b)
		if err != nil {
			return
		}
		c, err := u.CDW10()
		if err != nil || c != cdw10&0xffff0000|uint32(nvme.IOMgmtSendRUHUpdate) || len(u.PIDs) != int(cdw10>>16)+1 {
			t.Fatalf("cdw10 %#x -> %#x %v", cdw10, c, err)
		}
	})
}

func FuzzDecodeEventEnables(f *testing.F) {
	f.Add([]byte{0, 1, 3, 0}, 2)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		if types, err := DecodeEventTypes(b, n&0xff); err == nil && len(types) != n&0xff {
			t.Fatal("type count")
		}
		ev, err := DecodeEventEnables(b, n)
		if err != nil {
			return
		}
		if len(ev) != n {
			t.Fatal("count")
		}
	})
}
