package fdp_test

import (
	"bytes"
	"testing"

	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/nvme"
)

// recorder passes commands to the emulated SSD and keeps a copy of each.
type recorder struct {
	*emu.Controller
	cmds []nvme.Command
}

func (r *recorder) keep(c *nvme.Command) {
	k := *c
	k.Data = append([]byte(nil), c.Data...)
	r.cmds = append(r.cmds, k)
}

func (r *recorder) Admin(c *nvme.Command) nvme.Completion {
	r.keep(c)
	return r.Controller.Admin(c)
}

func (r *recorder) IO(cmds []nvme.Command, done []nvme.Completion) {
	for i := range cmds {
		r.keep(&cmds[i])
	}
	r.Controller.IO(cmds, done)
}

// TestCommandGolden checks the dwords of every FDP command against the encodings nvme-cli
// (libnvme) and fio send (nvme-fdp-reference §2.2).
func TestCommandGolden(t *testing.T) {
	c, err := emu.Open("emu:mem?size=16M&ru=1M&ruhs=2&op=0.5")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	type dw struct {
		op                         uint8
		nsid                       uint32
		cdw10, cdw11, cdw12, cdw14 uint32
		data                       []byte // nil: not checked
		dataLen                    int
	}
	cases := []struct {
		name string
		run  func(t nvme.Transport) error
		want []dw
	}{
		{"stats", func(t nvme.Transport) error { _, _, err := fdp.ReadStats(t, 1); return err },
			[]dw{{op: 0x02, cdw10: 0x000F0022, cdw11: 0x00010000, dataLen: 64}}},
		{"host events", func(t nvme.Transport) error { _, _, err := fdp.ReadEvents(t, 1, true); return err },
			[]dw{{op: 0x02, cdw10: 0x03FF0123, cdw11: 0x00010000, dataLen: 4096}}},
		{"controller events", func(t nvme.Transport) error { _, _, err := fdp.ReadEvents(t, 1, false); return err },
			[]dw{{op: 0x02, cdw10: 0x03FF0023, cdw11: 0x00010000, dataLen: 4096}}},
		{"configs", func(t nvme.Transport) error { _, _, err := fdp.ReadConfigs(t, 1); return err },
			[]dw{{op: 0x02, cdw10: 0x00030020, cdw11: 0x00010000, dataLen: 16}, {op: 0x02, cdw10: 0x00150020, cdw11: 0x00010000, dataLen: 88}}},
		{"usage", func(t nvme.Transport) error { _, _, err := fdp.ReadUsage(t, 1); return err },
			[]dw{{op: 0x02, cdw10: 0x00010021, cdw11: 0x00010000, dataLen: 8}, {op: 0x02, cdw10: 0x00050021, cdw11: 0x00010000, dataLen: 24}}},
		{"ruh status", func(t nvme.Transport) error { _, _, err := fdp.ReadRUHStatus(t, 0); return err },
			[]dw{{op: 0x12, nsid: 1, cdw10: 1, cdw11: 3, dataLen: 16}, {op: 0x12, nsid: 1, cdw10: 1, cdw11: 19, dataLen: 80}}},
		{"ruh update", func(t nvme.Transport) error { return fdp.UpdateRUH(t, 0, []uint16{0, 1}) },
			[]dw{{op: 0x1D, nsid: 1, cdw10: 0x00010001, data: []byte{0, 0, 1, 0}, dataLen: 4}}},
		{"get fdp feature", func(t nvme.Transport) error { _, err := fdp.GetFeature(t, 1); return err },
			[]dw{{op: 0x0A, cdw10: 0x1D, cdw11: 1}}},
		{"enable fdp", func(t nvme.Transport) error { return fdp.SetFeature(t, 1, fdp.FeatureState{Enabled: true}, true) },
			[]dw{{op: 0x09, nsid: 0xFFFFFFFF, cdw10: 0x8000001D, cdw11: 1, cdw12: 1}}},
		{"set events", func(t nvme.Transport) error {
			return fdp.SetEventEnables(t, 0, 1, []fdp.EventType{0, 3}, true, false)
		}, []dw{{op: 0x09, nsid: 1, cdw10: 0x1E, cdw11: 0x00020001, cdw12: 1, dataLen: 255}}},
	}
	for _, tc := range cases {
		r := &recorder{Controller: c}
		if err := tc.run(r); err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if len(r.cmds) != len(tc.want) {
			t.Errorf("%s: %d commands, want %d", tc.name, len(r.cmds), len(tc.want))
			continue
		}
		for i, w := range tc.want {
			g := r.cmds[i]
			got := dw{op: g.Opcode, nsid: g.NSID, cdw10: g.CDW10, cdw11: g.CDW11, cdw12: g.CDW12, cdw14: g.CDW14, dataLen: len(g.Data)}
			if w.data != nil && !bytes.Equal(g.Data, w.data) {
				t.Errorf("%s[%d]: data %x, want %x", tc.name, i, g.Data, w.data)
			}
			got.data = w.data
			if got.op != w.op || got.nsid != w.nsid || got.cdw10 != w.cdw10 || got.cdw11 != w.cdw11 || got.cdw12 != w.cdw12 || got.cdw14 != w.cdw14 || got.dataLen != w.dataLen {
				t.Errorf("%s[%d]: got %+v\n want %+v", tc.name, i, got, w)
			}
		}
	}
}
