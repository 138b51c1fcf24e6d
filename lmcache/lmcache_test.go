package lmcache

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/engine"
)

func load(t *testing.T, js string) (Config, []Warning) {
	t.Helper()
	c, w, err := Load(strings.NewReader(js))
	if err != nil {
		t.Fatalf("Load(%s): %v", js, err)
	}
	return c, w
}

// TestLoadDefaults: a minimal file of each spelling gets LMCache's defaults for that
// backend (raw-block-reference.md §5).
func TestLoadDefaults(t *testing.T) {
	cases := []struct {
		name, js     string
		flavor       Flavor
		field        string // how slot_bytes is spelled in messages
		meta         int64
		odirect      bool
		namespace    engine.Namespace
		deviceEngine string
	}{
		{"mp", `{"type":"raw_block","device_path":"/dev/nvme0n1","slot_bytes":1048576}`, MP, "slot_bytes", 256 << 20, true, engine.NamespaceObject, devices.PathPosix},
		{"mp without type", `{"device_path":"/dev/nvme0n1","slot_bytes":1048576}`, MP, "slot_bytes", 256 << 20, true, engine.NamespaceObject, devices.PathPosix},
		{"legacy", `{"chunk_size":256,"extra_config":{"rust_raw_block.device_path":"/dev/nvme0n1","rust_raw_block.slot_bytes":1048576,"p2p_host":"x"}}`, Legacy, `extra_config["rust_raw_block.slot_bytes"]`, 128 << 20, false, engine.NamespaceLegacy, devices.PathPosix},
		{"legacy extra_config alone", `{"rust_raw_block.device_path":"/dev/nvme0n1","rust_raw_block.slot_bytes":1048576}`, Legacy, "rust_raw_block.slot_bytes", 128 << 20, false, engine.NamespaceLegacy, devices.PathPosix},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := load(t, tc.js)
			if c.Flavor != tc.flavor || len(c.Devices) != 1 {
				t.Fatalf("flavor %s, %d devices", c.Flavor, len(c.Devices))
			}
			d := c.Devices[0]
			e := d.Engine
			want := engine.DefaultConfig()
			if d.Path != "/dev/nvme0n1" || e.DevicePath != "/dev/nvme0n1" || d.Rank != 0 {
				t.Errorf("device %+v, engine DevicePath %q", d, e.DevicePath)
			}
			checks := []struct {
				what      string
				got, want any
			}{
				{"slot_bytes", e.SlotBytes, int64(1 << 20)},
				{"block_align", e.BlockAlign, 4096},
				{"header_bytes", e.HeaderBytes, 4096},
				{"meta_total_bytes", e.MetaTotalBytes, tc.meta},
				{"capacity_bytes", e.CapacityBytes, int64(0)},
				{"meta_magic", e.MetaMagic, "LMCIDX01"},
				{"meta_version", e.MetaVersion, uint32(1)},
				{"meta_checkpoint_interval_sec", e.CheckpointInterval, 60 * time.Second},
				{"meta_idle_quiet_ms", e.IdleQuiet, 100 * time.Millisecond},
				{"meta_enable_periodic", e.Periodic, true},
				{"load_checkpoint_on_init", e.LoadCheckpoint, true},
				{"meta_verify_on_load", e.VerifyOnLoad, true},
				{"workers", [3]int{e.StoreWorkers, e.LookupWorkers, e.LoadWorkers}, [3]int{2, 1, 4}},
				{"engine queue depth", e.QueueDepth, 256},
				{"namespace", e.Namespace, tc.namespace},
				{"checkpoint format", e.CheckpointFormat, engine.CheckpointLMCacheV1},
				{"payload checksum (rbctl default)", e.PayloadChecksum, want.PayloadChecksum},
				{"placer", e.Placer, want.Placer},
				{"use_odirect", c.UseODirect, tc.odirect},
				{"io_engine", c.IOEngine, EnginePosix},
				{"iouring_queue_depth", c.QueueDepth, 256},
				{"use_uring_cmd", c.UseUringCmd, false},
				{"enable_zero_copy", c.EnableZeroCopy, true},
				{"max_data_transfer_size", c.MaxTransfer, int64(0)},
				{"fdp", fmt.Sprint(c.FDP), fmt.Sprint(FDP{DataPolicy: "none", SlotReuse: "none"})},
				{"open engine", c.OpenOptions().IOPath, tc.deviceEngine},
				{"open direct", c.OpenOptions().Direct, tc.odirect},
				{"open queue depth", c.OpenOptions().QueueDepth, 256},
			}
			for _, ch := range checks {
				if fmt.Sprint(ch.got) != fmt.Sprint(ch.want) {
					t.Errorf("%s = %v, want %v", ch.what, ch.got, ch.want)
				}
			}
			if err := e.Validate(); err != nil {
				t.Errorf("engine config invalid: %v", err)
			}
			// The field spelling follows the file.
			_, _, err := Load(strings.NewReader(strings.Replace(tc.js, "1048576", "1048577", 1)))
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, ErrConfig) {
				t.Errorf("misaligned slot_bytes: %v, want a FieldError on %s", err, tc.field)
			}
		})
	}
}

// TestLoadSettings: every mapped key reaches its rbctl field.
func TestLoadSettings(t *testing.T) {
	c, warns := load(t, `{"type":"raw_block","device_path":"/dev/ng0n1","slot_bytes":65536,"capacity_bytes":67108864,
		"use_odirect":false,"block_align":512,"header_bytes":1024,"meta_total_bytes":1048576,"meta_magic":"RBCTLX01",
		"meta_version":3,"meta_checkpoint_interval_sec":0,"meta_idle_quiet_ms":5,"meta_enable_periodic":false,
		"load_checkpoint_on_init":false,"meta_verify_on_load":0,"enable_zero_copy":false,"io_engine":"IO_URING",
		"iouring_queue_depth":64,"use_uring_cmd":true,"max_data_transfer_size":131072,"fdp_enabled":true,
		"fdp_placement_ids":[3,1],"fdp_data_placement_policy":"Cache_Salt_Rank","fdp_slot_reuse_policy":"none",
		"meta_checkpoint_placement_id":7,"num_store_workers":3,"num_lookup_workers":2,"num_load_workers":8,"persist_enabled":true}`)
	if len(warns) != 0 {
		t.Errorf("warnings %v", warns)
	}
	e := c.Devices[0].Engine
	got := words(e.SlotBytes, e.CapacityBytes, e.BlockAlign, e.HeaderBytes, e.MetaTotalBytes, e.MetaMagic, e.MetaVersion,
		e.CheckpointInterval, e.IdleQuiet, e.Periodic, e.LoadCheckpoint, e.VerifyOnLoad, e.StoreWorkers, e.LookupWorkers, e.LoadWorkers, e.QueueDepth)
	if want := "65536 67108864 512 1024 1048576 RBCTLX01 3 1s 5ms false false false 3 2 8 64"; got != want {
		t.Errorf("engine config %s, want %s", got, want)
	}
	if got := words(c.UseODirect, c.EnableZeroCopy, c.IOEngine, c.QueueDepth, c.UseUringCmd, c.MaxTransfer); got != "false false io_uring 64 true 131072" {
		t.Errorf("io settings %s", got)
	}
	if got := fmt.Sprintf("%+v", c.FDP); got != "{Enabled:true PlacementIDs:[3 1] DataPolicy:cache_salt_rank SlotReuse:none MetadataPID:7}" {
		t.Errorf("fdp %s", got)
	}
	if o := c.OpenOptions(); o.IOPath != devices.PathPassthru || o.Direct || o.QueueDepth != 64 {
		t.Errorf("open options %+v", o)
	}
}

// words renders values separated by single spaces.
func words(a ...any) string { return strings.TrimSuffix(fmt.Sprintln(a...), "\n") }

// TestLoadFDPDefaults: LMCache's FDP example gets cache_salt_prefix and pid_affinity.
func TestLoadFDPDefaults(t *testing.T) {
	c, _ := load(t, `{"type": "raw_block", "device_path": "/dev/ng0n1", "slot_bytes": 1048576, "io_engine": "io_uring", "use_uring_cmd": true, "fdp_enabled": true, "use_odirect": false}`)
	if f := c.FDP; !f.Enabled || f.PlacementIDs != nil || f.DataPolicy != PolicyCacheSaltPrefix || f.SlotReuse != ReusePIDAffinity || f.MetadataPID != 0 {
		t.Fatalf("fdp %+v", f)
	}
	// Legacy io flags select io_uring when io_engine is unset; an explicit io_engine wins.
	for js, want := range map[string]string{
		`{"device_path":"d","slot_bytes":8192,"use_iouring":true}`:                    EngineIOUring,
		`{"device_path":"d","slot_bytes":8192,"use_uring":1}`:                         EngineIOUring,
		`{"device_path":"d","slot_bytes":8192,"use_uring":true,"io_engine":"posix"}`:  EnginePosix,
		`{"device_path":"d","slot_bytes":8192,"io_engine":"","use_iouring":false}`:    EnginePosix,
		`{"device_path":"d","slot_bytes":8192,"io_engine":null,"use_iouring":true}`:   EngineIOUring,
		`{"device_path":"d","slot_bytes":8192,"block_align":4096.0,"use_uring":true}`: EngineIOUring,
	} {
		if c, _ := load(t, js); c.IOEngine != want {
			t.Errorf("%s: io_engine %s, want %s", js, c.IOEngine, want)
		}
	}
}

// TestLoadErrors: each setting LMCache refuses is refused, naming the field.
func TestLoadErrors(t *testing.T) {
	const base = `"device_path":"/dev/ng0n1","slot_bytes":1048576`
	const fdp = `"io_engine":"io_uring","use_uring_cmd":true,"fdp_enabled":true`
	cases := []struct {
		js, field, msg string
	}{
		{`{"type":"nixl",` + base + `}`, "type", `"nixl" is not the raw_block adapter`},
		{`{"slot_bytes":1048576}`, "device_path", "must be a non-empty string"},
		{`{"device_path":7,"slot_bytes":1048576}`, "device_path", "must be a string"},
		{`{` + base + `,"per_tp_device_paths":{"0":"/a"}}`, "per_tp_device_paths", "not supported in MP raw_block mode"},
		{`{` + base + `,"persist_enabled":false}`, "persist_enabled", "requires persist_enabled=true"},
		{`{"device_path":"d"}`, "slot_bytes", "must be a positive integer"},
		{`{"device_path":"d","slot_bytes":0}`, "slot_bytes", "must be a positive integer"},
		{`{"device_path":"d","slot_bytes":"1M"}`, "slot_bytes", `not the string "1M"`},
		{`{"device_path":"d","slot_bytes":4096.5}`, "slot_bytes", "4096.5 is not an integer"},
		{`{` + base + `,"block_align":3000}`, "block_align", "must be a power of 2, got 3000"},
		{`{` + base + `,"block_align":0}`, "block_align", "must be a power of 2, got 0"},
		{`{"device_path":"d","slot_bytes":1048577}`, "slot_bytes", "must be a multiple of block_align 4096"},
		{`{` + base + `,"header_bytes":100}`, "header_bytes", "must be a multiple of block_align"},
		{`{` + base + `,"meta_total_bytes":1000}`, "meta_total_bytes", "must be a multiple of block_align"},
		{`{` + base + `,"meta_total_bytes":8192}`, "meta_total_bytes", "use at least 4 × block_align = 16384"},
		{`{"device_path":"d","slot_bytes":4096}`, "slot_bytes", "must be >= header_bytes + 1 (4097)"},
		{`{` + base + `,"capacity_bytes":268435456}`, "capacity_bytes", "must leave space for at least one slot"},
		{`{` + base + `,"meta_magic":"LMC"}`, "meta_magic", "must be 8 ASCII bytes"},
		{`{` + base + `,"meta_version":-1}`, "meta_version", "does not fit"},
		{`{` + base + `,"meta_enable_periodic":"false"}`, "meta_enable_periodic", `not the string "false"`},
		{`{` + base + `,"use_odirect":2}`, "use_odirect", "must be true or false"},
		{`{` + base + `,"io_engine":"spdk"}`, "io_engine", "must be one of: io_uring, posix"},
		{`{` + base + `,"iouring_queue_depth":0}`, "iouring_queue_depth", "must be > 0"},
		{`{` + base + `,"use_uring_cmd":true}`, "use_uring_cmd", "requires io_engine io_uring"},
		{`{` + base + `,"fdp_enabled":true}`, "fdp_enabled", "requires io_engine io_uring and use_uring_cmd true"},
		{`{` + base + `,"io_engine":"io_uring","fdp_enabled":true}`, "fdp_enabled", "requires io_engine io_uring and use_uring_cmd true"},
		{`{` + base + `,"meta_checkpoint_placement_id":2}`, "meta_checkpoint_placement_id", "requires io_engine io_uring and use_uring_cmd true"},
		{`{` + base + `,` + fdp + `,"fdp_placement_ids":5}`, "fdp_placement_ids", "must be a list"},
		{`{` + base + `,"fdp_placement_ids":{}}`, "fdp_placement_ids", "must be a list"},
		{`{` + base + `,` + fdp + `,"fdp_placement_ids":[]}`, "fdp_placement_ids", "must not be empty"},
		{`{` + base + `,` + fdp + `,"fdp_placement_ids":[1,0]}`, "fdp_placement_ids", "must not contain placement identifier 0"},
		{`{` + base + `,` + fdp + `,"fdp_placement_ids":[1,-2]}`, "fdp_placement_ids", "placement identifiers are 1..=65535"},
		{`{` + base + `,` + fdp + `,"fdp_placement_ids":[65536]}`, "fdp_placement_ids", "placement identifiers are 1..=65535"},
		{`{` + base + `,` + fdp + `,"fdp_placement_ids":[1,true]}`, "fdp_placement_ids", "must contain integers, not a boolean"},
		{`{` + base + `,` + fdp + `,"fdp_placement_ids":[2,3,2]}`, "fdp_placement_ids", "must not contain duplicates (2 twice)"},
		{`{` + base + `,` + fdp + `,"fdp_data_placement_policy":"hash"}`, "fdp_data_placement_policy", "must be one of: cache_salt_prefix, cache_salt_rank, none"},
		{`{` + base + `,"fdp_data_placement_policy":"cache_salt_rank"}`, "fdp_data_placement_policy", "cache_salt_rank requires fdp_enabled=true"},
		{`{` + base + `,` + fdp + `,"fdp_slot_reuse_policy":"lifo"}`, "fdp_slot_reuse_policy", "must be one of: none, pid_affinity"},
		{`{` + base + `,"fdp_slot_reuse_policy":"pid_affinity"}`, "fdp_slot_reuse_policy", "pid_affinity requires fdp_enabled=true"},
		{`{` + base + `,` + fdp + `,"meta_checkpoint_placement_id":0}`, "meta_checkpoint_placement_id", "must not contain placement identifier 0"},
		{`{` + base + `,` + fdp + `,"fdp_placement_ids":[1,2],"meta_checkpoint_placement_id":2}`, "meta_checkpoint_placement_id", "2 must not overlap with fdp_placement_ids"},
		{`{` + base + `,"num_load_workers":0}`, "num_load_workers", "0 must be > 0"},
		{`{"extra_config":{"rust_raw_block.device_path":"d"}}`, `extra_config["rust_raw_block.slot_bytes"]`, "derives it from the model's chunk size"},
		{`{"extra_config":{"rust_raw_block.slot_bytes":8192}}`, `extra_config["rust_raw_block.device_path"]`, "is required (or per_tp_device_paths for TP > 1)"},
		{`{"extra_config":[1]}`, "extra_config", "must be an object"},
		{`{"rust_raw_block.slot_bytes":8192,"device_path":"d"}`, "(top level)", "use one spelling"},
		{`{"extra_config":{"rust_raw_block.slot_bytes":8192,"rust_raw_block.per_tp_device_paths":["/a"]}}`, `extra_config["rust_raw_block.per_tp_device_paths"]`, "must be a mapping from TP rank to device path"},
		{`{"extra_config":{"rust_raw_block.slot_bytes":8192,"rust_raw_block.per_tp_device_paths":{"0":"/a","1":"/a"}}}`, `extra_config["rust_raw_block.per_tp_device_paths"]`, `duplicate device path "/a"`},
		{`{"extra_config":{"rust_raw_block.slot_bytes":8192,"rust_raw_block.per_tp_device_paths":{"x":"/a"}}}`, `extra_config["rust_raw_block.per_tp_device_paths"]`, `key "x" is not a TP rank`},
		{`{"extra_config":{"rust_raw_block.slot_bytes":8192,"rust_raw_block.per_tp_device_paths":{"0":"/a","00":"/b"}}}`, `extra_config["rust_raw_block.per_tp_device_paths"]`, "rank 0 listed twice"},
		// Layout keys of other LMCache variants: refused with the reason, never only warned.
		{`{` + base + `,"base_offset_bytes":1048576}`, "base_offset_bytes", "rbctl lays a cache out from byte 0"},
		{`{` + base + `,"base_offset_bytes":"4096"}`, "base_offset_bytes", "must be an integer"},
		{`{"extra_config":{"rust_raw_block.device_path":"d","rust_raw_block.slot_bytes":8192,"rust_raw_block.base_offset_bytes":4096}}`, `extra_config["rust_raw_block.base_offset_bytes"]`, "Only 0 is supported"},
		{`{` + base + `,"use_fdp":true,"fdp_ruh_ids":[1,2]}`, "use_fdp", "reserves meta_total_bytes once per metadata"},
		{`{` + base + `,"meta_full_checkpoint_interval_sec":600}`, "meta_full_checkpoint_interval_sec", "rbctl reads and writes only full checkpoints"},
		{`{` + base + `,"meta_full_checkpoint_max_deltas":1024}`, "meta_full_checkpoint_max_deltas", "base+delta checkpoints"},
		{`{"extra_config":{"rust_raw_block.slot_bytes":8192,"rust_raw_block.per_tp_device_paths":{"0":""}}}`, `extra_config["rust_raw_block.per_tp_device_paths"]`, "rank 0: the device path must be a non-empty string"},
	}
	for _, tc := range cases {
		t.Run(tc.field+"/"+tc.msg, func(t *testing.T) {
			_, _, err := Load(strings.NewReader(tc.js))
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Msg, tc.msg) || !errors.Is(err, ErrConfig) {
				t.Fatalf("Load(%s) = %v; want an error on %s containing %q", tc.js, err, tc.field, tc.msg)
			}
			if strings.Contains(err.Error(), "--") {
				t.Errorf("error names a CLI flag: %v", err)
			}
		})
	}
}

// TestLoadInput: the file must be one JSON object, at most MaxBytes.
func TestLoadInput(t *testing.T) {
	for js, msg := range map[string]string{
		``:                                       "not JSON",
		`[1]`:                                    "holds a list, want a JSON object",
		`{"device_path":"d","slot_bytes":8192}x`: "data after the JSON object",
		`{"device_path":"d"`:                     "not JSON",
		`{"device_path":"d","slot_bytes":8192,"pad":"` + strings.Repeat("x", MaxBytes) + `"}`: "larger than 1048576 bytes",
	} {
		_, _, err := Load(strings.NewReader(js))
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), msg) {
			t.Errorf("Load(%.40q) = %v, want %q", js, err, msg)
		}
	}
}

// TestLoadWarnings: unknown keys, keys LMCache has but rbctl does not apply, and legacy
// settings outside extra_config come back as warnings, sorted by field.
// Variant keys that leave the layout as rbctl lays it out are honoured, with no warning.
func TestLoadVariantKeysThatKeepTheLayout(t *testing.T) {
	c, w := load(t, `{"device_path":"d","slot_bytes":8192,"base_offset_bytes":0,"use_fdp":false,"fdp_ruh_ids":[1],"fdp_metadata_mode":"per_ruh"}`)
	if len(w) != 0 || len(c.Devices) != 1 || c.Devices[0].Engine.SlotBytes != 8192 {
		t.Fatalf("config %+v, warnings %v", c, w)
	}
}

func TestLoadWarnings(t *testing.T) {
	_, w := load(t, `{"device_path":"d","slot_bytes":8192,"slot_byte":1,"eviction":{"eviction_policy":"LRU"},"capacity_bytes":-1,"zz":null}`)
	got := fmt.Sprint(w)
	for _, want := range []string{"capacity_bytes: negative: read as 0", "eviction: not applied", "slot_byte: unknown raw-block key", "zz: unknown raw-block key"} {
		if !strings.Contains(got, want) {
			t.Errorf("warnings %s lack %q", got, want)
		}
	}
	if len(w) != 4 {
		t.Errorf("%d warnings, want 4: %s", len(w), got)
	}
	_, w = load(t, `{"chunk_size":256,"local_cpu":true,"extra_config":{"rust_raw_block.device_path":"d","rust_raw_block.slot_bytes":8192,"rust_raw_block.latency_log_path":"l.jsonl","p2p_host":"h"}}`)
	want := `[chunk_size: LMCache engine setting outside extra_config; not read (rbctl reads rust_raw_block.* keys) local_cpu: LMCache engine setting outside extra_config; not read (rbctl reads rust_raw_block.* keys) extra_config["rust_raw_block.latency_log_path"]: unknown raw-block key; ignored]`
	if fmt.Sprint(w) != want {
		t.Errorf("legacy warnings\n%v\nwant\n%s", w, want)
	}
}

// TestLoadPerTP: the legacy per_tp_device_paths gives one engine config per TP rank, in rank
// order, each recording its own device path.
func TestLoadPerTP(t *testing.T) {
	c, _ := load(t, `{"extra_config":{"rust_raw_block.per_tp_device_paths":{"1":"/dev/ng1n1","0":"/dev/ng0n1","3":"/dev/ng3n1","2":"/dev/ng2n1"},
		"rust_raw_block.block_align":4096,"rust_raw_block.header_bytes":4096,"rust_raw_block.meta_total_bytes":4194304,
		"rust_raw_block.meta_enable_periodic":false,"rust_raw_block.slot_bytes":69632}}`)
	if len(c.Devices) != 4 {
		t.Fatalf("%d devices", len(c.Devices))
	}
	for i, d := range c.Devices {
		want := fmt.Sprintf("/dev/ng%dn1", i)
		if d.Rank != i || d.Path != want || d.Engine.DevicePath != want || d.Engine.MetaTotalBytes != 4<<20 || d.Engine.Periodic || d.Engine.SlotBytes != 69632 {
			t.Errorf("device %d: rank %d path %q engine %q meta %d periodic %v", i, d.Rank, d.Path, d.Engine.DevicePath, d.Engine.MetaTotalBytes, d.Engine.Periodic)
		}
	}
	// An empty map with device_path is the TP=1 setup.
	c, _ = load(t, `{"extra_config":{"rust_raw_block.per_tp_device_paths":{},"rust_raw_block.device_path":"/x","rust_raw_block.slot_bytes":8192}}`)
	if len(c.Devices) != 1 || c.Devices[0].Path != "/x" {
		t.Fatalf("devices %+v", c.Devices)
	}
}
