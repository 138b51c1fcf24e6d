package cache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/devices/safety"
	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/reports/cachereport"
)

// FormatAll formats each device opts describes as one shard of a cache (opts[i] is rank
// i), all or nothing up to the first write: the devices must be distinct (devices.Distinct), each
// passes the safety gate (under Force only its in-use half), then each is created (Create, an emu: spec),
// opened and its layout planned; any failure there returns it with nothing written and
// the devices opened closed again. Then every device is formatted at once, a goroutine
// each; a device that fails then is reported in the returned Formats (HalfFormatted when
// writing had begun) and the others are formatted all the same.
//
// ctx cancelled before the writes formats nothing; once a device's format has begun it
// finishes (it writes the two container headers and an empty checkpoint, milliseconds;
// stopping half-way would leave no cache at all). Formats.Interrupted marks a run ctx
// stopped before every device's turn. The error is nil when every device was formatted.
func FormatAll(ctx context.Context, opts []FormatOptions) (*cachereport.Formats, error) {
	if len(opts) == 0 {
		return nil, errors.New("no device to format")
	}
	paths := make([]string, len(opts))
	rep := &cachereport.Formats{Devices: make([]cachereport.DeviceFormat, len(opts))}
	for i, o := range opts {
		paths[i] = o.Path
		rep.Devices[i] = cachereport.DeviceFormat{Rank: i, Device: o.Path, State: cachereport.NotFormatted, Placement: "none"}
	}
	if err := preflight(opts, paths); err != nil {
		return nil, err
	}
	shards, created, err := openAll(ctx, opts, paths)
	// A file this call created and did not format is removed again: an interrupted format
	// --create leaves no empty sparse files behind.
	defer removeUnformatted(rep, paths, created)
	if err != nil || ctx.Err() != nil {
		closeAll(shards)
		if ctx.Err() == nil {
			return nil, err
		}
		return rep, interrupted(rep, ctx.Err())
	}
	var wg sync.WaitGroup
	for i, s := range shards {
		d := &rep.Devices[i]
		d.Kind, d.Placement = s.dev.Info().Kind, "none"
		if s.cfg.Placer != nil {
			d.Placement = s.cfg.Placer.Name()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ctx.Err(); err != nil {
				s.dev.Close()
				d.Fail(cachereport.NotFormatted, fmt.Errorf("interrupted before its turn: %w", err))
				return
			}
			lay, written, err := write(s.dev, opts[i].Path, s.cfg)
			switch {
			case err != nil && written:
				d.Fail(cachereport.HalfFormatted, fmt.Errorf("%w; it is half-formatted: its old metadata may be gone and it holds no complete cache", err))
			case err != nil:
				d.Fail(cachereport.NotFormatted, err)
			default:
				d.State, d.Layout = cachereport.Formatted, &lay
			}
		}()
	}
	wg.Wait()
	if err := rep.Sum(); err != nil {
		if ctx.Err() != nil && rep.Total.Formatted < len(opts) {
			return rep, interrupted(rep, ctx.Err())
		}
		return rep, err
	}
	return rep, nil
}

// preflight is every check before anything is touched: distinct devices, each its own
// device_path, the safety gate of every device (all refusals together), and that a file
// can be created where one is asked for.
func preflight(opts []FormatOptions, paths []string) error {
	if err := devices.Distinct(paths); err != nil {
		return err
	}
	recorded := map[string]string{}
	errs := make([]error, len(opts))
	for i, o := range opts {
		if p := o.Config.DevicePath; p != "" && len(opts) > 1 {
			if q, ok := recorded[p]; ok {
				return fmt.Errorf("%s and %s would both record device_path %s; each shard records its own", q, o.Path, p)
			}
			recorded[p] = o.Path
		}
		if o.Force {
			errs[i] = safety.GateInUse(safety.Format, o.Path) // --force destroys data, never what is in use
		} else {
			errs[i] = safety.Gate(safety.Format, o.Path)
		}
		if errs[i] == nil && o.Create > 0 {
			errs[i] = CheckCreate(o.Path)
		}
	}
	return nothingFormatted(paths, errs)
}

// shard is one device opened, with the config planned for it.
type shard struct {
	dev blockdev.Device
	cfg engine.Config
}

// openAll creates what opts ask for, opens every device and plans its config; on failure
// it returns the shards opened so far with the error (and has removed the files it made).
// created lists the files (and emu: specs) it made, on success.
func openAll(ctx context.Context, opts []FormatOptions, paths []string) (_ []shard, created []string, _ error) {
	errs := make([]error, len(opts))
	removeOnFail := true
	defer func() {
		if removeOnFail {
			removeFiles(created)
			created = nil
		}
	}()
	for i, o := range opts {
		if ctx.Err() != nil {
			return nil, created, ctx.Err()
		}
		if emu.IsSpec(o.Path) && o.Create == 0 {
			var made bool
			made, errs[i] = emu.Create(o.Path)
			if made {
				created = append(created, o.Path) // removeFiles removes its files
			}
		} else if o.Create > 0 {
			_, statErr := os.Lstat(o.Path)
			errs[i] = CreateFile(o.Path, o.Create)
			if errs[i] == nil && errors.Is(statErr, os.ErrNotExist) {
				created = append(created, o.Path)
			}
		}
	}
	if err := nothingFormatted(paths, errs); err != nil {
		return nil, created, err
	}
	var shards []shard
	for i, o := range opts {
		dev, err := o.Open()
		if err != nil {
			errs[i] = err
			continue
		}
		cfg, err := plan(dev, o)
		shards = append(shards, shard{dev, cfg})
		errs[i] = err
	}
	if err := nothingFormatted(paths, errs); err != nil {
		closeAll(shards) // closed before their files are removed
		return nil, created, err
	}
	removeOnFail = false // the caller removes what it does not format
	return shards, created, nil
}

// removeUnformatted removes every created path whose device rep does not list as
// (half-)formatted; FormatAll's devices are closed by then.
func removeUnformatted(rep *cachereport.Formats, paths, created []string) {
	var drop []string
	for _, p := range created {
		for i, q := range paths {
			if p == q && rep.Devices[i].State == cachereport.NotFormatted {
				drop = append(drop, p)
			}
		}
	}
	removeFiles(drop)
}

// removeFiles removes the files of paths: a file, or the data and state files of an emu:
// spec.
func removeFiles(paths []string) {
	for _, p := range paths {
		if emu.IsSpec(p) {
			for _, f := range emu.Files(p) {
				os.Remove(f)
			}
			continue
		}
		os.Remove(p)
	}
}

func closeAll(shards []shard) {
	for _, s := range shards {
		s.dev.Close()
	}
}

// nothingFormatted is the error of a format stopped before writing (nil: no error).
func nothingFormatted(paths []string, errs []error) error {
	err := cachereport.DevicesErr(paths, errs)
	if err == nil || len(paths) == 1 {
		return err
	}
	return fmt.Errorf("nothing was formatted: %w", err)
}

// interrupted marks rep stopped by ctx (cause) and returns the error that says so.
func interrupted(rep *cachereport.Formats, cause error) error {
	rep.Interrupted = true
	for i := range rep.Devices {
		if d := &rep.Devices[i]; d.State == cachereport.NotFormatted && d.Error == "" {
			d.Fail(cachereport.NotFormatted, fmt.Errorf("interrupted before its turn: %w", cause))
		}
	}
	_ = rep.Sum()
	return fmt.Errorf("%d of %d formatted: %w", rep.Total.Formatted, len(rep.Devices), cause)
}
