package cli

// Shared by format, inspect, recover, put, get, ls and rm: device-opening flags, size
// parsing, key flags, tables and JSON output. Identifiers carry an "rb" prefix because
// every command file shares this package.

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/placement"
	"github.com/rbctl/rbctl/reports"
	"github.com/rbctl/rbctl/workloads"
)

// rbDevFlags are the device-opening flags every engine command takes.
type rbDevFlags struct {
	ioEngine   string
	direct     bool
	queueDepth int
	cache      rbCacheOpts // --namespace and recovery choices (namespace.go)
}

func (f *rbDevFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.ioEngine, "io-engine", "posix", "I/O engine: posix, uring or passthru (NVMe /dev/ngXnY); emu:... paths open the emulated FDP SSD")
	cmd.Flags().BoolVar(&f.direct, "direct", true, "open with O_DIRECT (aligned I/O, bypasses the page cache)")
	cmd.Flags().IntVar(&f.queueDepth, "queue-depth", 32, "operations in flight per batch")
}

func (f *rbDevFlags) open(path string, readOnly bool) (blockdev.Device, error) {
	if f.queueDepth < 1 {
		return nil, fmt.Errorf("--queue-depth %d: must be at least 1", f.queueDepth)
	}
	return devices.Open(path, devices.Options{
		IOEngine:   f.ioEngine,
		Direct:     f.direct,
		QueueDepth: f.queueDepth,
		ReadOnly:   readOnly,
		Exclusive:  !readOnly,
	})
}

// rbOpenEngine opens the cache on path with its layout detected from the checkpoint.
func rbOpenEngine(f *rbDevFlags, path string, readOnly bool, tweak func(*engine.Config)) (*engine.Engine, error) {
	return rbOpenEnginePlaced(f, nil, "", path, readOnly, tweak)
}

// rbOpenEnginePlaced is rbOpenEngine with the writes placed by pf's policy (nil pf or
// "none": no directives), built for the device's handles. After recovery the policy's salt
// → handle assignment is seeded from the handles the cache's entries were written with, so
// cache-salt keeps each salt on its handle from one command to the next.
func rbOpenEnginePlaced(f *rbDevFlags, pf *rbPlaceFlag, model, path string, readOnly bool, tweak func(*engine.Config)) (*engine.Engine, error) {
	dev, err := f.open(path, readOnly)
	if err != nil {
		return nil, err
	}
	cfg, err := f.cache.detect(dev, readOnly)
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	cfg.ReadOnly = readOnly
	cfg.Periodic = false
	cfg.QueueDepth = max(f.queueDepth, 1)
	pol, err := pf.policy(dev.Info())
	if err != nil {
		if why := rbNoHandlesWhy(dev); why != nil {
			err = fmt.Errorf("%w; %w", err, why)
		}
		dev.Close()
		return nil, err
	}
	if pol != nil {
		// MetadataHandle stays NoPlacement: the engine asks the policy at each checkpoint,
		// after the seeding below.
		cfg.Placer = workloads.PolicyPlacer{Policy: pol, Model: model}
	}
	if tweak != nil {
		tweak(&cfg)
	}
	e, err := f.cache.open(dev, cfg)
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if pol != nil {
		workloads.SeedPolicy(pol, e)
	}
	return e, nil
}

// rbNoHandlesWhy says why a block device opened through io_uring has no placement handles
// when the reason is its kernel write streams (e.g. Linux older than 6.16), or nil.
func rbNoHandlesWhy(dev blockdev.Device) error {
	ws, ok := dev.(interface {
		WriteStreams() (blockdev.WriteStreams, error)
	})
	if !ok || dev.Info().Handles > 0 {
		return nil
	}
	if _, err := ws.WriteStreams(); errors.Is(err, blockdev.ErrWriteStreamsKernel) {
		return err
	}
	return nil
}

// rbPlaceFlag is the --placement flag of the commands that write single keys.
type rbPlaceFlag struct{ spec string }

func (f *rbPlaceFlag) add(cmd *cobra.Command, what string) {
	cmd.Flags().StringVar(&f.spec, "placement", "none", "placement policy for "+what+" ("+strings.Join(placement.Known(), ", ")+
		", compositions with +; docs/placement.md); needs a device with placement handles (FDP or emu:)")
}

// none reports whether the flag asks for no placement.
func (f *rbPlaceFlag) none() bool {
	return f == nil || strings.TrimSpace(f.spec) == "" || strings.EqualFold(strings.TrimSpace(f.spec), "none")
}

// check validates the spec before any device is touched (handle counts are checked once
// the device is open).
func (f *rbPlaceFlag) check() error {
	if f.none() {
		return nil
	}
	if _, err := placement.Parse(f.spec, 1<<16); err != nil {
		return fmt.Errorf("--placement %s: %w", f.spec, err)
	}
	return nil
}

// policy builds the policy for a device (nil for none).
func (f *rbPlaceFlag) policy(info blockdev.Info) (placement.Policy, error) {
	if err := f.check(); err != nil || f == nil {
		return nil, err
	}
	p, err := placement.Parse(f.spec, info.Handles)
	if err != nil {
		return nil, fmt.Errorf("--placement %s on %s: %w", f.spec, info.Path, err)
	}
	if p.Name() == "none" {
		return nil, nil
	}
	return p, nil
}

func rbBytes(n int64) string {
	const u = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n)/1024, 0
	for f >= 1024 && i < len(u)-1 {
		f /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %ciB", f, u[i])
}

func rbTable(w io.Writer, header []string, rows [][]string) error {
	t := reports.NewTable(w)
	t.Header(header)
	for _, r := range rows {
		if err := t.Append(r); err != nil {
			return err
		}
	}
	return t.Render()
}

func rbJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// rbKeyFlags build a key from --key or --model/--rank/--hash/--salt.
type rbKeyFlags struct {
	key, model, hash, salt string
	rank                   uint32
	legacy                 bool
}

func (k *rbKeyFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&k.key, "key", "", "encoded key as stored (e.g. my%2Fmodel@0x00000000@<hex>@salt)")
	cmd.Flags().StringVar(&k.model, "model", "", "model name (object key)")
	cmd.Flags().Uint32Var(&k.rank, "rank", 0, "kv rank (object key)")
	cmd.Flags().StringVar(&k.hash, "hash", "", "chunk hash in hex (object key)")
	cmd.Flags().StringVar(&k.salt, "salt", "", "cache_salt (object key, optional)")
}

// precheck runs the checks that do not need the cache's namespace, before any device is
// opened: a key that can never be valid is refused without touching anything.
func (k *rbKeyFlags) precheck() error {
	if k.key != "" {
		// Namespace-independent: the object grammar is checked once the namespace is known.
		if err := engine.CheckKey(k.key, engine.NamespaceLegacy); err != nil && !errors.Is(err, engine.ErrKeyFormat) {
			return err
		}
		for _, c := range k.key {
			if c < 0x20 || c == 0x7f {
				return fmt.Errorf("--key %s: has a control character", strconv.Quote(k.key))
			}
		}
		if len(k.key) > engine.MaxKeyBytes {
			return fmt.Errorf("--key: %d bytes, longer than %d", len(k.key), engine.MaxKeyBytes)
		}
		if k.model != "" || k.hash != "" || k.salt != "" {
			return errors.New("give either --key or --model/--rank/--hash/--salt, not both")
		}
		return nil
	}
	_, err := k.build(engine.NamespaceObject)
	return err
}

func (k *rbKeyFlags) build(ns engine.Namespace) (engine.Key, error) {
	structured := k.model != "" || k.hash != "" || k.salt != ""
	switch {
	case k.key != "" && structured:
		return engine.Key{}, errors.New("give either --key or --model/--rank/--hash/--salt, not both")
	case k.key != "":
		if err := engine.CheckKey(k.key, ns); err != nil {
			return engine.Key{}, fmt.Errorf("--key: %s", rbEscape(err.Error()))
		}
		key, err := engine.ParseKey(k.key, ns)
		if err != nil {
			return engine.Key{}, err
		}
		return key, nil
	case structured:
		if ns != engine.NamespaceObject {
			return engine.Key{}, errors.New("--model/--hash build object-namespace keys; this cache uses the legacy namespace, pass --key")
		}
		if k.model == "" || k.hash == "" {
			return engine.Key{}, errors.New("--model and --hash are both required (or pass --key)")
		}
		h, err := hex.DecodeString(strings.TrimPrefix(k.hash, "0x"))
		if err != nil || len(h) == 0 {
			return engine.Key{}, fmt.Errorf("--hash %s: not an even number of hex digits", strconv.Quote(k.hash))
		}
		if err := engine.CheckSalt(k.salt); err != nil {
			return engine.Key{}, fmt.Errorf("--salt: %s", rbEscape(err.Error()))
		}
		if err := engine.CheckKey(engine.ObjectKey(k.model, k.rank, h, k.salt).String(), ns); err != nil {
			return engine.Key{}, fmt.Errorf("--model/--hash/--salt: %s", rbEscape(err.Error()))
		}
		return engine.ObjectKey(k.model, k.rank, h, k.salt), nil
	}
	return engine.Key{}, errors.New("no key given: pass --key, or --model and --hash (with --rank, --salt)")
}

// rbLayoutRows renders a layout for humans.
func rbLayoutRows(l engine.Layout, cfg engine.Config) [][]string {
	return [][]string{
		{"device size", fmt.Sprintf("%d (%s)", l.DeviceSize, rbBytes(l.DeviceSize))},
		{"capacity", fmt.Sprintf("%d (%s)", l.Capacity, rbBytes(l.Capacity))},
		{"block_align", strconv.Itoa(l.BlockAlign)},
		{"header_bytes", strconv.Itoa(l.HeaderBytes)},
		{"slot_bytes", fmt.Sprintf("%d (%s)", l.SlotBytes, rbBytes(l.SlotBytes))},
		{"meta_total_bytes", fmt.Sprintf("%d (%s)", l.MetaTotalBytes, rbBytes(l.MetaTotalBytes))},
		{"containers", fmt.Sprintf("[0, %d) and [%d, %d), payload capacity %d each", l.ContainerBytes, l.ContainerOffset[1], l.ContainerOffset[1]+l.ContainerBytes, l.PayloadCap)},
		{"data_base_offset", strconv.FormatInt(l.DataBase, 10)},
		{"slots", strconv.FormatInt(l.MaxSlots, 10)},
		{"meta_magic / version", fmt.Sprintf("%s / %d", cfg.MetaMagic, cfg.MetaVersion)},
		{"namespace", string(cfg.Namespace)},
		{"checkpoint format", string(cfg.CheckpointFormat)},
	}
}

type rbLayoutJSON struct {
	DeviceSize       int64  `json:"device_size"`
	CapacityBytes    int64  `json:"capacity_bytes"`
	BlockAlign       int    `json:"block_align"`
	HeaderBytes      int    `json:"header_bytes"`
	SlotBytes        int64  `json:"slot_bytes"`
	MetaTotalBytes   int64  `json:"meta_total_bytes"`
	ContainerBytes   int64  `json:"container_bytes"`
	PayloadCapacity  int64  `json:"container_payload_capacity"`
	DataBaseOffset   int64  `json:"data_base_offset"`
	MaxSlots         int64  `json:"max_slots"`
	MetaMagic        string `json:"meta_magic"`
	MetaVersion      uint32 `json:"meta_version"`
	Namespace        string `json:"namespace"`
	CheckpointFormat string `json:"checkpoint_format"`
}

func rbLayoutOf(l engine.Layout, cfg engine.Config) rbLayoutJSON {
	return rbLayoutJSON{l.DeviceSize, l.Capacity, l.BlockAlign, l.HeaderBytes, l.SlotBytes, l.MetaTotalBytes,
		l.ContainerBytes, l.PayloadCap, l.DataBase, l.MaxSlots, cfg.MetaMagic, cfg.MetaVersion, string(cfg.Namespace), string(cfg.CheckpointFormat)}
}
