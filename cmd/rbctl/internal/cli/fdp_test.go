package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/nvme"
	"github.com/rbctl/rbctl/placement"
)

func runFDPCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := NewRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func mustFDPCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runFDPCLI(t, args...)
	if err != nil {
		t.Fatalf("rbctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func fdpStatusJSON(t *testing.T, dev string) map[string]any {
	t.Helper()
	var m map[string]any
	out := mustFDPCLI(t, "fdp-status", dev, "--json")
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("fdp-status --json: %v\n%s", err, out)
	}
	return m
}

// fdpWorkload writes through the engine's device path (emu → nvme.Device): a sequential
// fill through handle 0 (a drive holding old data), then random 64 KiB overwrites — 3/4 to a
// hot eighth of the device through handle 1, 1/4 anywhere through handle 0 — and a
// deallocate. It returns the bytes written and fdp-status (human and JSON) taken through the
// live controller before it is closed.
func fdpWorkload(t *testing.T, dev string) (written int64, human, js string) {
	o, err := devices.OpenDevice(dev, devices.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	d := o.Block
	if o.FDP == nil || len(o.FDP.PIDs()) != 4 || d.Info().Handles != 4 {
		t.Fatalf("FDP view %+v (%v)", o.FDP, o.NoFDP)
	}
	buf, _ := blockdev.Alloc(64 << 10)
	defer blockdev.Free(buf)
	rng := rand.New(rand.NewSource(7))
	slots := d.Info().Size / int64(len(buf))
	write := func(slot int64, h placement.Handle) {
		if err := blockdev.WriteAt(d, buf, slot*int64(len(buf)), h); err != nil {
			t.Fatal(err)
		}
		written += int64(len(buf))
	}
	for slot := int64(0); slot < slots; slot++ {
		write(slot, 0)
	}
	for i := 0; i < int(2*slots); i++ {
		if rng.Intn(4) == 0 {
			write(rng.Int63n(slots), 0)
		} else {
			write(rng.Int63n(slots/8), 1)
		}
	}
	if err := d.Deallocate([]blockdev.Range{{Off: 0, Len: 4 << 20}}); err != nil {
		t.Fatal(err)
	}
	var h, j bytes.Buffer
	if err := runFDPStatus(context.Background(), &h, &devices.Admin{Transport: o.FDP.Transport()}, dev, false, 0, 0, 5); err != nil {
		t.Fatal(err)
	}
	if err := runFDPStatus(context.Background(), &j, &devices.Admin{Transport: o.FDP.Transport()}, dev, true, 0, 0, 5); err != nil {
		t.Fatal(err)
	}
	return written, h.String(), j.String()
}

func num(t *testing.T, m map[string]any, path ...string) float64 {
	t.Helper()
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%v: not an object at %s", path, p)
		}
		v = mm[p]
	}
	f, ok := v.(float64)
	if !ok {
		t.Fatalf("%v = %v, not a number", path, v)
	}
	return f
}

func TestFDPStatusBeforeAfterWorkload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fdp.img")
	dev := "emu:" + path + "?size=64M&ru=1M&ruhs=4&op=0.25"
	if _, err := emu.Create(dev); err != nil { // fdp-status only reads: it creates nothing
		t.Fatal(err)
	}

	before := mustFDPCLI(t, "fdp-status", dev)
	t.Logf("fdp-status before:\n%s", before)
	for _, want := range []string{"supported, enabled", "4 reclaim unit handles", "RU nominal size 1.00 MiB", "nothing written yet", "Initially Isolated"} {
		if !strings.Contains(before, want) {
			t.Errorf("before: missing %q", want)
		}
	}
	jb := fdpStatusJSON(t, "emu:"+path)
	if num(t, jb, "stats", "hbmw") != 0 || jb["fdp_enabled"] != true || num(t, jb, "status", "nruhsd") != 4 || jb["stats_modelled"] != true {
		t.Errorf("before JSON: %v", jb)
	}

	written, live, liveJSON := fdpWorkload(t, "emu:"+path)
	t.Logf("fdp-status after %d MiB of writes (live controller):\n%s", written>>20, live)
	t.Logf("fdp-status --json after (live controller):\n%s", liveJSON)
	var jl map[string]any
	if err := json.Unmarshal([]byte(liveJSON), &jl); err != nil {
		t.Fatal(err)
	}
	if num(t, jl, "emulator", "gc_runs") == 0 || num(t, jl, "emulator", "relocated_bytes") != num(t, jl, "stats", "mbmw")-num(t, jl, "stats", "hbmw") {
		t.Errorf("emulator model section: %v", jl["emulator"])
	}
	if !strings.Contains(live, "RU written") || num(t, jl, "status", "nruhsd") != 4 {
		t.Errorf("live status: %v", jl["status"])
	}

	// A new process (here: a new command) sees the counters the workload left.
	after := mustFDPCLI(t, "fdp-status", "emu:"+path)
	ja := fdpStatusJSON(t, "emu:"+path)
	if num(t, ja, "stats", "hbmw") != num(t, jl, "stats", "hbmw") || num(t, ja, "stats", "mbmw") != num(t, jl, "stats", "mbmw") {
		t.Errorf("counters not carried over: %v vs %v\n%s", ja["stats"], jl["stats"], after)
	}
	hbmw, mbmw, waf := num(t, ja, "stats", "hbmw"), num(t, ja, "stats", "mbmw"), num(t, ja, "waf")
	if hbmw != float64(written) {
		t.Errorf("HBMW %v, want %d", hbmw, written)
	}
	if mbmw <= hbmw || waf <= 1 || waf != mbmw/hbmw {
		t.Errorf("after fill + 2x overwrite: MBMW %v HBMW %v WAF %v", mbmw, hbmw, waf)
	}
	if num(t, ja, "stats", "mbe") == 0 {
		t.Error("no erases after 2x overwrite")
	}

	// nvme-cli shaped sub-commands.
	var st map[string]any
	if err := json.Unmarshal([]byte(mustFDPCLI(t, "fdp", "stats", "emu:"+path, "-o", "json")), &st); err != nil || len(st) != 3 || num(t, st, "hbmw") != hbmw {
		t.Errorf("fdp stats json %v %v", st, err)
	}
	if raw := mustFDPCLI(t, "fdp", "stats", "emu:"+path, "-b"); len(raw) != 64 {
		t.Errorf("raw stats %d bytes", len(raw))
	}
	if out := mustFDPCLI(t, "fdp", "stats", "emu:"+path); !strings.Contains(out, "Host Bytes with Metadata Written (HBMW): ") {
		t.Errorf("stats normal: %s", out)
	}
	var cfg fdp.ConfigsJSON
	if err := json.Unmarshal([]byte(mustFDPCLI(t, "fdp", "configs", "emu:"+path, "-e", "1", "-o", "json")), &cfg); err != nil ||
		cfg.N != 0 || len(cfg.Configs) != 1 || cfg.Configs[0].NRUH != 4 || cfg.Configs[0].RUNS != 1<<20 || cfg.Configs[0].FDPA != 0x80 {
		t.Errorf("configs json %+v %v", cfg, err)
	}
	if out := mustFDPCLI(t, "fdp", "configs", "emu:"+path, "-H"); !strings.Contains(out, "Reclaim Unit Nominal Size: 1048576") || !strings.Contains(out, "  [3]: Initially Isolated") {
		t.Errorf("configs normal: %s", out)
	}
	if out := mustFDPCLI(t, "fdp", "usage", "emu:"+path); !strings.Contains(out, "Reclaim Unit Handle 3 Attributes: 0x1 (Host Specified)") {
		t.Errorf("usage: %s", out)
	}

	// update needs --yes; afterwards PID 1 starts a fresh RU (256 blocks of 4 KiB).
	if _, err := runFDPCLI(t, "fdp", "update", "emu:"+path, "-p", "1"); err == nil || !strings.Contains(err.Error(), "--yes") {
		t.Errorf("update without --yes: %v", err)
	}
	if _, err := runFDPCLI(t, "fdp", "update", "emu:"+path, "-p", "9", "--yes"); err == nil || !strings.Contains(err.Error(), "its PIDs are 0,1,2,3") {
		t.Errorf("update of PID 9: %v", err)
	}
	if out := mustFDPCLI(t, "fdp", "update", "emu:"+path, "-p", "1", "--yes"); out != "update: Success\n" {
		t.Errorf("update: %q", out)
	}
	var rs fdp.StatusJSON
	if err := json.Unmarshal([]byte(mustFDPCLI(t, "fdp", "status", "emu:"+path, "-o", "json")), &rs); err != nil || rs.NRUHSD != 4 || rs.RUHSs[1].PID != 1 || rs.RUHSs[1].RUAMW != 256 {
		t.Errorf("status after update %+v %v", rs, err)
	}
	if out := mustFDPCLI(t, "fdp", "status", "emu:"+path); !strings.Contains(out, "Placement Identifier 1; Reclaim Unit Handle Identifier 1\n  Estimated Active Reclaim Unit Time Remaining (EARUTR): 0\n  Reclaim Unit Available Media Writes (RUAMW): 256\n") {
		t.Errorf("status normal: %s", out)
	}

	// set-events and events.
	if out := mustFDPCLI(t, "fdp", "set-events", "emu:"+path, "-p", "0", "-t", "0,3", "-e", "--yes"); out != "set-events: Success\n" {
		t.Errorf("set-events: %q", out)
	}
	var ev fdp.EventsJSON
	if err := json.Unmarshal([]byte(mustFDPCLI(t, "fdp", "events", "emu:"+path, "-E", "-o", "json")), &ev); err != nil || ev.N != len(ev.Events) {
		t.Errorf("events json %+v %v", ev, err)
	}

	// Disabling FDP: status exits 2 with a hint, fdp-status says DISABLED; re-enable.
	if out := mustFDPCLI(t, "fdp", "feature", "emu:"+path); !strings.Contains(out, "Flexible Direct Placement Enable (FDPE)       : Yes") {
		t.Errorf("feature: %s", out)
	}
	if _, err := runFDPCLI(t, "fdp", "feature", "emu:"+path, "-d"); err == nil {
		t.Error("disable without --yes accepted")
	}
	if out := mustFDPCLI(t, "fdp", "feature", "emu:"+path, "-d", "--yes"); !strings.Contains(out, "Success disabling Endurance Group: 1") {
		t.Errorf("disable: %s", out)
	}
	_, err := runFDPCLI(t, "fdp", "status", "emu:"+path)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != exitNoFDP || !strings.Contains(err.Error(), "disabled") {
		t.Errorf("status with FDP disabled: %v", err)
	}
	// Not an NVMe device at all: no FDP either (exit 2), for every fdp command.
	plain := filepath.Join(t.TempDir(), "plain.img")
	if err := os.WriteFile(plain, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"fdp", "update", plain, "--pids", "0", "--yes"}, {"fdp-status", plain}, {"fdp", "configs", plain}} {
		if _, err := runFDPCLI(t, args...); !errors.As(err, &ee) || ee.Code != exitNoFDP {
			t.Errorf("%v on a regular file: %v, want exit %d", args, err, exitNoFDP)
		}
	}
	// fdp-status prints its screen and exits 2 (docs/cli.md, docs/fdp.md), JSON too.
	for _, args := range [][]string{{"fdp-status", "emu:" + path}, {"fdp-status", "--json", "emu:" + path}} {
		out, err := runFDPCLI(t, args...)
		if !errors.As(err, &ee) || ee.Code != exitNoFDP || !strings.Contains(err.Error(), "fdp feature") {
			t.Errorf("%v with FDP disabled: %v", args, err)
		}
		if !strings.Contains(out, "DISABLED") && !strings.Contains(out, `"fdp_enabled": false`) {
			t.Errorf("%v disabled: %s", args, out)
		}
	}
	mustFDPCLI(t, "fdp", "feature", "emu:"+path, "-c", "0", "--yes")
	if m := fdpStatusJSON(t, "emu:"+path); m["fdp_enabled"] != true {
		t.Error("not re-enabled")
	}
}

func TestFDPStatusWatch(t *testing.T) {
	out := mustFDPCLI(t, "fdp-status", "emu:mem?size=32M&ru=1M&ruhs=2", "--json", "--watch", "1ms", "--count", "2")
	// JSON Lines: each line a whole document.
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want one document a refresh:\n%s", len(lines), out)
	}
	var a, b devices.FDPStatus
	if err := json.Unmarshal([]byte(lines[0]), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &b); err != nil {
		t.Fatal(err)
	}
	if a.Interval != nil || b.Interval == nil || b.Interval.Seconds <= 0 {
		t.Errorf("intervals %+v %+v", a.Interval, b.Interval)
	}
}

// noFDPCtrl is a controller without FDP, as QEMU 7.2 emulates.
type noFDPCtrl struct{ n int }

func (c *noFDPCtrl) Admin(cmd *nvme.Command) nvme.Completion {
	c.n++
	if cmd.Opcode == nvme.OpIdentify {
		id := nvme.ControllerData{ModelNumber: "QEMU NVMe Ctrl"}
		_ = id.Encode(cmd.Data)
		return nvme.Completion{}
	}
	return nvme.Completion{Status: 0x4002}
}
func (c *noFDPCtrl) IO(cmds []nvme.Command, done []nvme.Completion) {
	c.n += len(cmds)
	for i := range done {
		done[i].Status = 0x4001
	}
}
func (c *noFDPCtrl) NSID() uint32 { return 1 }
func (c *noFDPCtrl) Close() error { return nil }

func TestFDPNotSupportedMessage(t *testing.T) {
	c := &noFDPCtrl{}
	var out bytes.Buffer
	err := runFDPStatus(context.Background(), &out, &devices.Admin{Transport: c}, "/dev/ng0n1", false, 0, 0, 5)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != exitNoFDP || !errors.Is(err, fdp.ErrFDPNotSupported) {
		t.Fatalf("err %v", err)
	}
	if want := "/dev/ng0n1: FDP not supported by QEMU NVMe Ctrl: CTRATT bit 19 clear"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	if c.n != 1 || out.Len() != 0 {
		t.Errorf("%d commands sent, output %q", c.n, out.String())
	}
	// A missing device path is an error naming it, not a panic.
	if _, err := runFDPCLI(t, "fdp-status", "/nonexistent/ng9n1"); err == nil {
		t.Error("missing device accepted")
	}
}

// An empty events log says so in the normal output (nvme-cli prints nothing at all), and
// keeps nvme-cli's empty document in JSON.
func TestFDPEventsEmpty(t *testing.T) {
	dev := "emu:mem?size=32M&ru=1M"
	if out := mustFDPCLI(t, "fdp", "events", dev); out != "No controller events in the FDP events log of endurance group 1\n" {
		t.Errorf("fdp events: %q", out)
	}
	if out := mustFDPCLI(t, "fdp", "events", dev, "-E"); !strings.HasPrefix(out, "No host events") {
		t.Errorf("fdp events -E: %q", out)
	}
	for _, args := range [][]string{{"--json"}, {"-o", "json"}} {
		out := mustFDPCLI(t, append([]string{"fdp", "events", dev}, args...)...)
		var ev map[string]json.RawMessage
		if err := json.Unmarshal([]byte(out), &ev); err != nil || string(ev["n"]) != "0" || string(ev["events"]) != "[]" {
			t.Errorf("fdp events %v: %v %q", args, err, out)
		}
	}
}
