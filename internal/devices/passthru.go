package devices

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"

	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/internal/blockdev"
	"github.com/rbctl/rbctl/nvme"
)

var ngName = regexp.MustCompile(`^ng[0-9]+n[0-9]+$`)

// isNVMeGeneric reports whether path names an NVMe generic char device (/dev/ngXnY), which
// only the passthrough engine can drive.
func isNVMeGeneric(path string) bool { return ngName.MatchString(filepath.Base(path)) }

// openPassthru opens an NVMe namespace (/dev/ngXnY, /dev/nvmeXnY) with the NVMe passthrough
// engine: io_uring URING_CMD when available, else the ioctls. On an FDP namespace the
// placement handles map to the PIDs of its RUH status (fdp.Discover); without FDP writes
// carry no directive.
func openPassthru(path string, opt Options) (blockdev.Device, error) {
	t, err := nvme.Open(path, nvme.OpenOptions{QueueDepth: opt.QueueDepth})
	if err != nil {
		return nil, err
	}
	var pids []uint16
	disc, err := fdp.Discover(t)
	switch {
	case err == nil:
		pids = disc.PIDs
	case errors.Is(err, fdp.ErrFDPNotSupported):
	default:
		t.Close()
		return nil, fmt.Errorf("%s: FDP discovery: %w", path, err)
	}
	d, err := nvme.NewDevice(t, nvme.DeviceOptions{Path: path, PIDs: pids, ReadOnly: opt.ReadOnly})
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}
