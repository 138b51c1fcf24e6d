package emu

import (
	"bytes"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/ftl"
	"github.com/rbctl/rbctl/nvme"
	"github.com/rbctl/rbctl/placement"
	byteunits "github.com/rbctl/rbctl/units"
)

const testSpec = "emu:mem?size=64M&ru=1M&ruhs=4&op=0.25"

func open(t *testing.T, spec string) *Controller {
	t.Helper()
	c, err := Open(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func aligned(t *testing.T, n int) []byte {
	t.Helper()
	b, err := blockdev.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { blockdev.Free(b) })
	return b
}

func stats(t *testing.T, c nvme.Transport) *fdp.Stats {
	t.Helper()
	s, _, err := fdp.ReadStats(c, EndGID)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ruamw(t *testing.T, c nvme.Transport) map[uint16]uint64 {
	t.Helper()
	s, _, err := fdp.ReadRUHStatus(c, 0)
	if err != nil {
		t.Fatal(err)
	}
	m := map[uint16]uint64{}
	for _, d := range s.Descs {
		m[d.PID] = d.RUAMW
	}
	return m
}

func writePID(t *testing.T, c nvme.Transport, slba uint64, nlb uint32, dtype nvme.DirectiveType, pid uint16, fill byte) nvme.Completion {
	t.Helper()
	buf := aligned(t, int(nlb)*4096)
	for i := range buf {
		buf[i] = fill
	}
	cmds := []nvme.Command{nvme.Write(NSID, slba, nlb, buf, nvme.RWOptions{DType: dtype, DSpec: pid})}
	done := make([]nvme.Completion, 1)
	c.IO(cmds, done)
	return done[0]
}

func TestSpecParse(t *testing.T) {
	sp, err := ParseSpec("emu:/tmp/x.img?size=4G&ru=64M&ruhs=8&rg=2&op=0.07&iso=persistent&gc=greedy&lba=4096")
	if err != nil {
		t.Fatal(err)
	}
	if sp.Path != "/tmp/x.img" || sp.Size != 4<<30 || sp.RUSize != 64<<20 || sp.RUHs != 8 || sp.RGs != 2 ||
		sp.OP != 0.07 || sp.Isolation != ftl.PersistentlyIsolated || sp.GC != ftl.Greedy || sp.LBASize != 4096 || sp.MappingUnit != 4096 {
		t.Errorf("parsed %+v", sp)
	}
	if s := sp.String(); s != "emu:/tmp/x.img?size=4G&ru=64M&ruhs=8&rg=2&op=0.07&iso=persistent&gc=greedy&lba=4096" {
		t.Errorf("String %s", s)
	}
	if sp, err := ParseSpec("emu:mem"); err != nil || sp.Path != "" || sp.Size != 1<<30 {
		t.Errorf("defaults %+v %v", sp, err)
	}
	for _, bad := range []string{
		"mem", "emu:mem?size=4Q", "emu:mem?lba=1024", "emu:mem?ruhs=0", "emu:mem?rg=100",
		"emu:mem?op=-1", "emu:mem?iso=sometimes", "emu:mem?gc=lru", "emu:mem?bogus=1",
		"emu:mem?size=1000", "emu:mem?ru=5000", "emu:mem?mu=2048&lba=4096", "emu:mem?fdp=maybe",
		"emu:mem?size=1G&size=2G", "emu:/tmp/x.img?ru=8M&ruhs=8&ru=8M",
	} {
		if _, err := ParseSpec(bad); !errors.Is(err, ErrSpec) {
			t.Errorf("%s: %v, want ErrSpec", bad, err)
		}
	}
	for s, want := range map[string]int64{"4096": 4096, "64K": 64 << 10, "64KiB": 64 << 10, "3MB": 3 << 20, "2g": 2 << 30, "1T": 1 << 40} {
		if got, err := byteunits.ParseSize(s); err != nil || got != want {
			t.Errorf("ParseSize(%s) = %d %v", s, got, err)
		}
	}
	// Per-handle isolation.
	mixed, err := ParseSpec("emu:mem?size=64M&ru=1M&ruhs=3&op=0.25&iso=initial,persistent,persistent")
	if err != nil || len(mixed.HandleIsolation) != 3 || mixed.HandleIsolation[1] != ftl.PersistentlyIsolated {
		t.Fatalf("mixed iso %+v %v", mixed, err)
	}
	if _, err := ParseSpec("emu:mem?ruhs=3&iso=initial,persistent"); !errors.Is(err, ErrSpec) {
		t.Errorf("iso list shorter than ruhs: %v", err)
	}
	mc, err := New(mixed)
	if err != nil {
		t.Fatal(err)
	}
	cl, _, err := fdp.ReadConfigs(mc, EndGID)
	mc.Close()
	if err != nil || len(cl.Configs[0].RUHs) != 3 || cl.Configs[0].RUHs[0] != fdp.RUHInitiallyIsolated || cl.Configs[0].RUHs[2] != fdp.RUHPersistentlyIsolated {
		t.Errorf("mixed RUH types %+v %v", cl, err)
	}
	// An impossible FTL geometry is refused at open with the model's explanation.
	if _, err := Open("emu:mem?size=64M&ru=32M&ruhs=4&op=0"); !errors.Is(err, ErrSpec) {
		t.Errorf("infeasible geometry: %v", err)
	}
}

func TestIdentifyAndDiscover(t *testing.T) {
	c := open(t, "emu:mem?size=64M&ru=1M&ruhs=4&rg=2&op=0.25")
	ns, err := nvme.Probe(c)
	if err != nil {
		t.Fatal(err)
	}
	if ns.Capacity != 64<<20 || ns.BlockSize != 4096 || ns.Ctrl.ModelNumber != ModelNumber || !ns.Ctrl.FDPSupported() || !ns.Ctrl.DSMSupported() {
		t.Errorf("probe: %+v / %+v", ns, ns.Ctrl)
	}
	if ns.MaxTransfer != 256<<10 {
		t.Errorf("max transfer %d", ns.MaxTransfer)
	}
	d, err := fdp.Discover(c)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Supported || !d.Feature.Enabled || d.EnduranceGroup != 1 || d.NSID != 1 || d.Config == nil {
		t.Fatalf("discovery %+v", d)
	}
	cfg := d.Config
	if cfg.NRG != 2 || cfg.NRUH != 4 || cfg.RUNS != 1<<20 || cfg.RGIF() != 1 || !cfg.Valid() || cfg.RUHs[0] != fdp.RUHInitiallyIsolated {
		t.Errorf("config %+v", cfg)
	}
	want := []uint16{0, 1, 2, 3, 0x8000, 0x8001, 0x8002, 0x8003}
	if len(d.PIDs) != len(want) {
		t.Fatalf("PIDs %v", d.PIDs)
	}
	for i := range want {
		if d.PIDs[i] != want[i] {
			t.Fatalf("PIDs %#x, want %#x", d.PIDs, want)
		}
	}
	for _, s := range d.Status.Descs {
		if s.RUAMW != (1<<20)/4096 {
			t.Errorf("fresh RUAMW %d", s.RUAMW)
		}
	}
}

func TestWriteWithPIDChangesUsageAndStats(t *testing.T) {
	dev, disc, err := openDevice(testSpec, nvme.DeviceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	c := dev.Transport()
	if dev.Info().Handles != 4 || dev.Info().Kind != blockdev.KindEmulated {
		t.Fatalf("info %+v", dev.Info())
	}
	before := stats(t, c)
	r0 := ruamw(t, c)
	buf := aligned(t, 64<<10)
	for i := range buf {
		buf[i] = byte(i)
	}
	if err := blockdev.WriteAt(dev, buf, 1<<20, 2); err != nil { // handle 2 → PID 2
		t.Fatal(err)
	}
	after := stats(t, c)
	if d := after.Sub(before); d.HBMW != fdp.U128(64<<10) || d.MBMW != fdp.U128(64<<10) {
		t.Errorf("stats delta %+v", d)
	}
	r1 := ruamw(t, c)
	pid := disc.PIDs[2]
	if r0[pid]-r1[pid] != 16 || r1[disc.PIDs[1]] != r0[disc.PIDs[1]] {
		t.Errorf("RUAMW before %v after %v", r0, r1)
	}
	got := aligned(t, 64<<10)
	if err := blockdev.ReadAt(dev, got, 1<<20); err != nil || !bytes.Equal(got, buf) {
		t.Fatalf("read back: %v", err)
	}
	u, _, err := fdp.ReadUsage(c, EndGID)
	if err != nil || len(u.Attrs) != 4 || u.Attrs[2] != fdp.RUHHostSpecified {
		t.Errorf("usage %+v %v", u, err)
	}
}

func TestRUHUpdateClosesRU(t *testing.T) {
	c := open(t, testSpec)
	if st := writePID(t, c, 0, 8, 2, 1, 0xaa); st.Status != 0 {
		t.Fatal(st.Status)
	}
	if r := ruamw(t, c)[1]; r != 256-8 {
		t.Fatalf("RUAMW after 8 blocks: %d", r)
	}
	if err := fdp.UpdateRUH(c, 0, []uint16{1}); err != nil {
		t.Fatal(err)
	}
	if r := ruamw(t, c)[1]; r != 256 {
		t.Errorf("RUAMW after update %d, want a whole RU", r)
	}
	ev, _, err := fdp.ReadEvents(c, EndGID, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Events) != 1 || ev.Events[0].Type != fdp.EventRUNotFullyWritten || ev.Events[0].PID != 1 ||
		ev.Events[0].Flags&fdp.EventFlagPIV == 0 || ev.Events[0].Timestamp == 0 {
		t.Errorf("events %+v", ev.Events)
	}
	// Controller events are a separate log.
	if cev, _, _ := fdp.ReadEvents(c, EndGID, false); len(cev.Events) != 0 {
		t.Errorf("controller events %+v", cev.Events)
	}
	// Invalid PIDs in an update are refused.
	if err := fdp.UpdateRUH(c, 0, []uint16{9}); !errors.Is(err, nvme.ErrInvalidField) {
		t.Errorf("update of PID 9: %v", err)
	}
}

func TestInvalidPIDEvent(t *testing.T) {
	c := open(t, testSpec)
	before := ruamw(t, c)
	if st := writePID(t, c, 100, 4, 2, 0x7777, 1); st.Status != 0 {
		t.Fatalf("write with invalid PID: %v", st.Status)
	}
	after := ruamw(t, c)
	if before[0]-after[0] != 4 {
		t.Errorf("default handle RUAMW %d -> %d", before[0], after[0])
	}
	ev, _, _ := fdp.ReadEvents(c, EndGID, true)
	if len(ev.Events) != 1 || ev.Events[0].Type != fdp.EventInvalidPID || ev.Events[0].PID != 0x7777 || ev.Events[0].NSID != 1 {
		t.Fatalf("events %+v", ev.Events)
	}
	// Disable the event on handle 0: the next invalid PID is not logged.
	en, err := fdp.GetEventEnables(c, 0, 0)
	if err != nil || len(en) != 2 || !en[1].Enabled || en[1].Type != fdp.EventInvalidPID {
		t.Fatalf("enables %+v %v", en, err)
	}
	if err := fdp.SetEventEnables(c, 0, 0, []fdp.EventType{fdp.EventInvalidPID}, false, false); err != nil {
		t.Fatal(err)
	}
	writePID(t, c, 100, 4, 2, 0x7777, 1)
	if ev, _, _ := fdp.ReadEvents(c, EndGID, true); len(ev.Events) != 1 {
		t.Errorf("disabled event logged: %d events", len(ev.Events))
	}
	if en, _ := fdp.GetEventEnables(c, 0, 0); en[1].Enabled {
		t.Error("enable still set")
	}
	if err := fdp.SetEventEnables(c, 0, 0, []fdp.EventType{fdp.EventMediaReallocated}, true, false); !errors.Is(err, nvme.ErrInvalidField) {
		t.Errorf("unsupported event type: %v", err)
	}
}

func TestFDPDisabled(t *testing.T) {
	c := open(t, testSpec)
	if err := fdp.SetFeature(c, EndGID, fdp.FeatureState{Enabled: false}, true); err != nil {
		t.Fatal(err)
	}
	f, err := fdp.GetFeature(c, EndGID)
	if err != nil || f.Enabled {
		t.Fatalf("feature %+v %v", f, err)
	}
	d, err := fdp.Discover(c)
	if err != nil || d.Feature.Enabled || len(d.PIDs) != 0 || d.Status != nil {
		t.Fatalf("discover disabled: %+v %v", d, err)
	}
	if _, _, err := fdp.ReadRUHStatus(c, 0); !errors.Is(err, nvme.ErrFDPDisabled) {
		t.Errorf("RUH status while disabled: %v", err)
	}
	if err := fdp.UpdateRUH(c, 0, []uint16{1}); !errors.Is(err, nvme.ErrFDPDisabled) {
		t.Errorf("RUH update while disabled: %v", err)
	}
	// Directives are ignored: a write with PID 3 lands on the default handle, no event.
	if st := writePID(t, c, 0, 2, 2, 3, 7); st.Status != 0 {
		t.Fatal(st.Status)
	}
	if ev, _, _ := fdp.ReadEvents(c, EndGID, true); len(ev.Events) != 0 {
		t.Errorf("events %+v", ev.Events)
	}
	ms := c.ModelStats()
	if ms.Handles[0].HostBytes != 8192 || ms.Handles[3].HostBytes != 0 {
		t.Errorf("per-handle host bytes %+v", ms.Handles)
	}
	if err := fdp.SetFeature(c, EndGID, fdp.FeatureState{Enabled: true, ConfigIndex: 1}, true); !errors.Is(err, nvme.ErrInvalidField) {
		t.Errorf("config index 1: %v", err)
	}
	if err := fdp.SetFeature(c, EndGID, fdp.FeatureState{Enabled: true}, true); err != nil {
		t.Fatal(err)
	}
	if d, _ := fdp.Discover(c); len(d.PIDs) != 4 {
		t.Errorf("re-enabled PIDs %v", d.PIDs)
	}
}

func TestDeallocate(t *testing.T) {
	dev, _, err := openDevice(testSpec, nvme.DeviceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	c := dev.Transport().(*Controller)
	buf := aligned(t, 256<<10)
	for i := range buf {
		buf[i] = 0x5a
	}
	if err := blockdev.WriteAt(dev, buf, 0, 1); err != nil {
		t.Fatal(err)
	}
	if v := c.ModelStats().ValidBytes; v != 256<<10 {
		t.Fatalf("valid %d", v)
	}
	if err := dev.Deallocate([]blockdev.Range{{Off: 64 << 10, Len: 128 << 10}}); err != nil {
		t.Fatal(err)
	}
	if v := c.ModelStats().ValidBytes; v != 128<<10 {
		t.Errorf("valid after deallocate %d", v)
	}
	got := aligned(t, 256<<10)
	if err := blockdev.ReadAt(dev, got, 0); err != nil {
		t.Fatal(err)
	}
	for i, b := range got {
		want := byte(0x5a)
		if i >= 64<<10 && i < 192<<10 {
			want = 0
		}
		if b != want {
			t.Fatalf("byte %d = %#x, want %#x", i, b, want)
		}
	}
}

func TestErrorsStatus(t *testing.T) {
	c := open(t, testSpec)
	buf := aligned(t, 8192)
	cases := []struct {
		name  string
		admin bool
		cmd   nvme.Command
		want  error
	}{
		{"admin opcode 0x7f", true, nvme.Command{Opcode: 0x7f}, nvme.ErrInvalidOpcode},
		{"io opcode 0x7e", false, nvme.Command{Opcode: 0x7e, NSID: 1}, nvme.ErrInvalidOpcode},
		{"read past end", false, nvme.Read(NSID, 16383, 2, buf), nvme.ErrLBAOutOfRange},
		{"write wrong nsid", false, nvme.Write(2, 0, 1, buf, nvme.RWOptions{}), nvme.ErrInvalidNamespace},
		{"write short buffer", false, nvme.Write(NSID, 0, 4, buf, nvme.RWOptions{}), nvme.ErrInvalidField},
		{"streams directive", false, nvme.Write(NSID, 0, 1, buf, nvme.RWOptions{DType: 1}), nvme.ErrInvalidField},
		{"identify cns 0x55", true, nvme.Identify(0x55, 0, 0, 0, aligned(t, 4096)), nvme.ErrInvalidField},
		{"identify ns 2", true, nvme.IdentifyNamespace(2, aligned(t, 4096)), nvme.ErrInvalidNamespace},
		{"get feature fdp egid 2", true, nvme.GetFeatures(nvme.FeatFDP, 0, 0, 2, nil), nvme.ErrInvalidField},
		{"get feature 0x7b", true, nvme.GetFeatures(0x7b, 0, 0, 0, nil), nvme.ErrInvalidField},
	}
	lp, _ := nvme.GetLogPage(nvme.LogPage{LID: nvme.LogFDPStats, LSI: 2}, aligned(t, 64))
	cases = append(cases, struct {
		name  string
		admin bool
		cmd   nvme.Command
		want  error
	}{"stats log lsi 2", true, lp, nvme.ErrInvalidField})
	lp2, _ := nvme.GetLogPage(nvme.LogPage{LID: 0x42}, aligned(t, 64))
	cases = append(cases, struct {
		name  string
		admin bool
		cmd   nvme.Command
		want  error
	}{"log 0x42", true, lp2, nvme.ErrInvalidLogPage})
	for _, tc := range cases {
		var err error
		if tc.admin {
			_, err = nvme.RunAdmin(c, &tc.cmd)
		} else {
			_, err = nvme.RunIO(c, &tc.cmd)
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// SMART / Health: data units written round up (1 block = 1 unit), one write command.
	writePID(t, c, 1, 1, 0, 0, 1)
	smart, err := nvme.GetLog(c, nvme.LogPage{LID: 0x02, NSID: nvme.NSIDAll}, 512)
	if err != nil || fdp.GetUint128(smart[48:]) != fdp.U128(1) || fdp.GetUint128(smart[80:]) != fdp.U128(1) || smart[3] != 100 {
		t.Errorf("SMART log %x %v", smart[:96], err)
	}
	// Log page offsets: the stats log read from offset 16 starts with MBMW.
	writePID(t, c, 0, 1, 2, 0, 1)
	b, err := nvme.GetLog(c, nvme.LogPage{LID: nvme.LogFDPStats, LSI: 1, Offset: 16}, 16)
	if err != nil || fdp.GetUint128(b) != fdp.U128(8192) {
		t.Errorf("offset read %x %v", b, err)
	}
}

func TestGCRaisesWAF(t *testing.T) {
	c := open(t, "emu:mem?size=32M&ru=256K&ruhs=2&op=0.2")
	rng := rand.New(rand.NewSource(1))
	buf := aligned(t, 4096)
	const blocks = 32 << 20 / 4096
	cmds := make([]nvme.Command, 256)
	done := make([]nvme.Completion, len(cmds))
	for round := 0; round < 3*blocks/len(cmds); round++ {
		for i := range cmds {
			cmds[i] = nvme.Write(NSID, uint64(rng.Intn(blocks)), 1, buf, nvme.RWOptions{DType: 2, DSpec: uint16(rng.Intn(2))})
		}
		c.IO(cmds, done)
		for _, d := range done {
			if d.Status != 0 || d.Err != nil {
				t.Fatalf("write: %v %v", d.Status, d.Err)
			}
		}
	}
	s := stats(t, c)
	if s.WAF() <= 1.2 || s.MBE.IsZero() {
		t.Errorf("random overwrite: WAF %.3f MBE %s", s.WAF(), s.MBE)
	}
	t.Logf("random overwrite, 3x capacity, rho 0.2: WAF %.3f, MBE %s", s.WAF(), s.MBE)
}

func TestPersistence(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ssd.img")
	spec := "emu:" + path + "?size=16M&ru=1M&ruhs=2&op=0.5"
	c, err := Open(spec)
	if err != nil {
		t.Fatal(err)
	}
	if st := writePID(t, c, 10, 4, 2, 1, 0xc3); st.Status != 0 {
		t.Fatal(st.Status)
	}
	if err := fdp.SetEventEnables(c, 0, 1, []fdp.EventType{fdp.EventRUNotFullyWritten}, false, true); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(statePath(path)); err != nil || st.Size() == 0 {
		t.Fatalf("state file: %v", err)
	}
	// Reopen with the path alone: same geometry, same data, counters carried over.
	c2 := open(t, "emu:"+path)
	if c2.Spec().RUSize != 1<<20 || c2.Spec().RUHs != 2 {
		t.Errorf("reopened spec %s", c2.Spec())
	}
	if s := stats(t, c2); s.HBMW != fdp.U128(16384) {
		t.Errorf("HBMW after reopen %s", s.HBMW)
	}
	if v := c2.ModelStats().ValidBytes; v < 16384 {
		t.Errorf("rebuilt FTL holds %d valid bytes", v)
	}
	buf := aligned(t, 16384)
	rd := nvme.Read(NSID, 10, 4, buf)
	if _, err := nvme.RunIO(c2, &rd); err != nil || buf[0] != 0xc3 || buf[16383] != 0xc3 {
		t.Errorf("data after reopen: %v %#x", err, buf[0])
	}
	if en, _ := fdp.GetEventEnables(c2, 0, 1); en[0].Enabled {
		t.Error("event enable not kept")
	}
	c2.Close()
	if _, err := Open("emu:" + path + "?ru=2M"); !errors.Is(err, ErrSpec) {
		t.Errorf("reopen with another RU size: %v", err)
	}
}

func TestConcurrentWriters(t *testing.T) {
	dev, _, err := openDevice(testSpec, nvme.DeviceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			buf, _ := blockdev.Alloc(16 << 10)
			defer blockdev.Free(buf)
			for i := range buf {
				buf[i] = byte(g)
			}
			for i := 0; i < 50; i++ {
				off := int64(g)*(16<<20) + int64(i)*(16<<10)
				if err := blockdev.WriteAt(dev, buf, off, placement.Handle(g)); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ms := dev.Transport().(*Controller).ModelStats()
	for g := 0; g < 4; g++ {
		if ms.Handles[g].HostBytes != 50*16<<10 {
			t.Errorf("handle %d host bytes %d", g, ms.Handles[g].HostBytes)
		}
	}
}

func TestClosed(t *testing.T) {
	for _, spec := range []string{testSpec, "emu:" + filepath.Join(t.TempDir(), "c.img") + "?size=16M&ru=1M&ruhs=2&op=0.5"} {
		c, err := Open(spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("second close: %v", err)
		}
		if st := writePID(t, c, 0, 1, 0, 0, 1); st.Err == nil {
			t.Errorf("%s: write after close succeeded", spec)
		}
		if comp := c.Admin(&nvme.Command{Opcode: nvme.OpIdentify}); comp.Err == nil {
			t.Errorf("%s: admin after close succeeded", spec)
		}
		// Racing a Close: the store refuses instead of panicking.
		if err := c.store.WriteAt(make([]byte, 4096), 0); err == nil {
			t.Errorf("%s: store write after close succeeded", spec)
		}
	}
}

// FuzzCommands feeds arbitrary command fields to the controller: it must answer every one
// with a status, never panic or write outside the buffer it was given.
func FuzzCommands(f *testing.F) {
	f.Add(true, uint8(0x02), uint32(0), uint32(0x000f0022), uint32(0x00010000), uint32(0), uint32(0), 64)
	f.Add(false, uint8(0x01), uint32(1), uint32(5), uint32(0), uint32(0x00200001), uint32(0x00030000), 8192)
	f.Add(false, uint8(0x1d), uint32(1), uint32(0x00010001), uint32(0), uint32(0), uint32(0), 4)
	f.Add(false, uint8(0x09), uint32(1), uint32(0), uint32(4), uint32(0), uint32(0), 16)
	c, err := Open("emu:mem?size=16M&ru=1M&ruhs=2&rg=2&op=0.5")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, admin bool, op uint8, nsid, cdw10, cdw11, cdw12, cdw13 uint32, n int) {
		if n < 0 || n > 1<<20 {
			return
		}
		cmd := nvme.Command{Opcode: op, NSID: nsid, CDW10: cdw10, CDW11: cdw11, CDW12: cdw12, CDW13: cdw13, Data: make([]byte, n)}
		if admin {
			c.Admin(&cmd)
		} else {
			done := make([]nvme.Completion, 1)
			c.IO([]nvme.Command{cmd}, done)
		}
	})
}
