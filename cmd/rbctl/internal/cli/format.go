package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/cache"
	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagsets"
	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/lmcache"
	"github.com/rbctl/rbctl/reports/cachereport"
)

func init() { register(newFormatCmd) }

type formatFlags struct {
	dev         flagsets.Device
	layout      flagsets.Layout
	create      string
	force, json bool
	place       flagsets.Placement
	lmcache     string
}

func newFormatCmd() *cobra.Command {
	f := &formatFlags{}
	cmd := &cobra.Command{
		Use:   "format DEV [DEV...]",
		Short: "Lay out an empty raw-block KV cache on a device or pre-sized file",
		Long: `format writes an empty cache: two metadata containers and data slots (the LMCache
raw-block layout, docs/format.md). It refuses a mounted or held device (also through
/dev/ngXnY, or a file backing a loop device), one with a filesystem, partition, LVM, RAID,
swap or LUKS signature, an existing cache, or any other data (a non-zero byte where it
probes; a blank device reads as zeros), unless --force; for emu:PATH it checks the data file. A device another rbctl process has open is refused even with --force.
Several DEVs are the shards of one cache, formatted alike and in parallel (a row each and a
total): nothing is written unless every one passes (the same device twice is refused).

--meta-bytes auto sizes the metadata region so that a checkpoint of every slot fits
(compact: 128 B per slot; --compat lmcache-v1: 256 B per slot), rounded up to a power of
two of at least 1 MiB.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if (len(args) > 0) == (f.lmcache != "") {
				return errors.New("give DEV [DEV...] or --lmcache-config FILE (its device_path / per_tp_device_paths): exactly one of the two")
			}
			if f.lmcache != "" {
				return runFormatLMCache(cmd, f)
			}
			return runFormat(cmd, args, f)
		},
	}
	cmd.Flags().StringVar(&f.lmcache, "lmcache-config", "", "format the devices an LMCache JSON config names, with its layout and FDP placement (docs/compat.md)")
	cmd.Flags().BoolVar(&f.force, "force", false, flagsets.ForceHelp("format a device that holds data (a filesystem, a partition table, a cache); never one in use (mounted, held, backing a loop device)"))
	cmd.Flags().BoolVar(&f.json, "json", false, "print JSON: the layout (several DEVs, --lmcache-config: a row per device and the total)")
	cmd.Flags().StringVar(&f.create, "create", "", flagsets.CreateHelp)
	f.layout.Add(cmd)
	f.dev.Add(cmd)
	f.place.Add(cmd, "the checkpoints format writes (e.g. metadata-class puts them on the last handle)")
	return cmd
}

func runFormat(cmd *cobra.Command, paths []string, f *formatFlags) error {
	// Check the flags before touching anything.
	cfg, err := f.layout.Config()
	if err == nil {
		_, err = cache.Config(cfg, 1<<40)
	}
	if err == nil {
		err = f.place.Check()
	}
	if err != nil {
		return err
	}
	if f.create != "" && !f.place.None() {
		// --create makes a regular file, which has no placement handles: refuse before
		// creating anything.
		return fmt.Errorf("--placement %s with --create: a regular file has no placement handles; use an emu: path or an FDP device, or --placement none", f.place.Spec)
	}
	opts := make([]cache.FormatOptions, len(paths))
	for i, path := range paths {
		size, err := flagsets.CheckCreate(path, f.create)
		if err != nil {
			return err
		}
		opts[i] = cache.FormatOptions{Path: path, Create: size, Force: f.force, Config: cfg, Placement: f.place.Spec,
			Open: func() (blockdev.Device, error) { return f.dev.Open(path, false) }}
	}
	rep, err := cache.FormatAll(cmd.Context(), opts)
	if errors.Is(err, fs.ErrNotExist) && !errors.Is(err, emu.ErrNoDevice) { // format creates an emu: device itself
		err = fmt.Errorf("%w (pass --create SIZE to make a file)", err)
	}
	if len(paths) == 1 && err == nil { // one device: its layout, as always
		d := rep.Devices
		if f.json {
			return printJSON(cmd, d[0].Layout)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "formatted %s (%s)\n", paths[0], d[0].Kind)
		return d[0].Layout.WriteText(cmd.OutOrStdout())
	}
	return formatOutcome(cmd, f.json, rep, err)
}

func runFormatLMCache(cmd *cobra.Command, f *formatFlags) error {
	r, err := os.Open(f.lmcache)
	if err != nil {
		return err
	}
	defer r.Close()
	rep, warns, err := lmcache.Format(cmd.Context(), r, f.force)
	for _, w := range warns {
		fmt.Fprintf(cmd.ErrOrStderr(), "rbctl: %s: %s\n", f.lmcache, w)
	}
	return formatOutcome(cmd, f.json, rep, err)
}

// formatOutcome prints the per-device rows (nothing when format stopped before writing)
// and returns the command's error.
func formatOutcome(cmd *cobra.Command, asJSON bool, rep *cachereport.Formats, err error) error {
	if rep == nil {
		return err
	}
	if perr := show(cmd, asJSON, rep, rep.WriteText); perr != nil {
		return perr
	}
	if rep.Interrupted {
		return fmt.Errorf("format %w: %v", errInterrupted, err)
	}
	return err
}
