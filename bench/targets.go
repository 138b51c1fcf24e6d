package bench

import (
	"errors"
	"fmt"
	"slices"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/devices"
)

// The devices of a comparison: one, or several that one cache is sharded over.

// devices returns o's devices (Devices, else Device) and paths (Paths, else Path); one of
// the two lists is empty.
func (o *Options) devices() ([]blockdev.Device, []string) {
	devs, paths := o.Devices, o.Paths
	if len(devs) == 0 && o.Device != nil {
		devs = []blockdev.Device{o.Device}
	}
	if len(paths) == 0 && o.Path != "" {
		paths = []string{o.Path}
	}
	if len(devs) > 0 {
		paths = nil
	}
	return devs, paths
}

// openTargets checks that no device is given twice and that every one passes the safety
// gate before any is created or opened, then opens them in order. On error the ones opened
// are closed.
func openTargets(o *Options) ([]*target, []string, error) {
	devs, paths := o.devices()
	n := max(len(devs), len(paths))
	if n == 0 {
		return nil, nil, errors.New("bench: no device given")
	}
	if len(paths) > 0 {
		if err := devices.Distinct(paths); err != nil {
			return nil, nil, err
		}
		for _, p := range paths {
			if err := checkTarget(p, o.Create, o.Force); err != nil {
				return nil, nil, err
			}
		}
	}
	ts := make([]*target, 0, n)
	names := make([]string, 0, n)
	for i := range n {
		var dev blockdev.Device
		path := ""
		if len(devs) > 0 {
			dev = devs[i]
		} else {
			path = paths[i]
		}
		t, err := openTarget(o, dev, path)
		if err != nil {
			closeTargets(ts)
			return nil, nil, err
		}
		ts = append(ts, t)
		if path == "" {
			path = t.dev.Info().Path
		}
		if slices.Contains(names, path) { // devices handed in, or mem:SIZE twice
			path = fmt.Sprintf("%s#%d", path, i)
		}
		names = append(names, path)
	}
	return ts, names, nil
}

func closeTargets(ts []*target) {
	for _, t := range ts {
		t.close()
		markOwn(t.mark)
	}
}

// resetTargets re-creates every device that needs it between policies.
func resetTargets(ts []*target, names []string) func() error {
	return func() error {
		for i, t := range ts {
			if t.reset != nil {
				if err := t.reset(); err != nil {
					return fmt.Errorf("re-creating %s: %w", names[i], err)
				}
			}
		}
		return nil
	}
}
