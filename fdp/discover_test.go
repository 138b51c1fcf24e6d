package fdp

import (
	"errors"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/nvme"
)

// noFDP is a controller without FDP (like QEMU 7.2's): it answers Identify and records
// every command it is sent.
type noFDP struct{ sent []uint8 }

func (n *noFDP) Admin(c *nvme.Command) nvme.Completion {
	n.sent = append(n.sent, c.Opcode)
	if c.Opcode == nvme.OpIdentify && uint8(c.CDW10) == nvme.CNSController {
		id := nvme.ControllerData{ModelNumber: "QEMU NVMe Ctrl", SerialNumber: "deadbeef", ONCS: nvme.ONCSDSM}
		_ = id.Encode(c.Data)
		return nvme.Completion{}
	}
	return nvme.Completion{Status: 0x4002}
}

func (n *noFDP) IO(cmds []nvme.Command, done []nvme.Completion) {
	for i := range cmds {
		n.sent = append(n.sent, cmds[i].Opcode)
		done[i] = nvme.Completion{Status: 0x4001}
	}
}
func (n *noFDP) NSID() uint32 { return 1 }
func (n *noFDP) Close() error { return nil }

func TestDiscoverNotSupported(t *testing.T) {
	tr := &noFDP{}
	d, err := Discover(tr)
	if !errors.Is(err, ErrFDPNotSupported) || !IsNotSupported(err) {
		t.Fatalf("err %v", err)
	}
	if want := "FDP not supported by QEMU NVMe Ctrl: CTRATT bit 19 clear"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	if d == nil || d.Supported || d.Model != "QEMU NVMe Ctrl" {
		t.Errorf("discovery %+v", d)
	}
	if len(tr.sent) != 1 || tr.sent[0] != nvme.OpIdentify {
		t.Errorf("sent %v; only Identify may reach a device without FDP", tr.sent)
	}
	if pids, err := PlacementIDs(tr); err != nil || pids != nil {
		t.Errorf("PlacementIDs %v %v", pids, err)
	}
	if _, err := CheckSupported(tr); !strings.Contains(err.Error(), "CTRATT bit 19 clear") {
		t.Errorf("CheckSupported %v", err)
	}
}
