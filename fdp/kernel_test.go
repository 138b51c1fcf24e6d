package fdp_test

import (
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/nvme"
)

// counting counts the commands that reach a real device.
type counting struct {
	nvme.Transport
	n atomic.Int64
}

func (c *counting) Admin(cmd *nvme.Command) nvme.Completion {
	c.n.Add(1)
	return c.Transport.Admin(cmd)
}

func (c *counting) IO(cmds []nvme.Command, done []nvme.Completion) {
	c.n.Add(int64(len(cmds)))
	c.Transport.IO(cmds, done)
}

// TestKernelDiscover runs discovery on the NVMe namespace the VM test gives
// (RBCTL_TEST_NVME_NS, e.g. /dev/ng0n1). QEMU 7.2 has no FDP: discovery must say so after
// Identify Controller alone. A device with FDP must give a consistent PID table.
func TestKernelDiscover(t *testing.T) {
	path := os.Getenv("RBCTL_TEST_NVME_NS")
	if path == "" {
		t.Skip("RBCTL_TEST_NVME_NS not set: runs inside the QEMU VM test (scripts/vmtest)")
	}
	tr, err := nvme.Open(path, nvme.OpenOptions{})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer tr.Close()
	ctrl, err := nvme.ReadController(tr)
	if err != nil {
		t.Fatal(err)
	}
	c := &counting{Transport: tr}
	d, err := fdp.Discover(c)
	if !ctrl.FDPSupported() {
		if !errors.Is(err, fdp.ErrFDPNotSupported) || !strings.Contains(err.Error(), "CTRATT bit 19 clear") || !strings.Contains(err.Error(), ctrl.ModelNumber) {
			t.Fatalf("discover on %s (%s): %v", path, ctrl.ModelNumber, err)
		}
		if n := c.n.Load(); n != 1 {
			t.Errorf("%d commands sent to a device without FDP, want 1 (Identify)", n)
		}
		return
	}
	if err != nil {
		t.Fatalf("discover on an FDP device: %v", err)
	}
	if d.Feature.Enabled && (d.Status == nil || len(d.PIDs) != len(d.Status.Descs)) {
		t.Errorf("discovery %+v", d)
	}
}
