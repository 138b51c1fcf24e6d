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
		Use:   "format DEV",
		Short: "Lay out an empty raw-block KV cache on a device or pre-sized file",
		Long: `format writes an empty cache: two metadata containers and data slots (the LMCache
raw-block layout, docs/format.md). It refuses a mounted or held device (also through
/dev/ngXnY, or a file backing a loop device), one with a filesystem, partition, LVM, RAID,
swap or LUKS signature, or an existing cache, unless --force; for emu:PATH it checks the
data file. A device another rbctl process has open is refused even with --force.

--meta-bytes auto sizes the metadata region so that a checkpoint of every slot fits
(compact: 128 B per slot; --compat lmcache-v1: 256 B per slot), rounded up to a power of
two of at least 1 MiB.`,
		Args: cobra.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (len(args) == 1) == (f.lmcache != "") {
				return errors.New("give DEV or --lmcache-config FILE (its device_path / per_tp_device_paths), not both")
			}
			if f.lmcache != "" {
				return runFormatLMCache(cmd, f)
			}
			return runFormat(cmd, args[0], f)
		},
	}
	cmd.Flags().StringVar(&f.lmcache, "lmcache-config", "", "format the devices an LMCache JSON config names, with its layout and FDP placement (docs/compat.md)")
	cmd.Flags().BoolVar(&f.force, "force", false, flagsets.ForceHelp("format a device that is in use or holds data (a filesystem, a partition table, a cache)"))
	cmd.Flags().BoolVar(&f.json, "json", false, "print the layout as JSON")
	cmd.Flags().StringVar(&f.create, "create", "", flagsets.CreateHelp)
	f.layout.Add(cmd)
	f.dev.Add(cmd)
	f.place.Add(cmd, "the checkpoints format writes (e.g. metadata-class puts them on the last handle)")
	return cmd
}

func runFormat(cmd *cobra.Command, path string, f *formatFlags) error {
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
	size, err := flagsets.CheckCreate(path, f.create)
	if err != nil {
		return err
	}
	if size > 0 && !f.place.None() {
		// --create makes a regular file, which has no placement handles: refuse before
		// creating anything.
		return fmt.Errorf("--placement %s with --create: a regular file has no placement handles; use an emu: path or an FDP device, or --placement none", f.place.Spec)
	}
	lay, info, err := cache.Format(cache.FormatOptions{Path: path, Create: size, Force: f.force, Config: cfg, Placement: f.place.Spec,
		Open: func() (blockdev.Device, error) { return f.dev.Open(path, false) }})
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w (pass --create SIZE to make a file)", err)
	case err != nil:
		return err
	case f.json:
		return printJSON(cmd.OutOrStdout(), lay)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "formatted %s (%s)\n", path, info.Kind)
	return lay.WriteText(cmd.OutOrStdout())
}

func runFormatLMCache(cmd *cobra.Command, f *formatFlags) error {
	r, err := os.Open(f.lmcache)
	if err != nil {
		return err
	}
	defer r.Close()
	out, warns, err := cache.FormatLMCache(r, f.force)
	for _, w := range warns {
		fmt.Fprintf(cmd.ErrOrStderr(), "rbctl: %s: %s\n", f.lmcache, w)
	}
	if f.json && err == nil {
		return printJSON(cmd.OutOrStdout(), out)
	}
	for _, d := range out {
		fmt.Fprintf(cmd.OutOrStdout(), "formatted rank %d: %s (%s, placement %s)\n", d.Rank, d.Path, d.Kind, d.Placement)
	}
	return err
}
