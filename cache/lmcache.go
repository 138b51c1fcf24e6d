package cache

import (
	"errors"
	"fmt"
	"io"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/engine/lmconfig"
	"github.com/rbctl/rbctl/reports/cachereport"
)

// Formatted is one device an LMCache config formatted.
type Formatted struct {
	Rank   int                `json:"rank"`
	Path   string             `json:"path"`
	Kind   blockdev.Kind      `json:"kind"`
	Layout cachereport.Layout `json:"layout"`
	// Placement is the data policy the checkpoints were written under ("none" without FDP).
	Placement string `json:"placement"`
}

// ErrNoFDP: the config enables FDP and the device has none (LMCache refuses it too).
var ErrNoFDP = errors.New("fdp_enabled, but the device has no FDP")

// FormatLMCache formats every device an LMCache config names (device_path, or one per
// per_tp_device_paths rank) with the config's layout, I/O settings and placement: the FDP
// placement identifiers are resolved against each device's own (lmconfig.FDP.Resolve), so
// a device LMCache would refuse is refused here, before it is written. Devices are formatted
// in rank order; the first failure stops the rest. Force skips the safety gate.
func FormatLMCache(r io.Reader, force bool) ([]Formatted, []lmconfig.Warning, error) {
	cfg, warns, err := lmconfig.Load(r)
	if err != nil {
		return nil, warns, err
	}
	var out []Formatted
	for _, d := range cfg.Devices {
		var od *devices.Opened
		pol := "none"
		o := FormatOptions{Path: d.Path, Force: force, Config: d.Engine,
			Open: func() (blockdev.Device, error) {
				var err error
				od, err = devices.OpenDevice(d.Path, cfg.OpenOptions())
				if err != nil {
					return nil, err
				}
				return od.Block, nil
			},
			Tweak: func(_ blockdev.Device, c *engine.Config) error {
				if !cfg.FDP.Enabled {
					return nil
				}
				if od.FDP == nil {
					return fmt.Errorf("%w (%v)", ErrNoFDP, od.NoFDP)
				}
				p, err := cfg.FDP.Resolve(od.FDP.PIDs(), 0)
				if err != nil {
					return err
				}
				p.Apply(c)
				if p.Policy != nil {
					pol = p.Policy.Name()
				}
				return nil
			}}
		lay, info, err := Format(o)
		if err != nil {
			return out, warns, fmt.Errorf("rank %d: %w", d.Rank, err)
		}
		out = append(out, Formatted{Rank: d.Rank, Path: d.Path, Kind: info.Kind, Layout: lay, Placement: pol})
	}
	return out, warns, nil
}
