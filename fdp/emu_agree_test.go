package fdp_test

import (
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/nvme"
)

// TestEmuPassesTheQEMUChecks runs the checks the VM test makes of QEMU 10's FDP device
// (kernel_test.go) on rbctl's emulated SSD, with one and two reclaim groups: the two
// devices must agree wherever the spec decides (docs/fdp.md, "QEMU against the emulator").
// The emulator is held to the stricter form where QEMU has a quirk: MBMW equals HBMW on a
// device that has not garbage-collected.
func TestEmuPassesTheQEMUChecks(t *testing.T) {
	for _, tc := range []struct {
		spec      string
		nrg, nruh uint64
		runs      uint64
	}{
		{"emu:mem?size=512M&ru=4M&ruhs=8&rg=1&op=0.5&lba=512", 1, 8, 4 << 20},
		{"emu:mem?size=512M&ru=4M&ruhs=8&rg=2&op=0.5&lba=4096", 2, 8, 4 << 20},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			c, err := emu.Open(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			d, err := fdp.Discover(c)
			if err != nil {
				t.Fatal(err)
			}
			checkFDPConfig(t, d, tc.nrg, tc.nruh, tc.runs)
			testWritesMoveRUAMW(t, c, d, true)
			testUpdateResets(t, c, d)
			// Every PID in one update: valid (NPID up to MAXPIDS+1), refused by QEMU.
			if err := fdp.UpdateRUH(c, d.NSID, d.PIDs); err != nil {
				t.Errorf("RUH update of all %d PIDs: %v", len(d.PIDs), err)
			}
			testInvalidPID(t, c, d, true)
		})
	}
}

// testInvalidPID writes with a PID the namespace does not have. The spec's answer (host
// event 03h Invalid Placement Identifier exists because such a write is not failed): the
// write succeeds on the default placement — placement handle 0, in a reclaim group the
// controller chooses (QEMU: group 0; the emulator stripes over groups as for unplaced
// writes) — and, with the event enabled, an Invalid PID host event names the PID. QEMU 10
// places it the same way but logs no event (event: false).
func testInvalidPID(t *testing.T, tr nvme.Transport, d *fdp.Discovery, event bool) {
	t.Helper()
	if err := fdp.SetEventEnables(tr, d.NSID, 0, []fdp.EventType{fdp.EventInvalidPID}, true, false); err != nil {
		t.Fatalf("enable the Invalid PID event on handle 0: %v", err)
	}
	bad := uint16(d.Config.NRUH) // one past the last handle of group 0
	if d.Config.NRG > 1 {
		bad = uint16(1<<(16-d.Config.RGIF())) - 1 // largest handle number, group 0
	}
	dev, err := nvme.NewDevice(tr, nvme.DeviceOptions{PIDs: append([]uint16{bad}, d.PIDs...), KeepTransport: true})
	if err != nil {
		t.Fatal(err)
	}
	buf, err := blockdev.Alloc(64 << 10)
	if err != nil {
		t.Fatal(err)
	}
	defer blockdev.Free(buf)
	before, _, err := fdp.ReadRUHStatus(tr, d.NSID)
	if err != nil {
		t.Fatal(err)
	}
	ev0, _, err := fdp.ReadEvents(tr, d.EnduranceGroup, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := blockdev.WriteAt(dev, buf, 224<<20, 0); err != nil { // handle 0 of dev = the bad PID
		t.Fatalf("write with invalid PID %#x: %v (the spec does not fail it)", bad, err)
	}
	after, _, err := fdp.ReadRUHStatus(tr, d.NSID)
	if err != nil {
		t.Fatal(err)
	}
	bs, ru := uint64(d.BlockSize), d.Config.RUNS/uint64(d.BlockSize)
	var onPH0 uint64
	for i := range after.Descs {
		b, a := before.Descs[i].RUAMW, after.Descs[i].RUAMW
		moved := b - a
		if a > b {
			moved = b + ru - a // the unit filled; a fresh one began
		}
		if _, ph := fdp.SplitPID(d.PIDs[i], d.Config.RGIF()); ph == 0 {
			onPH0 += moved
		} else if moved != 0 {
			t.Errorf("invalid PID %#x moved handle %d (PID %#x) by %d blocks", bad, i, d.PIDs[i], moved)
		}
	}
	if onPH0 != uint64(len(buf))/bs {
		t.Errorf("invalid PID %#x: placement handle 0 took %d blocks, the write had %d", bad, onPH0, uint64(len(buf))/bs)
	}
	ev1, _, err := fdp.ReadEvents(tr, d.EnduranceGroup, true)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range ev1.Events[min(len(ev0.Events), len(ev1.Events)):] {
		found = found || e.Type == fdp.EventInvalidPID && e.PID == bad
	}
	if len(ev1.Events) == len(ev0.Events) && len(ev1.Events) == fdp.MaxEvents {
		t.Logf("events log full: cannot tell new events")
		return
	}
	switch {
	case event && !found:
		t.Errorf("no Invalid PID event for PID %#x (events %d -> %d)", bad, len(ev0.Events), len(ev1.Events))
	case !event:
		t.Logf("invalid PID %#x: placed on handle 0; Invalid PID event logged: %v", bad, found)
	}
}
