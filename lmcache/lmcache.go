// Package lmcache is rbctl's side of an LMCache raw-block configuration file (JSON): it
// reads one into rbctl's engine configuration and placement choice, so an LMCache user can
// reuse theirs, formats the devices it names (Format), and gives bench and simulate the
// config's placement as one run (File, RunName, Placement.RunPolicy). It takes the MP
// adapter's raw_block object ({"type": "raw_block", "device_path": ..., ...}, what
// LMCache's --l2-adapter takes) and the legacy backend's spelling, an LMCache config whose
// extra_config holds "rust_raw_block.<key>" entries (or that extra_config object alone),
// with LMCache's defaults for each and its validation, field by field. Errors name the
// JSON field as the file spells it; keys LMCache does not have are returned as warnings.
//
// Placement needs the device: fdp_placement_ids and meta_checkpoint_placement_id are FDP
// placement identifiers, which FDP.Resolve maps to the device's placement handles from its
// RUH status (docs/compat.md, "LMCache config files").
//
// The package sits above the engine, devices, placement and cache, which never import it;
// LMCache's two data-placement policies themselves (cache_salt_prefix, cache_salt_rank)
// are placement's, as placement.Parse selects them by name (docs/architecture.md).
package lmcache

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/engine"
)

// MaxBytes bounds a config file; Load refuses a larger one before decoding it.
const MaxBytes = 1 << 20

// Flavor is which of LMCache's two raw-block backends the file configures.
type Flavor string

const (
	MP     Flavor = "mp"     // the MP adapter's raw_block object
	Legacy Flavor = "legacy" // extra_config["rust_raw_block.<key>"] of the non-MP backend
)

// LMCache's I/O engine names (io_engine).
const (
	EnginePosix   = "posix"
	EngineIOUring = "io_uring"
)

// Warning is a key Load read past: unknown to LMCache's raw-block backend, or outside it.
type Warning struct {
	Field   string // as spelled in the file
	Message string
}

func (w Warning) String() string { return w.Field + ": " + w.Message }

// Config is what a file configures.
type Config struct {
	Flavor Flavor
	// Devices has one entry for device_path, or one per per_tp_device_paths rank (legacy
	// only), in rank order. Each Engine is a complete engine.Config for that device:
	// layout, checkpoint cadence, verification, workers, queue depth and DevicePath (the
	// string LMCache records in its checkpoints). Placement fields are left unset until
	// FDP.Resolve has seen the device (Placement.Apply).
	Devices []Device

	IOEngine    string // io_engine after LMCache's normalisation: posix or io_uring
	UseUringCmd bool   // use_uring_cmd: NVMe passthrough (/dev/ngXnY)
	UseODirect  bool   // use_odirect (LMCache ignores it with use_uring_cmd)
	QueueDepth  int    // iouring_queue_depth
	// MaxTransfer is max_data_transfer_size: bytes per passthrough command, 0 or negative
	// for the device's limit (rbctl's nvme.DeviceOptions.MaxTransfer).
	MaxTransfer    int64
	EnableZeroCopy bool // enable_zero_copy: rbctl reads into aligned buffers directly whenever it can

	FDP FDP
}

// Device is one cache device of the file.
type Device struct {
	Rank   int    // TP rank (0 for device_path)
	TP     bool   // from per_tp_device_paths: only worker Rank's keys belong on it
	Path   string // the device path as configured
	Engine engine.Config
}

// FDP is the file's placement settings, after LMCache's defaulting.
type FDP struct {
	Enabled bool // fdp_enabled
	// PlacementIDs is fdp_placement_ids: the data placement pool, in assignment order; nil
	// means every non-zero identifier the device reports except MetadataPID.
	PlacementIDs []uint16
	DataPolicy   string // fdp_data_placement_policy: none, cache_salt_prefix or cache_salt_rank
	SlotReuse    string // fdp_slot_reuse_policy: none or pid_affinity
	MetadataPID  uint16 // meta_checkpoint_placement_id; 0 when not set (0 itself is refused)
}

// LMCache's policy names.
const (
	PolicyNone            = "none"
	PolicyCacheSaltPrefix = "cache_salt_prefix"
	PolicyCacheSaltRank   = "cache_salt_rank"
	ReuseNone             = "none"
	ReusePIDAffinity      = "pid_affinity"
)

// OpenOptions are the devices.Options the file asks for: passthrough with use_uring_cmd,
// else io_uring or posix; O_DIRECT as use_odirect (never with passthrough); the queue depth.
func (c Config) OpenOptions() devices.Options {
	o := devices.DefaultOptions()
	switch {
	case c.UseUringCmd:
		o.IOPath = devices.PathPassthru
	case c.IOEngine == EngineIOUring:
		o.IOPath = devices.PathUring
	default:
		o.IOPath = devices.PathPosix
	}
	o.Direct = c.UseODirect && !c.UseUringCmd
	o.QueueDepth = c.QueueDepth
	return o
}

// Load reads a config file: at most MaxBytes of JSON holding one object. It returns the
// configuration, the keys it did not use, and an error wrapping ErrConfig (a *FieldError
// naming the field) for the first setting LMCache would refuse.
func Load(r io.Reader) (Config, []Warning, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxBytes+1))
	if err != nil {
		return Config{}, nil, fmt.Errorf("%w: read: %w", ErrConfig, err)
	}
	if len(b) > MaxBytes {
		return Config{}, nil, fmt.Errorf("%w: larger than %d bytes; a raw-block config is a few hundred", ErrConfig, MaxBytes)
	}
	top, err := decodeObject(b)
	if err != nil {
		return Config{}, nil, err
	}
	src, err := newSource(top)
	if err != nil {
		return Config{}, nil, err
	}
	c, warns, err := build(src)
	if err != nil {
		return Config{}, nil, err
	}
	warns = append(warns, src.unknown()...)
	return c, append(src.ignored, warns...), nil
}

// decodeObject decodes one JSON object with exact numbers and nothing after it.
func decodeObject(b []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: not JSON: %w", ErrConfig, err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the JSON object", ErrConfig)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: the file holds %s, want a JSON object", ErrConfig, kind(v))
	}
	return m, nil
}

// layout is the settings every device of the file shares.
type layout struct {
	slot, capacity, meta int64
	align, header        int
	magic                string
	version              uint32
	interval             time.Duration
	idle                 time.Duration
	periodic, loadOnInit bool
	verify               bool
	workers              [3]int
}

// engineConfig is the engine.Config of one device.
func (l layout) engineConfig(flavor Flavor, path string, queueDepth int) engine.Config {
	e := engine.DefaultConfig()
	e.DevicePath = path
	e.SlotBytes, e.CapacityBytes, e.MetaTotalBytes = l.slot, l.capacity, l.meta
	e.BlockAlign, e.HeaderBytes = l.align, l.header
	e.MetaMagic, e.MetaVersion = l.magic, l.version
	e.Periodic, e.CheckpointInterval, e.IdleQuiet = l.periodic, l.interval, l.idle
	e.LoadCheckpoint, e.VerifyOnLoad = l.loadOnInit, l.verify
	e.StoreWorkers, e.LookupWorkers, e.LoadWorkers = l.workers[0], l.workers[1], l.workers[2]
	e.QueueDepth = queueDepth
	// LMCache reads only its v1 JSON checkpoint: write that, so LMCache can open the device.
	e.CheckpointFormat = engine.CheckpointLMCacheV1
	e.Namespace = engine.NamespaceObject
	if flavor == Legacy {
		e.Namespace = engine.NamespaceLegacy
	}
	return e
}
