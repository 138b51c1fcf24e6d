package lmcache

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/reports/cachereport"
)

// ErrNoFDP: the config enables FDP and the device has none (LMCache refuses it too).
var ErrNoFDP = errors.New("fdp_enabled, but the device has no FDP")

// Format formats every device an LMCache config names (device_path, or one per
// per_tp_device_paths rank) with the config's layout, I/O settings and placement: the FDP
// placement identifiers are resolved against each device's own (FDP.Resolve), so a device
// LMCache would refuse is refused here, before any is written. The devices are formatted
// as cache.FormatAll formats the shards of one cache (each row's Rank is the config's);
// force skips the safety gate.
func Format(ctx context.Context, r io.Reader, force bool) (*cachereport.Formats, []Warning, error) {
	cfg, warns, err := Load(r)
	if err != nil {
		return nil, warns, err
	}
	opts := make([]cache.FormatOptions, len(cfg.Devices))
	for i, d := range cfg.Devices {
		var od *devices.Opened
		opts[i] = cache.FormatOptions{Path: d.Path, Force: force, Config: d.Engine,
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
					return fmt.Errorf("rank %d: %w (%v)", d.Rank, ErrNoFDP, od.NoFDP)
				}
				p, err := cfg.FDP.Resolve(od.FDP.PIDs(), -1) // cache_salt_rank: the node's GPU count
				if err != nil {
					return fmt.Errorf("rank %d: %w", d.Rank, err)
				}
				p.Apply(c)
				return nil
			}}
	}
	rep, err := cache.FormatAll(ctx, opts)
	if rep != nil {
		for i, d := range cfg.Devices {
			rep.Devices[i].Rank = d.Rank
		}
	}
	return rep, warns, err
}
