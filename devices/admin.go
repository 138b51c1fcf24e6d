package devices

import (
	"fmt"

	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/fdp"
	"github.com/rbctl/rbctl/nvme"
)

// AdminOptions choose how OpenAdmin reaches a controller.
type AdminOptions struct {
	// Transport is nvme.TransportAuto (""), nvme.TransportUring or nvme.TransportIoctl;
	// checked, then ignored, for emu: (the controller is in this process).
	Transport string
	// NSID selects the namespace when DEV is a controller node (/dev/nvmeX); 0: the node's
	// namespace, or the first active one.
	NSID uint32
}

// ParseTransport checks an AdminOptions.Transport (nvme.ParseTransport): uring, ioctl, or
// "" or auto for either. It returns s.
func ParseTransport(s string) (string, error) { return nvme.ParseTransport(s) }

// Admin is a device opened for its NVMe commands only (Identify, Get Log Page, features,
// RUH status and update), without a block device: /dev/ngXnY, /dev/nvmeXnY, /dev/nvmeX
// or an emu: spec. Nothing is claimed: other programs may have the device open. The
// emulated SSD is opened read-only and must exist; a command that changes its FDP state
// gets it to itself on its first change (emu.OpenOptions.ReadOnly).
type Admin struct {
	Path      string
	Transport nvme.Transport
	Emu       *emu.Controller // emu: only
}

// OpenAdmin opens path for NVMe admin commands. Errors name path and, for a path that is
// not NVMe, wrap nvme.ErrNotNVMe.
func OpenAdmin(path string, opt AdminOptions) (*Admin, error) {
	if path == "" {
		return nil, fmt.Errorf("no device path given")
	}
	if _, err := ParseTransport(opt.Transport); err != nil {
		return nil, err // refused whatever the device, an emulated one (which has no transport) too
	}
	if emu.IsSpec(path) {
		c, err := emu.OpenWith(path, emu.OpenOptions{ReadOnly: true})
		if err != nil {
			return nil, err
		}
		return &Admin{Path: path, Transport: c, Emu: c}, nil
	}
	t, err := nvme.Open(path, nvme.OpenOptions{Transport: opt.Transport, NSID: opt.NSID})
	if err != nil {
		return nil, err
	}
	return &Admin{Path: path, Transport: t}, nil
}

// Close closes the transport.
func (a *Admin) Close() error { return a.Transport.Close() }

// CheckFDP reads Identify Controller and fails, with an error wrapping
// fdp.ErrFDPNotSupported, when CTRATT bit 19 is clear: nothing else is then sent to a
// controller without FDP.
func (a *Admin) CheckFDP() error {
	_, err := fdp.CheckSupported(a.Transport)
	if err != nil {
		return fmt.Errorf("%s: %w", a.Path, err)
	}
	return nil
}

// EnduranceGroup is endgid, or when it is 0 the endurance group of the device's namespace.
func (a *Admin) EnduranceGroup(endgid uint16) (uint16, error) {
	if endgid != 0 {
		return endgid, nil
	}
	return fdp.EnduranceGroup(a.Transport, 0)
}

// FDP discovers the device's FDP state (after CheckFDP's Identify) and returns its view;
// FDP disabled is an error wrapping nvme.ErrFDPDisabled.
func (a *Admin) FDP() (*FDP, error) {
	f, err := NewFDP(a.Transport)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.Path, err)
	}
	return f, nil
}

// Identify is `rbctl identify`: where the device is, how it is reached, what Identify says
// (nvme-cli's field names) and, on a block device, its kernel write streams.
type Identify struct {
	Device    string `json:"device"`
	Transport string `json:"transport,omitempty"`
	nvme.Identity
	// WriteStreams: the kernel's write streams on a block device (/dev/nvmeXnY) only.
	WriteStreams *WriteStreams `json:"write_streams,omitempty"`
}

// Identify sends Identify Controller and Identify Namespace.
func (a *Admin) Identify() (*Identify, error) {
	ns, err := nvme.Probe(a.Transport)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.Path, err)
	}
	return &Identify{Device: a.Path, Transport: nvme.TransportName(a.Transport), Identity: nvme.IdentityOf(ns),
		WriteStreams: WriteStreamsOf(a.Path)}, nil
}

// Rows is the summary a person reads, as {field, value} rows.
func (j *Identify) Rows() [][]string {
	rows := append([][]string{{"device", j.Device}}, j.Identity.Rows()...)
	if j.Transport != "" {
		rows = append(rows, []string{"transport", j.Transport})
	}
	if j.WriteStreams != nil {
		rows = append(rows, []string{"write streams", j.WriteStreams.String()})
	}
	return rows
}

// Feature reads the FDP feature of endurance group endgid (0: the namespace's) and says
// which group that was.
func (a *Admin) Feature(endgid uint16) (uint16, fdp.FeatureState, error) {
	eg, err := a.EnduranceGroup(endgid)
	if err != nil {
		return 0, fdp.FeatureState{}, err
	}
	f, err := fdp.GetFeature(a.Transport, eg)
	return eg, f, err
}

// SetFDP enables FDP with configuration cidx, or disables it, in endurance group endgid
// (0: the namespace's), saved across power cycles as nvme-cli sets it.
func (a *Admin) SetFDP(endgid uint16, enable bool, cidx uint8) (uint16, fdp.FeatureState, error) {
	f := fdp.FeatureState{Enabled: enable, ConfigIndex: cidx}
	eg, err := a.EnduranceGroup(endgid)
	if err == nil {
		err = fdp.SetFeature(a.Transport, eg, f, true)
	}
	return eg, f, err
}
