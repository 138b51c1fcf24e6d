package devices

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/devices/safety"
	"github.com/rbctl/rbctl/nvme"
)

var ngName = regexp.MustCompile(`^ng[0-9]+n[0-9]+$`)

// isNVMeGeneric reports whether path names an NVMe generic char device (/dev/ngXnY), which
// only the passthrough engine can drive.
func isNVMeGeneric(path string) bool { return ngName.MatchString(filepath.Base(path)) }

// openPassthru opens an NVMe namespace (/dev/ngXnY, /dev/nvmeXnY) with the NVMe passthrough
// engine: io_uring URING_CMD when available, else the ioctls. On an FDP namespace the
// placement handles map to the PIDs of its RUH status (fdp.Discover, once); without FDP
// writes carry no directive.
func openPassthru(path string, opt Options) (*Opened, error) {
	claims, err := claimNamespace(path, opt)
	if err != nil {
		return nil, err
	}
	release := func() {
		for _, f := range claims {
			f.Close()
		}
	}
	t, err := nvme.Open(path, nvme.OpenOptions{QueueDepth: opt.QueueDepth})
	if err != nil {
		release()
		return nil, err
	}
	o, err := overTransport(t, path, blockdev.KindNVMeChar, opt, release)
	if err != nil {
		return nil, err
	}
	if len(claims) > 0 {
		o.Block = &ClaimedDevice{Device: o.Block.(*nvme.Device), claims: claims}
	}
	return o, nil
}

// ClaimedDevice is a passthrough device together with the claims that keep other writers
// off its namespace (claimNamespace); Close releases them after the device. Every method
// of *nvme.Device (Transport, Namespace, RegisterBuffers, ...) is promoted.
type ClaimedDevice struct {
	*nvme.Device
	claims []*os.File
}

// Close implements blockdev.Device.
func (d *ClaimedDevice) Close() error {
	err := d.Device.Close()
	for _, f := range d.claims {
		f.Close()
	}
	d.claims = nil
	return err
}

// claimNamespace takes, for the life of a passthrough device, what makes it the only
// writer of its namespace: a flock on the node itself (exclusive to write, shared to read),
// and for a writer an O_EXCL open of the namespace's block device — /dev/nvmeXnY itself,
// or the block device of /dev/ngXnY (safety.NGBlockDevice) — which the kernel refuses
// while it is mounted or held, and which every other exclusive opener then sees.
func claimNamespace(path string, opt Options) ([]*os.File, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	var claims []*os.File
	fail := func(err error) ([]*os.File, error) {
		for _, f := range claims {
			f.Close()
		}
		return nil, err
	}
	blk := ""
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		f, err := os.OpenFile(path, os.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		claims = append(claims, f)
		if err := blockdev.LockFD(int(f.Fd()), path, !opt.ReadOnly); err != nil {
			return fail(err)
		}
		if isNVMeGeneric(path) && !opt.ReadOnly && opt.Exclusive {
			if blk, err = safety.NGBlockDevice(path); err != nil {
				return fail(err)
			}
		}
	case unix.S_IFBLK:
		if !opt.ReadOnly && opt.Exclusive {
			blk = path
		}
	}
	if blk == "" {
		return claims, nil
	}
	f, err := os.OpenFile(blk, os.O_RDONLY|unix.O_EXCL|unix.O_CLOEXEC, 0)
	if err != nil {
		how := "busy (mounted, or held by another program)"
		if u := safety.InUse(blk); u != "" {
			how = strings.TrimPrefix(u, "it is ")
		}
		if blk == path {
			return fail(fmt.Errorf("open %s: the device is %s: %w", path, how, err))
		}
		return fail(fmt.Errorf("open %s: its namespace's block device %s is %s: %w", path, blk, how, err))
	}
	return append(claims, f), nil
}
