package flagsets

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/cmd/rbctl/internal/flagcheck"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/units"
)

// Layout is format's flags for the cache layout it writes (engine.Config).
type Layout struct {
	Slot, Header, Meta, Capacity string // sizes; Meta may be "auto"
	BlockAlign                   int
	Compat, Namespace            string
	DevicePath                   string
}

// Add defines the layout flags on cmd.
func (f *Layout) Add(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.Slot, "slot-bytes", "1M", "slot size (header + payload), a multiple of --block-align")
	fs.StringVar(&f.Header, "header-bytes", fmt.Sprint(engine.DefaultHeaderBytes), "slot header size, a multiple of --block-align")
	fs.StringVar(&f.Meta, "meta-bytes", "auto", "metadata region (two containers); auto sizes it from the slot count")
	fs.StringVar(&f.Capacity, "capacity", "0", "bytes of the device to use (0 = all; more than the device is refused)")
	fs.IntVar(&f.BlockAlign, "block-align", engine.DefaultBlockAlign, "alignment of every offset and transfer (power of two)")
	fs.StringVar(&f.Compat, "compat", "", "write LMCache's format exactly: lmcache-v1 (JSON checkpoint)")
	flagcheck.Alias(fs, "namespace", "key-namespace") // its name until issue 25
	fs.StringVar(&f.Namespace, "key-namespace", "object", "key namespace: object or legacy (LMCache's MP and non-MP key spellings)")
	fs.StringVar(&f.DevicePath, "device-path", "", "device_path recorded in the checkpoint (default: DEV as an absolute path); LMCache ignores a checkpoint whose device_path differs from its configured one")
}

// Config is the layout the flags ask for (MetaTotalBytes 0: auto).
func (f *Layout) Config() (engine.Config, error) {
	cfg := engine.DefaultConfig()
	var err error
	if cfg.SlotBytes, err = units.ParseSize(f.Slot); err != nil {
		return cfg, fmt.Errorf("--slot-bytes: %w", err)
	}
	h, err := units.ParseSize(f.Header)
	if err != nil {
		return cfg, fmt.Errorf("--header-bytes: %w", err)
	}
	cfg.HeaderBytes = int(h)
	if cfg.CapacityBytes, err = units.ParseSize(f.Capacity); err != nil {
		return cfg, fmt.Errorf("--capacity: %w", err)
	}
	cfg.BlockAlign, cfg.Namespace, cfg.DevicePath, cfg.MetaTotalBytes = f.BlockAlign, engine.Namespace(f.Namespace), f.DevicePath, 0
	switch f.Compat {
	case "":
	case "lmcache-v1":
		cfg.CheckpointFormat = engine.CheckpointLMCacheV1
	default:
		return cfg, fmt.Errorf("--compat %q: the only compatibility mode is lmcache-v1", f.Compat)
	}
	if f.Meta != "auto" {
		if cfg.MetaTotalBytes, err = units.ParseSize(f.Meta); err != nil {
			return cfg, fmt.Errorf("--meta-bytes: %w", err)
		}
	}
	return cfg, nil
}
