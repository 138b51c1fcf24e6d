package lmcache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/reports/cachereport"
)

// An MP raw_block config on a plain file: the layout is the file's, the checkpoint is
// LMCache's v1 and records the configured device_path.
func TestFormatLMCacheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.img")
	if err := blockdev.CreateFile(path, 64<<20); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`{"type":"raw_block","device_path":%q,"slot_bytes":69632,"meta_total_bytes":4194304,"surprise":1}`, path)
	out, warns, err := Format(context.Background(), strings.NewReader(conf), false)
	if err != nil {
		t.Fatal(err)
	}
	if d := out.Devices; len(d) != 1 || d[0].Device != path || d[0].Placement != "none" || d[0].State != cachereport.Formatted || len(warns) != 1 {
		t.Fatalf("formatted %+v, warnings %v", out, warns)
	}
	dev, err := devices.Open(path, devices.Options{IOPath: devices.PathPosix, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	cfg, err := engine.DetectConfig(dev)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SlotBytes != 69632 || cfg.MetaTotalBytes != 4<<20 || cfg.CheckpointFormat != engine.CheckpointLMCacheV1 {
		t.Fatalf("detected %+v", cfg)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b[:4<<20]), fmt.Sprintf(`"device_path": %q`, path)) && !strings.Contains(string(b[:4<<20]), fmt.Sprintf(`"device_path":%q`, path)) {
		t.Fatal("the v1 checkpoint does not record the configured device_path")
	}
}

// fdp_enabled on the emulated FDP SSD: data placement identifiers and the metadata one are
// resolved against the device's own; an identifier the device lacks is refused before
// anything is written.
func TestFormatLMCacheFDP(t *testing.T) {
	spec := "emu:" + filepath.Join(t.TempDir(), "e.img") + "?size=128M&ru=1M&ruhs=4&op=0.15"
	if _, err := emu.Create(spec); err != nil {
		t.Fatal(err)
	}
	od, err := devices.OpenDevice(spec, devices.Options{})
	if err != nil || od.FDP == nil {
		t.Fatalf("open %s: %v (%v)", spec, err, od)
	}
	pids := od.FDP.PIDs()
	od.Close()
	if len(pids) < 3 {
		t.Fatalf("device PIDs %v", pids)
	}
	meta := pids[len(pids)-1]
	conf := func(extra string) string {
		return fmt.Sprintf(`{"type":"raw_block","device_path":%q,"slot_bytes":69632,"meta_total_bytes":4194304,"io_engine":"io_uring","use_uring_cmd":true,"fdp_enabled":true,"meta_checkpoint_placement_id":%d%s}`, spec, meta, extra)
	}
	if _, _, err := Format(context.Background(), strings.NewReader(conf(`,"fdp_placement_ids":[999]`)), false); err == nil || !strings.Contains(err.Error(), "999") {
		t.Fatalf("an identifier the device lacks: %v", err)
	}
	out, _, err := Format(context.Background(), strings.NewReader(conf("")), true) // the refused run left the file
	if err != nil {
		t.Fatal(err)
	}
	if d := out.Devices; len(d) != 1 || !strings.Contains(d[0].Placement, "cache_salt_prefix") {
		t.Fatalf("formatted %+v", out)
	}
	dev, err := devices.Open(spec, devices.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	cfg, err := engine.DetectConfig(dev)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ReadOnly = true
	e, err := engine.Open(dev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.CloseNoCheckpoint()
	if e.Usage().SlotsUsed != 0 {
		t.Fatalf("a fresh cache holds %d entries", e.Usage().SlotsUsed)
	}
}

func TestFormatLMCacheRefusesBadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.img")
	if err := os.WriteFile(path, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := Format(context.Background(), strings.NewReader(fmt.Sprintf(`{"device_path":%q,"slot_bytes":1000}`, path)), false)
	if err == nil || !errors.Is(err, engine.ErrConfig) && !strings.Contains(err.Error(), "slot_bytes") {
		t.Fatalf("slot_bytes 1000: %v", err)
	}
	if b, _ := os.ReadFile(path); len(b) != 1<<20 || strings.Trim(string(b), "\x00") != "" {
		t.Fatal("a refused config touched the file")
	}
}

// per_tp_device_paths: one shard per rank, a row each (its rank) and the total, all or
// nothing as for FormatAll.
func TestFormatLMCachePerTPDevices(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "r0.img"), filepath.Join(dir, "r1.img")
	for _, p := range []string{a, b} {
		if err := blockdev.CreateFile(p, 16<<20); err != nil {
			t.Fatal(err)
		}
	}
	conf := fmt.Sprintf(`{"extra_config":{"rust_raw_block.per_tp_device_paths":{"1":%q,"0":%q},"rust_raw_block.slot_bytes":69632,"rust_raw_block.meta_total_bytes":2097152}}`, b, a)
	rep, _, err := Format(context.Background(), strings.NewReader(conf), false)
	if err != nil {
		t.Fatal(err)
	}
	if d := rep.Devices; len(d) != 2 || d[0].Rank != 0 || d[0].Device != a || d[1].Rank != 1 || d[1].Device != b ||
		rep.Total.Formatted != 2 || rep.Total.Slots != d[0].Layout.MaxSlots+d[1].Layout.MaxSlots {
		t.Fatalf("report %+v", rep)
	}
	// Both hold a cache now: a second run is refused on both, and neither is written.
	before, _ := os.ReadFile(a)
	if _, _, err := Format(context.Background(), strings.NewReader(conf), false); err == nil || !strings.Contains(err.Error(), "nothing was formatted: 2 of 2 devices failed") {
		t.Fatalf("second run: %v", err)
	}
	if after, _ := os.ReadFile(a); string(after) != string(before) {
		t.Fatal("a refused run wrote")
	}
}
