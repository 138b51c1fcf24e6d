package fdp

import (
	"errors"
	"fmt"

	"github.com/rbctl/rbctl/nvme"
)

// Discovery is what a host learns about a namespace's FDP state.
type Discovery struct {
	Model, Serial, Firmware string
	NSID                    uint32
	BlockSize               int // logical block size of the namespace (0 if unknown)

	Supported      bool   // CTRATT bit 19
	EnduranceGroup uint16 // the namespace's ENDGID
	Feature        FeatureState
	Configs        *ConfigLog
	// Config is the configuration in use (Configs.Configs[Feature.ConfigIndex]) when FDP is
	// enabled, else nil.
	Config *Config
	// Status is the namespace's RUH status when FDP is enabled, else nil.
	Status *RUHStatus
	// PIDs maps placement-handle index i (placement.Handle) to the PID of
	// the i-th RUH status descriptor, as fio's plids do. Empty when FDP is off.
	PIDs []uint16
}

// Discover finds out whether the namespace behind t has FDP and how it is set up. It only
// reads (Identify, Get Features, Get Log Page, I/O Management Receive): nothing it sends
// changes the device. A controller without FDP gives an error wrapping ErrFDPNotSupported
// ("FDP not supported by <model>: CTRATT bit 19 clear") right after Identify Controller.
// FDP supported but disabled is not an error: Feature.Enabled is false and PIDs is empty.
func Discover(t nvme.Transport) (*Discovery, error) {
	ctrl, err := nvme.ReadController(t)
	if err != nil {
		return nil, fmt.Errorf("fdp: identify controller: %w", err)
	}
	d := &Discovery{Model: ctrl.ModelNumber, Serial: ctrl.SerialNumber, Firmware: ctrl.Firmware}
	if !ctrl.FDPSupported() {
		return d, NotSupported(ctrl.ModelNumber)
	}
	d.Supported = true
	if d.NSID, err = ResolveNSID(t, 0); err != nil {
		return d, err
	}
	if d.EnduranceGroup, d.BlockSize, err = namespaceGroup(t, d.NSID); err != nil {
		return d, err
	}
	if d.Feature, err = GetFeature(t, d.EnduranceGroup); err != nil {
		return d, fmt.Errorf("fdp: get FDP feature of endurance group %d: %w", d.EnduranceGroup, err)
	}
	if d.Configs, _, err = ReadConfigs(t, d.EnduranceGroup); err != nil {
		return d, fmt.Errorf("fdp: read FDP configurations log: %w", err)
	}
	if !d.Feature.Enabled {
		return d, nil
	}
	if i := int(d.Feature.ConfigIndex); i < len(d.Configs.Configs) {
		d.Config = &d.Configs.Configs[i]
	}
	if d.Status, _, err = ReadRUHStatus(t, d.NSID); err != nil {
		return d, fmt.Errorf("fdp: read RUH status of namespace %d: %w", d.NSID, err)
	}
	for _, s := range d.Status.Descs {
		d.PIDs = append(d.PIDs, s.PID)
	}
	return d, nil
}

// NotSupported is the error for a controller without FDP.
func NotSupported(model string) error {
	if model == "" {
		model = "this controller"
	}
	return fmt.Errorf("%w by %s: CTRATT bit 19 clear", ErrFDPNotSupported, model)
}

// namespaceGroup returns the namespace's endurance group (from Identify CNS 0x08, falling
// back to Identify Namespace) and its logical block size.
func namespaceGroup(t nvme.Transport, nsid uint32) (uint16, int, error) {
	ns, err := nvme.ReadNamespace(t, nsid)
	if err != nil {
		return 0, 0, fmt.Errorf("fdp: identify namespace %d: %w", nsid, err)
	}
	bs := 0
	if f, err := ns.Format(); err == nil {
		bs = f.DataSize()
	}
	endgid := ns.EndGID
	if ind, err := nvme.ReadIndependentNamespace(t, nsid); err == nil && ind.EndGID != 0 {
		endgid = ind.EndGID
	}
	if endgid == 0 {
		return 0, bs, fmt.Errorf("fdp: namespace %d reports no endurance group (ENDGID 0); pass one explicitly", nsid)
	}
	return endgid, bs, nil
}

// EnduranceGroup returns the endurance group of nsid (0: the transport's namespace, or the
// first active one on a controller device).
func EnduranceGroup(t nvme.Transport, nsid uint32) (uint16, error) {
	nsid, err := ResolveNSID(t, nsid)
	if err != nil {
		return 0, err
	}
	g, _, err := namespaceGroup(t, nsid)
	return g, err
}

// CheckSupported reads Identify Controller and returns a wrapped ErrFDPNotSupported when
// CTRATT bit 19 is clear. Commands call it first so that nothing else is sent to a
// controller without FDP.
func CheckSupported(t nvme.Transport) (*nvme.ControllerData, error) {
	ctrl, err := nvme.ReadController(t)
	if err != nil {
		return nil, fmt.Errorf("fdp: identify controller: %w", err)
	}
	if !ctrl.FDPSupported() {
		return ctrl, NotSupported(ctrl.ModelNumber)
	}
	return ctrl, nil
}

// IsNotSupported reports whether err says the device has no FDP: ErrFDPNotSupported, or an
// NVMe Invalid Opcode / Invalid Field / Invalid Log Page status for an FDP command.
func IsNotSupported(err error) bool {
	return errors.Is(err, ErrFDPNotSupported) || errors.Is(err, nvme.ErrInvalidOpcode) ||
		errors.Is(err, nvme.ErrInvalidLogPage)
}

// PlacementIDs returns the handle index → PID table for a passthrough device over t: the
// namespace's RUH status PIDs when FDP is enabled, nil (no placement, not an error) when
// the controller has no FDP or it is disabled. Other failures are returned.
func PlacementIDs(t nvme.Transport) ([]uint16, error) {
	d, err := Discover(t)
	if errors.Is(err, ErrFDPNotSupported) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return d.PIDs, nil
}

// ResolveNSID returns nsid, or when it is 0 the transport's namespace, or on a controller
// node (no namespace) the first active one.
func ResolveNSID(t nvme.Transport, nsid uint32) (uint32, error) {
	if nsid == 0 {
		nsid = t.NSID()
	}
	if nsid != 0 && nsid != nvme.NSIDAll {
		return nsid, nil
	}
	ids, err := nvme.ReadActiveNamespaces(t)
	if err != nil {
		return 0, fmt.Errorf("fdp: list namespaces: %w", err)
	}
	if len(ids) == 0 {
		return 0, errors.New("fdp: the controller has no active namespace")
	}
	return ids[0], nil
}
