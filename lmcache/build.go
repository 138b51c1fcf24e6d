package lmcache

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Defaults that differ between the two backends (raw-block-reference.md §5).
const (
	mpMetaTotal     = 256 << 20
	legacyMetaTotal = 128 << 20
	maxPID          = 0xFFFF
)

// build reads and validates every setting, in the order LMCache's adapter checks them.
func build(s *source) (Config, []Warning, error) {
	var warns []Warning
	c := Config{Flavor: s.flavor}
	if t, err := s.text("type", "raw_block"); err != nil {
		return c, nil, err
	} else if s.flavor == MP && t != "raw_block" {
		return c, nil, fieldErr(s.field("type"), "%q is not the raw_block adapter", t)
	}
	devs, err := devicePaths(s)
	if err != nil {
		return c, nil, err
	}
	if persist, err := s.boolean("persist_enabled", true); err != nil {
		return c, nil, err
	} else if !persist {
		return c, nil, fieldErr(s.field("persist_enabled"), "raw_block requires persist_enabled=true")
	}
	l, err := readLayout(s)
	if err != nil {
		return c, nil, err
	}
	if err := variantLayout(s); err != nil {
		return c, nil, err
	}
	if l.capacity < 0 {
		warns = append(warns, Warning{Field: s.field("capacity_bytes"), Message: "negative: read as 0, the whole device, as LMCache does"})
		l.capacity = 0
	}
	if err := readIO(s, &c); err != nil {
		return c, nil, err
	}
	if c.FDP, err = readFDP(s, c); err != nil {
		return c, nil, err
	}
	for i, name := range []string{"num_store_workers", "num_lookup_workers", "num_load_workers"} {
		n, err := s.integer(name, [3]int64{2, 1, 4}[i])
		if err != nil {
			return c, nil, err
		}
		if n <= 0 || n > 1<<16 {
			return c, nil, fieldErr(s.field(name), "%d must be > 0", n)
		}
		l.workers[i] = int(n)
	}
	if s.has("eviction") {
		warns = append(warns, Warning{Field: s.field("eviction"), Message: "not applied: the raw-block engine never evicts; eviction is the cache controller's (rbctl bench/simulate --eviction)"})
	}
	for _, d := range devs {
		d.Engine = l.engineConfig(s.flavor, d.Path, c.QueueDepth)
		if err := d.Engine.Validate(); err != nil {
			return c, nil, fieldErr("(rbctl engine)", "%v", err)
		}
		c.Devices = append(c.Devices, d)
	}
	return c, warns, nil
}

// devicePaths reads device_path and, in the legacy spelling, per_tp_device_paths.
func devicePaths(s *source) ([]Device, error) {
	path, err := s.text("device_path", "")
	if err != nil {
		return nil, err
	}
	v, hasTP := s.get("per_tp_device_paths")
	if s.flavor == MP {
		if _, present := s.vals["per_tp_device_paths"]; present {
			return nil, fieldErr(s.field("per_tp_device_paths"), "not supported in MP raw_block mode (one device per adapter; the legacy extra_config spelling maps TP ranks to devices)")
		}
		if path == "" {
			return nil, fieldErr(s.field("device_path"), "must be a non-empty string")
		}
		return []Device{{Path: path}}, nil
	}
	if hasTP {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fieldErr(s.field("per_tp_device_paths"), "must be a mapping from TP rank to device path, not %s", kind(v))
		}
		if len(m) > 0 {
			return perTP(s, m)
		}
	}
	if path == "" {
		return nil, fieldErr(s.field("device_path"), "is required (or per_tp_device_paths for TP > 1)")
	}
	return []Device{{Path: path}}, nil
}

// perTP reads the TP rank → path map: ranks are integers (JSON keys are strings, as in
// LMCache's tests), paths non-empty and distinct.
func perTP(s *source, m map[string]any) ([]Device, error) {
	field := s.field("per_tp_device_paths")
	seen := map[string]string{}
	var out []Device
	for k, v := range m {
		r, err := strconv.Atoi(strings.TrimSpace(k))
		if err != nil || r < 0 || r > 1<<16 {
			return nil, fieldErr(field, "key %q is not a TP rank (an integer >= 0)", k)
		}
		p, ok := v.(string)
		if !ok || p == "" {
			return nil, fieldErr(field, "rank %d: the device path must be a non-empty string", r)
		}
		if other, dup := seen[p]; dup {
			return nil, fieldErr(field, "duplicate device path %q (ranks %s and %s); each TP rank needs its own device", p, other, k)
		}
		seen[p] = k
		out = append(out, Device{Rank: r, TP: true, Path: p})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rank < out[j].Rank })
	for i := 1; i < len(out); i++ {
		if out[i].Rank == out[i-1].Rank {
			return nil, fieldErr(field, "rank %d listed twice", out[i].Rank)
		}
	}
	return out, nil
}

// readLayout reads the on-device layout and checkpoint settings with LMCache's checks.
func readLayout(s *source) (layout, error) {
	var l layout
	slot, ok := s.get("slot_bytes")
	if !ok {
		if s.flavor == Legacy {
			return l, fieldErr(s.field("slot_bytes"), "is required here: LMCache's legacy backend derives it from the model's chunk size (round_up(header_bytes + chunk bytes, block_align)), which a config file does not carry")
		}
		return l, fieldErr(s.field("slot_bytes"), "must be a positive integer")
	}
	var err error
	if l.slot, err = s.toInt("slot_bytes", slot); err != nil {
		return l, err
	}
	if l.slot <= 0 {
		return l, fieldErr(s.field("slot_bytes"), "must be a positive integer")
	}
	align, err := s.integer("block_align", 4096)
	if err != nil {
		return l, err
	}
	header, err := s.integer("header_bytes", 4096)
	if err != nil {
		return l, err
	}
	metaDefault := int64(mpMetaTotal)
	if s.flavor == Legacy {
		metaDefault = legacyMetaTotal
	}
	if l.meta, err = s.integer("meta_total_bytes", metaDefault); err != nil {
		return l, err
	}
	if l.capacity, err = s.integer("capacity_bytes", 0); err != nil {
		return l, err
	}
	if align <= 0 || align&(align-1) != 0 || align > 1<<30 {
		return l, fieldErr(s.field("block_align"), "must be a power of 2, got %d", align)
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"slot_bytes", l.slot}, {"header_bytes", header}, {"meta_total_bytes", l.meta}} {
		if f.v%align != 0 {
			return l, fieldErr(s.field(f.name), "%d must be a multiple of block_align %d", f.v, align)
		}
	}
	if header < 24 {
		return l, fieldErr(s.field("header_bytes"), "%d is below the 24-byte slot header", header)
	}
	if l.slot < header+1 {
		return l, fieldErr(s.field("slot_bytes"), "%d must be >= header_bytes + 1 (%d)", l.slot, header+1)
	}
	if l.meta < 4*align {
		// LMCache accepts it, but then no checkpoint payload fits (each of the two containers
		// is a header block plus payload) and every checkpoint is skipped; rbctl refuses it.
		return l, fieldErr(s.field("meta_total_bytes"), "%d leaves no room for the two metadata containers (a header block and a payload each); use at least 4 × block_align = %d", l.meta, 4*align)
	}
	if l.capacity > 0 && l.capacity <= l.meta {
		return l, fieldErr(s.field("capacity_bytes"), "%d must leave space for at least one slot after meta_total_bytes %d", l.capacity, l.meta)
	}
	l.align, l.header = int(align), int(header)
	if l.magic, err = s.text("meta_magic", "LMCIDX01"); err != nil {
		return l, err
	}
	if len(l.magic) != 8 || !isASCII(l.magic) {
		return l, fieldErr(s.field("meta_magic"), "%q must be 8 ASCII bytes (LMCache packs it into an 8-byte field)", l.magic)
	}
	ver, err := s.integer("meta_version", 1)
	if err != nil {
		return l, err
	}
	if ver < 0 || ver > 1<<32-1 {
		return l, fieldErr(s.field("meta_version"), "%d does not fit the header's u32", ver)
	}
	l.version = uint32(ver)
	sec, err := s.integer("meta_checkpoint_interval_sec", 60)
	if err != nil {
		return l, err
	}
	l.interval = time.Duration(min(max(sec, 1), 1<<31)) * time.Second // LMCache wakes every max(1, interval) s
	ms, err := s.integer("meta_idle_quiet_ms", 100)
	if err != nil {
		return l, err
	}
	l.idle = time.Duration(min(max(ms, 0), 1<<40)) * time.Millisecond
	if l.periodic, err = s.boolean("meta_enable_periodic", true); err != nil {
		return l, err
	}
	if l.loadOnInit, err = s.boolean("load_checkpoint_on_init", true); err != nil {
		return l, err
	}
	if l.verify, err = s.boolean("meta_verify_on_load", true); err != nil {
		return l, err
	}
	return l, nil
}

// readIO reads the I/O engine settings: io_engine wins over the legacy use_iouring /
// use_uring flags, which select io_uring when io_engine is not set.
func readIO(s *source, c *Config) error {
	var err error
	odirectDefault := s.flavor == MP // MP true, legacy false
	if c.UseODirect, err = s.boolean("use_odirect", odirectDefault); err != nil {
		return err
	}
	if c.EnableZeroCopy, err = s.boolean("enable_zero_copy", true); err != nil {
		return err
	}
	eng, err := s.text("io_engine", "")
	if err != nil {
		return err
	}
	useIOUring, err := s.boolean("use_iouring", false)
	if err != nil {
		return err
	}
	useUring, err := s.boolean("use_uring", false)
	if err != nil {
		return err
	}
	switch strings.ToLower(eng) {
	case "":
		c.IOEngine = EnginePosix
		if useIOUring || useUring {
			c.IOEngine = EngineIOUring
		}
	case EnginePosix, EngineIOUring:
		c.IOEngine = strings.ToLower(eng)
	default:
		return fieldErr(s.field("io_engine"), "%q: must be one of: io_uring, posix", eng)
	}
	qd, err := s.integer("iouring_queue_depth", 256)
	if err != nil {
		return err
	}
	if qd <= 0 || qd > 1<<16 {
		return fieldErr(s.field("iouring_queue_depth"), "%d must be > 0 (and at most 65536)", qd)
	}
	c.QueueDepth = int(qd)
	if c.UseUringCmd, err = s.boolean("use_uring_cmd", false); err != nil {
		return err
	}
	if c.UseUringCmd && c.IOEngine != EngineIOUring {
		return fieldErr(s.field("use_uring_cmd"), "requires io_engine io_uring")
	}
	if c.MaxTransfer, err = s.integer("max_data_transfer_size", 0); err != nil {
		return err
	}
	return nil
}

// readFDP reads the FDP keys with LMCache's normalisation and checks.
func readFDP(s *source, c Config) (FDP, error) {
	var f FDP
	var err error
	if f.Enabled, err = s.boolean("fdp_enabled", false); err != nil {
		return f, err
	}
	passthru := c.IOEngine == EngineIOUring && c.UseUringCmd
	if f.Enabled && !passthru {
		return f, fieldErr(s.field("fdp_enabled"), "requires io_engine io_uring and use_uring_cmd true")
	}
	if v, ok := s.get("fdp_placement_ids"); ok {
		list, isList := v.([]any)
		if !isList {
			return f, fieldErr(s.field("fdp_placement_ids"), "must be a list, not %s", kind(v))
		}
		if f.Enabled { // LMCache ignores the list without FDP
			if f.PlacementIDs, err = placementIDs(s, list); err != nil {
				return f, err
			}
		}
	}
	if f.DataPolicy, err = policyName(s, "fdp_data_placement_policy", f.Enabled, PolicyCacheSaltPrefix, PolicyNone, PolicyCacheSaltPrefix, PolicyCacheSaltRank); err != nil {
		return f, err
	}
	if f.SlotReuse, err = policyName(s, "fdp_slot_reuse_policy", f.Enabled, ReusePIDAffinity, ReuseNone, ReusePIDAffinity); err != nil {
		return f, err
	}
	if v, ok := s.get("meta_checkpoint_placement_id"); ok {
		field := s.field("meta_checkpoint_placement_id")
		if !passthru {
			return f, fieldErr(field, "requires io_engine io_uring and use_uring_cmd true")
		}
		id, err := pid(s, "meta_checkpoint_placement_id", v)
		if err != nil {
			return f, err
		}
		for _, d := range f.PlacementIDs {
			if d == id {
				return f, fieldErr(field, "%d must not overlap with fdp_placement_ids", id)
			}
		}
		f.MetadataPID = id
	}
	return f, nil
}

// placementIDs checks fdp_placement_ids: identifiers 1..65535, no duplicates, not empty.
func placementIDs(s *source, list []any) ([]uint16, error) {
	field := s.field("fdp_placement_ids")
	if len(list) == 0 {
		return nil, fieldErr(field, "must not be empty")
	}
	if len(list) > maxPID {
		return nil, fieldErr(field, "lists %d identifiers; there are at most %d", len(list), maxPID)
	}
	out := make([]uint16, 0, len(list))
	seen := map[uint16]bool{}
	for _, v := range list {
		id, err := pid(s, "fdp_placement_ids", v)
		if err != nil {
			return nil, err
		}
		if seen[id] {
			return nil, fieldErr(field, "must not contain duplicates (%d twice)", id)
		}
		seen[id] = true
		out = append(out, id)
	}
	return out, nil
}

// pid checks one placement identifier: an integer 1..65535 (0 is the device default's).
func pid(s *source, name string, v any) (uint16, error) {
	field := s.field(name)
	n, ok := v.(json.Number)
	if !ok {
		return 0, fieldErr(field, "must contain integers, not %s", kind(v))
	}
	id, err := strconv.ParseInt(string(n), 10, 64)
	switch {
	case err != nil:
		return 0, fieldErr(field, "%s is not an integer", n)
	case id == 0:
		return 0, fieldErr(field, "must not contain placement identifier 0 (reserved for default NVMe writes)")
	case id < 0 || id > maxPID:
		return 0, fieldErr(field, "%d: placement identifiers are 1..=%d", id, maxPID)
	}
	return uint16(id), nil
}

// policyName normalises an FDP policy field: unset or "" gives def with FDP on and "none"
// off; names are case-insensitive; anything but none needs fdp_enabled.
func policyName(s *source, name string, enabled bool, def string, allowed ...string) (string, error) {
	v, err := s.text(name, "")
	if err != nil {
		return "", err
	}
	if v == "" {
		if enabled {
			return def, nil
		}
		return "none", nil
	}
	low := strings.ToLower(v)
	ok := false
	for _, a := range allowed {
		ok = ok || a == low
	}
	if !ok {
		sorted := append([]string(nil), allowed...)
		sort.Strings(sorted)
		return "", fieldErr(s.field(name), "%q: must be one of: %s", v, strings.Join(sorted, ", "))
	}
	if low != "none" && !enabled {
		return "", fieldErr(s.field(name), "%s requires fdp_enabled=true", low)
	}
	return low, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// variantLayout reads the keys of LMCache variants whose layout or checkpoint format rbctl
// does not implement (docs/compat.md, "Keys of other LMCache versions"). Each is honoured
// when its value leaves the layout as rbctl lays it out, and refused with the reason
// otherwise: never only warned about, since a cache rbctl lays out differently from the
// program that wrote it loses data on the first write.
func variantLayout(s *source) error {
	off, err := s.integer("base_offset_bytes", 0)
	if err != nil {
		return err
	}
	if off != 0 {
		return fieldErr(s.field("base_offset_bytes"), "%d: the cache of this LMCache variant starts at that offset (metadata and slots in a window of the device); "+
			"rbctl lays a cache out from byte 0, so it would read no checkpoint and write over the bytes before the window. Only 0 is supported "+
			"(give rbctl a partition or device that starts at the window)", off)
	}
	useFDP, err := s.boolean("use_fdp", false)
	if err != nil {
		return err
	}
	if useFDP {
		return fieldErr(s.field("use_fdp"), "this LMCache variant's FDP (fdp_ruh_ids, fdp_metadata_ruh_ids, fdp_metadata_mode per_ruh) reserves meta_total_bytes once per metadata "+
			"reclaim unit handle, so its slots start at another offset than rbctl's; rbctl implements LMCache's own FDP keys (fdp_enabled, fdp_placement_ids, "+
			"meta_checkpoint_placement_id) and refuses this layout")
	}
	for _, k := range []string{"fdp_ruh_ids", "fdp_data_ruh_ids", "fdp_metadata_ruh_ids", "fdp_directive_type", "fdp_metadata_mode"} {
		s.get(k) // without use_fdp they change nothing (the variant reads them only with FDP on)
	}
	for _, k := range []string{"meta_full_checkpoint_interval_sec", "meta_full_checkpoint_max_deltas"} {
		if s.has(k) {
			return fieldErr(s.field(k), "belongs to LMCache's base+delta checkpoints (LMCD delta records after a full base, PRs #3225/#3226); "+
				"rbctl reads and writes only full checkpoints and would take the base for the newest state, losing every key of the deltas")
		}
	}
	return nil
}
