// Package cache holds the operations on a whole raw-block cache that rbctl's commands run
// beyond the engine's own API: Open opens an existing cache with the CLI's safety rules;
// FormatAll lays out a new cache on one device or sharded over several, after the safety
// checks; Inspect and Recover (InspectAll, RecoverAll for every device of one) read and
// repair it, filling the reports of reports/cachereport; CreateFile makes the regular file
// a cache lives in.
package cache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/reports/cachereport"
	"github.com/rbctl/rbctl/units"
)

// ErrNotRegular: only a regular file can be created or extended (a device has its own size,
// an emu: device the size its spec gives).
var ErrNotRegular = blockdev.ErrNotRegular

// FormatOptions describe one format.
type FormatOptions struct {
	Path   string
	Create int64 // create Path as a regular file of this size first (CreateFile); 0: not
	// Force lifts the safety gate's refusal of a device holding data (a filesystem, a
	// cache); a device in use (mounted, held, backing a loop device) is refused all the
	// same, and one another process has open is refused when it is opened.
	Force bool
	// Config is the layout; MetaTotalBytes 0 sizes the metadata region for a checkpoint of
	// every slot (Config), DevicePath "" records Path made absolute.
	Config engine.Config
	// Placement is the placement.Parse spec of the policy the checkpoints are written with
	// ("" or "none": no directives).
	Placement string
	// Open opens Path for writing (the caller's device options).
	Open func() (blockdev.Device, error)
	// Tweak, when set, completes the config once the device is open (e.g. placement resolved
	// against the device's placement identifiers); it runs after Placement.
	Tweak func(dev blockdev.Device, cfg *engine.Config) error
}

// Config completes cfg for a device of devSize bytes (MetaTotalBytes 0: engine.MetaBytesFor
// the capacity used) and validates it.
func Config(cfg engine.Config, devSize int64) (engine.Config, error) {
	if cfg.MetaTotalBytes == 0 {
		capy := devSize
		if cfg.CapacityBytes > 0 && cfg.CapacityBytes < capy {
			capy = cfg.CapacityBytes
		}
		cfg.MetaTotalBytes = engine.MetaBytesFor(capy, cfg.SlotBytes, cfg.BlockAlign, cfg.CheckpointFormat)
	}
	return cfg, cfg.Validate()
}

// Format formats the one device o describes (FormatAll of one device) and returns the
// layout written and the device's Info.
func Format(o FormatOptions) (cachereport.Layout, blockdev.Info, error) {
	var info blockdev.Info
	open := o.Open
	o.Open = func() (blockdev.Device, error) {
		dev, err := open()
		if err == nil {
			info = dev.Info()
		}
		return dev, err
	}
	rep, err := FormatAll(context.Background(), []FormatOptions{o})
	if err != nil {
		return cachereport.Layout{}, info, err
	}
	return *rep.Devices[0].Layout, info, nil
}

// plan completes the config for the open dev: the layout, the placement, o.Tweak; the
// layout is checked against the device. Nothing is written.
func plan(dev blockdev.Device, o FormatOptions) (engine.Config, error) {
	info := dev.Info()
	// LMCache takes min(capacity_bytes, device) on open, and rbctl opens such a cache the
	// same way; but formatting with a capacity above the device is most likely a slip (1T
	// for 1G), and the cache would silently be smaller than asked.
	if c := o.Config.CapacityBytes; c > info.Size {
		return o.Config, &engine.FieldError{Kind: engine.ErrConfig, Fields: []string{"capacity_bytes"},
			Detail: fmt.Sprintf("capacity_bytes %s is larger than %s (%s): give at most %s, or 0 for the whole device",
				units.FormatSpec(c), o.Path, units.FormatSize(info.Size), units.FormatSpec(info.Size))}
	}
	cfg, err := Config(o.Config, info.Size)
	if err == nil && cfg.DevicePath == "" {
		cfg.DevicePath, err = filepath.Abs(o.Path)
	}
	if err != nil {
		return cfg, err
	}
	pol, err := policyFor(dev, o.Placement)
	if err != nil {
		return cfg, err
	}
	if pol != nil {
		cfg.Placer = pol
	}
	if o.Tweak != nil {
		if err := o.Tweak(dev, &cfg); err != nil {
			return cfg, fmt.Errorf("%s: %w", o.Path, err)
		}
	}
	cfg.Periodic = false
	if _, err := engine.ComputeLayout(cfg, info.Size); err != nil {
		return cfg, fmt.Errorf("%s (%d bytes): %w", o.Path, info.Size, err)
	}
	return cfg, nil
}

// write formats the open dev with cfg; the engine's Close closes dev. written says whether
// anything may have reached the device (false: the engine refused the config first).
func write(dev blockdev.Device, path string, cfg engine.Config) (lay cachereport.Layout, written bool, err error) {
	e, err := engine.Format(dev, cfg)
	if err != nil {
		dev.Close()
		return lay, !errors.Is(err, engine.ErrConfig) && !errors.Is(err, engine.ErrDeviceTooSmall), fmt.Errorf("format %s: %w", path, err)
	}
	lay = LayoutOf(e.Layout(), cfg)
	if err := e.Close(); err != nil {
		return lay, true, fmt.Errorf("format %s: %w", path, err)
	}
	return lay, true, nil
}

// CheckCreate refuses, before anything is touched, to create path as a file: an emu: spec
// an existing file that is not regular (a block or character device), or a missing node
// under /dev.
func CheckCreate(path string) error {
	if emu.IsSpec(path) {
		return fmt.Errorf("%s: %w; an emu: device is created with the size its spec gives (size=)", path, ErrNotRegular)
	}
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		return fmt.Errorf("%s: %s, not a regular file: %w", path, fileKind(st.Mode()), ErrNotRegular)
	}
	return blockdev.CheckNotDevNode(path)
}

// CreateFile creates path as a regular file of size bytes (sparse, blockdev.DataFileMode)
// if it does not exist, extends a smaller one, and refuses to shrink a larger one or to touch
// anything CheckCreate refuses.
func CreateFile(path string, size int64) error {
	if err := CheckCreate(path); err != nil {
		return err
	}
	return blockdev.CreateFile(path, size)
}

// fileKind names what a path that is not a regular file is.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	}
	return "of type " + m.Type().String()
}
