package safety

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/internal/sys"
	"github.com/rbctl/rbctl/nvme"
)

var ngName = regexp.MustCompile(`^ng([0-9]+)n([0-9]+)$`)

// isNVMeGeneric reports whether path names an NVMe generic char device (/dev/ngXnY).
func isNVMeGeneric(path string) bool { return ngName.MatchString(filepath.Base(path)) }

// NGBlockDevice returns the block device (/dev/nvmeXnY) through which the block layer
// reaches the namespace of the NVMe generic char device ng (/dev/ngXnY): that is what gets
// mounted, so the checks and the exclusive claim for ng apply to it. It returns "" when the
// namespace has no block device (the block layer cannot drive its format; nothing can be
// mounted on it), and an error when sysfs does not say.
func NGBlockDevice(ng string) (string, error) {
	name, _, err := system.ngBlock(ng)
	if name == "" {
		return "", err
	}
	return filepath.Join(system.dev, name), err
}

// ngBlock resolves ngCnN through sysfs: /sys/class/nvme-generic/ngCnN/device is the
// device the namespace hangs off — the controller nvmeC, or with native multipath the
// subsystem — and that directory holds the namespace's disk: nvmeCnN itself (no multipath,
// or the multipath head), or the hidden per-path disk nvmeScCnN whose head is nvmeSnN.
// It returns the disk name and its "major:minor".
func (h host) ngBlock(ng string) (name, dev string, err error) {
	base := filepath.Base(ng)
	m := ngName.FindStringSubmatch(base)
	if m == nil {
		return "", "", fmt.Errorf("%s is not an NVMe generic device name (ngXnY)", ng)
	}
	ctl, ns := m[1], m[2]
	class := filepath.Join(h.sys, "class", "nvme-generic", base)
	parent, err := filepath.EvalSymlinks(filepath.Join(class, "device"))
	if err != nil {
		return "", "", fmt.Errorf("%s: not found in %s, so its block device cannot be checked: %w", ng, filepath.Dir(class), err)
	}
	ents, err := os.ReadDir(parent)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", ng, err)
	}
	perPath := regexp.MustCompile(`^nvme([0-9]+)c` + ctl + `n` + ns + `$`)
	for _, e := range ents {
		if n := e.Name(); n == "nvme"+ctl+"n"+ns {
			name = n
		} else if sm := perPath.FindStringSubmatch(n); sm != nil {
			name = "nvme" + sm[1] + "n" + ns
		} else {
			continue
		}
		break
	}
	if name == "" {
		return "", "", nil
	}
	b, err := sys.ReadFileBounded(filepath.Join(h.sys, "class", "block", name, "dev"), 64)
	if err != nil {
		return "", "", fmt.Errorf("%s: its block device %s: %w", ng, name, err)
	}
	return name, strings.TrimSpace(string(b)), nil
}

// gateNVMeGeneric is the gate for /dev/ngXnY: the in-use checks and the signatures of its
// namespace, read through the block device when there is one, else through passthrough.
func (h host) gateNVMeGeneric(a Action, ng string, signatures bool) error {
	name, dev, err := h.ngBlock(ng)
	if err != nil {
		return err
	}
	if name != "" {
		blk := filepath.Join(h.dev, name)
		if u := h.blockInUse(blk, dev); u != "" {
			u = strings.TrimPrefix(u, "it is ")
			return refuse(ErrInUse, "%s: its namespace's block device %s is %s; %s", a.refusing(ng), blk, u, unuseHint(u))
		}
		if !signatures {
			return nil
		}
		return h.gateSignatures(a, ng, ng, blk)
	}
	if !signatures {
		return nil // no block device: nothing can be mounted on it
	}
	t, err := nvme.Open(ng, nvme.OpenOptions{})
	if err != nil {
		return fmt.Errorf("%s: cannot read it to check for existing data: %w", ng, err)
	}
	d, err := nvme.NewDevice(t, nvme.DeviceOptions{Path: ng, ReadOnly: true})
	if err != nil {
		t.Close()
		return fmt.Errorf("%s: cannot read it to check for existing data: %w", ng, err)
	}
	defer d.Close()
	return refuseSignatures(a, ng, ng, deviceReader{d}, d.Info().Size)
}

// deviceReader reads any blockdev.Device as an io.ReaderAt, in aligned blocks.
type deviceReader struct{ d blockdev.Device }

func (r deviceReader) ReadAt(p []byte, off int64) (int, error) {
	info := r.d.Info()
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	if off >= info.Size {
		return 0, io.EOF
	}
	lb := int64(max(info.LogicalBlock, 512))
	start := off / lb * lb
	end := min((off+int64(len(p))+lb-1)/lb*lb, info.Size)
	buf, err := blockdev.Alloc(int(end - start))
	if err != nil {
		return 0, err
	}
	defer blockdev.Free(buf)
	if err := blockdev.ReadAt(r.d, buf, start); err != nil {
		return 0, err
	}
	n := copy(p, buf[off-start:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
