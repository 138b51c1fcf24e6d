package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/devices/safety"
	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/units"
	"github.com/rbctl/rbctl/workloads"
)

func init() { register(newFormatCmd) }

type formatFlags struct {
	dev                                  rbDevFlags
	slot, header, meta, capacity, create string
	blockAlign                           int
	compat, namespace                    string
	devicePath                           string
	force, json                          bool
	place                                rbPlaceFlag
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
		Example: `  rbctl format --create 1G --slot-bytes 256K /var/tmp/cache.img
  rbctl format --compat lmcache-v1 --slot-bytes 1M --meta-bytes 256M /dev/nvme0n1`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runFormat(cmd, args[0], f) },
	}
	cmd.Flags().StringVar(&f.slot, "slot-bytes", "1M", "slot size (header + payload), a multiple of --block-align")
	cmd.Flags().StringVar(&f.header, "header-bytes", fmt.Sprint(engine.DefaultHeaderBytes), "slot header size, a multiple of --block-align")
	cmd.Flags().StringVar(&f.meta, "meta-bytes", "auto", "metadata region (two containers); auto sizes it from the slot count")
	cmd.Flags().StringVar(&f.capacity, "capacity", "0", "bytes of the device to use (0 = all)")
	cmd.Flags().IntVar(&f.blockAlign, "block-align", engine.DefaultBlockAlign, "alignment of every offset and transfer (power of two)")
	cmd.Flags().StringVar(&f.compat, "compat", "", "write LMCache's format exactly: lmcache-v1 (JSON checkpoint)")
	cmd.Flags().StringVar(&f.namespace, "namespace", "object", "key namespace: object or legacy")
	cmd.Flags().BoolVar(&f.force, "force", false, "format even if the device is in use or holds data")
	cmd.Flags().BoolVar(&f.json, "json", false, "print the layout as JSON")
	cmd.Flags().StringVar(&f.devicePath, "device-path", "", "device_path recorded in the checkpoint (default: DEV as an absolute path); LMCache ignores a checkpoint whose device_path differs from its configured one")
	cmd.Flags().StringVar(&f.create, "create", "", "create (or extend) DEV as a regular file of this size first")
	f.dev.add(cmd)
	f.place.add(cmd, "the checkpoints format writes (e.g. metadata-class puts them on the last handle)")
	return cmd
}

func (f *formatFlags) config(devSize int64) (engine.Config, error) {
	cfg := engine.DefaultConfig()
	var err error
	if cfg.SlotBytes, err = units.ParseSize(f.slot); err != nil {
		return cfg, fmt.Errorf("--slot-bytes: %w", err)
	}
	h, err := units.ParseSize(f.header)
	if err != nil {
		return cfg, fmt.Errorf("--header-bytes: %w", err)
	}
	cfg.HeaderBytes = int(h)
	if cfg.CapacityBytes, err = units.ParseSize(f.capacity); err != nil {
		return cfg, fmt.Errorf("--capacity: %w", err)
	}
	cfg.BlockAlign = f.blockAlign
	switch f.compat {
	case "":
	case "lmcache-v1":
		cfg.CheckpointFormat = engine.CheckpointLMCacheV1
	default:
		return cfg, fmt.Errorf("--compat %q: the only compatibility mode is lmcache-v1", f.compat)
	}
	cfg.Namespace = engine.Namespace(f.namespace)
	if f.meta == "auto" {
		capy := devSize
		if cfg.CapacityBytes > 0 && cfg.CapacityBytes < capy {
			capy = cfg.CapacityBytes
		}
		cfg.MetaTotalBytes = engine.MetaBytesFor(capy, cfg.SlotBytes, cfg.BlockAlign, cfg.CheckpointFormat)
	} else if cfg.MetaTotalBytes, err = units.ParseSize(f.meta); err != nil {
		return cfg, fmt.Errorf("--meta-bytes: %w", err)
	}
	return cfg, cfg.Validate()
}

func runFormat(cmd *cobra.Command, path string, f *formatFlags) error {
	// Check the flags before touching anything.
	if _, err := f.config(1 << 40); err != nil {
		return err
	}
	if err := f.place.check(); err != nil {
		return err
	}
	if f.create != "" && !f.place.none() {
		// --create makes a regular file, which has no placement handles: refuse before
		// creating anything.
		return fmt.Errorf("--placement %s with --create: a regular file has no placement handles; use an emu: path or an FDP device, or --placement none", f.place.spec)
	}
	if f.create != "" && emu.IsSpec(path) {
		return fmt.Errorf("--create is for regular files; an emu: device is created with the size its spec gives (size=)")
	}
	// The gate looks at the real target (an emu: data file, an ng device's namespace)
	// before anything is created or extended.
	if !f.force {
		if err := safety.Gate(safety.Format, path); err != nil {
			return err
		}
	}
	if emu.IsSpec(path) {
		if _, err := emu.Create(path); err != nil {
			return err
		}
	}
	if f.create != "" {
		size, err := units.ParseSize(f.create)
		if err != nil {
			return fmt.Errorf("--create: %w", err)
		}
		if err := blockdev.CreateFile(path, size); err != nil {
			return err
		}
	}
	dev, err := f.dev.open(path, false)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w (pass --create SIZE to make a file)", err)
		}
		return err
	}
	cfg, err := f.config(dev.Info().Size)
	if err != nil {
		dev.Close()
		return err
	}
	cfg.DevicePath = f.devicePath
	if cfg.DevicePath == "" {
		if cfg.DevicePath, err = filepath.Abs(path); err != nil {
			dev.Close()
			return fmt.Errorf("%s: %w (pass --device-path)", path, err)
		}
	}
	cfg.Periodic = false
	pol, err := f.place.policy(dev.Info())
	if err != nil {
		dev.Close()
		return err
	}
	if pol != nil {
		cfg.Placer = workloads.PolicyPlacer{Policy: pol}
	}
	if _, err := engine.ComputeLayout(cfg, dev.Info().Size); err != nil {
		dev.Close()
		return fmt.Errorf("%s (%d bytes): %w", path, dev.Info().Size, err)
	}
	e, err := engine.Format(dev, cfg)
	if err != nil {
		dev.Close()
		return fmt.Errorf("format %s: %w", path, err)
	}
	lay := e.Layout()
	if err := e.Close(); err != nil {
		return fmt.Errorf("format %s: %w", path, err)
	}
	out := cmd.OutOrStdout()
	if f.json {
		return rbJSON(out, rbLayoutOf(lay, cfg))
	}
	fmt.Fprintf(out, "formatted %s (%s)\n", path, dev.Info().Kind)
	return rbTable(out, []string{"field", "value"}, rbLayoutRows(lay, cfg))
}
