package cache

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/blockdev/faultdev"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/devices/safety"
	"github.com/rbctl/rbctl/emu"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/reports/cachereport"
)

func shardCfg() engine.Config {
	cfg := engine.DefaultConfig()
	cfg.SlotBytes, cfg.MetaTotalBytes = 64<<10, 0
	return cfg
}

// shardOpts formats each path (created at size when it does not exist) with shardCfg.
func shardOpts(size int64, paths ...string) []FormatOptions {
	opts := make([]FormatOptions, len(paths))
	for i, p := range paths {
		opts[i] = FormatOptions{Path: p, Config: shardCfg(),
			Open: func() (blockdev.Device, error) { return blockdev.OpenFile(p, blockdev.FileOptions{}) }}
		if _, err := os.Stat(p); err != nil {
			opts[i].Create = size
		}
	}
	return opts
}

func detected(t *testing.T, p string) engine.Config {
	t.Helper()
	d, err := blockdev.OpenFile(p, blockdev.FileOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	det, err := engine.Detect(d)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return det.Config
}

func TestFormatAllShards(t *testing.T) {
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img"), filepath.Join(dir, "c.img")
	if err := blockdev.CreateFile(c, 16<<20); err != nil { // an existing, larger, empty file
		t.Fatal(err)
	}
	rep, err := FormatAll(context.Background(), shardOpts(8<<20, a, b, c))
	if err != nil {
		t.Fatal(err)
	}
	var slots, capy int64
	for i, d := range rep.Devices {
		if d.Rank != i || d.State != cachereport.Formatted || d.Kind != blockdev.KindFile || d.Layout == nil || d.Error != "" {
			t.Fatalf("device %d: %+v", i, d)
		}
		slots, capy = slots+d.Layout.MaxSlots, capy+d.Layout.CapacityBytes
		if got := detected(t, d.Device); got.SlotBytes != 64<<10 {
			t.Errorf("%s: slot_bytes %d", d.Device, got.SlotBytes)
		}
	}
	if rep.Devices[2].Layout.MaxSlots <= rep.Devices[0].Layout.MaxSlots {
		t.Errorf("the 16 MiB shard has %d slots, the 8 MiB one %d", rep.Devices[2].Layout.MaxSlots, rep.Devices[0].Layout.MaxSlots)
	}
	if tot := rep.Total; tot.Devices != 3 || tot.Formatted != 3 || tot.Slots != slots || tot.Capacity != capy || rep.Interrupted {
		t.Errorf("total %+v, want %d slots, %d bytes", tot, slots, capy)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "| total | 3 devices ") || !strings.Contains(text.String(), "| 3 formatted |") {
		t.Errorf("text:\n%s", text.String())
	}
}

// One device the gate refuses: nothing is created, opened or written on any.
func TestFormatAllRefusedDeviceTouchesNothing(t *testing.T) {
	dir := t.TempDir()
	a, b, held := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img"), filepath.Join(dir, "held.img")
	if _, err := FormatAll(context.Background(), shardOpts(8<<20, held)); err != nil {
		t.Fatal(err)
	}
	if err := blockdev.CreateFile(a, 8<<20); err != nil {
		t.Fatal(err)
	}
	heldBytes, _ := os.ReadFile(held)
	opts := shardOpts(8<<20, a, b, held)
	for i := range opts {
		open := opts[i].Open
		opts[i].Open = func() (blockdev.Device, error) { t.Errorf("%s opened", opts[i].Path); return open() }
	}
	rep, err := FormatAll(context.Background(), opts)
	if rep != nil || !errors.Is(err, safety.ErrHasData) || !strings.HasPrefix(err.Error(), "nothing was formatted: 1 of 3 devices failed: refusing to format "+held) {
		t.Fatalf("FormatAll = %v, %v", rep, err)
	}
	if _, err := os.Stat(b); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s was created: %v", b, err)
	}
	if got, _ := os.ReadFile(a); !bytes.Equal(got, make([]byte, 8<<20)) {
		t.Errorf("%s was written", a)
	}
	if got, _ := os.ReadFile(held); !bytes.Equal(got, heldBytes) {
		t.Errorf("%s was written", held)
	}
	// A shard too small for the layout is refused too, after opening, before any write.
	tiny := filepath.Join(dir, "tiny.img")
	if err := blockdev.CreateFile(tiny, 1<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := FormatAll(context.Background(), shardOpts(8<<20, a, tiny)); !errors.Is(err, engine.ErrDeviceTooSmall) {
		t.Fatalf("tiny shard: %v", err)
	}
	if got, _ := os.ReadFile(a); !bytes.Equal(got, make([]byte, 8<<20)) {
		t.Errorf("%s was written before the tiny shard was refused", a)
	}
}

func TestFormatAllRefusesTheSameDeviceTwice(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.img")
	if err := blockdev.CreateFile(a, 8<<20); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.img")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "new.img")
	for _, pair := range [][2]string{
		{a, a}, {a, link}, {a, "emu:" + a + "?size=8M"}, {missing, filepath.Join(dir, ".", "new.img")},
	} {
		if _, err := FormatAll(context.Background(), shardOpts(8<<20, pair[0], pair[1])); !errors.Is(err, devices.ErrSameDevice) {
			t.Errorf("%s and %s: %v", pair[0], pair[1], err)
		}
	}
	// Each shard records its own device_path: one given for all is refused.
	opts := shardOpts(8<<20, a, missing)
	for i := range opts {
		opts[i].Config.DevicePath = "/dev/shared"
	}
	if _, err := FormatAll(context.Background(), opts); err == nil || !strings.Contains(err.Error(), "would both record device_path /dev/shared") {
		t.Errorf("one device_path for two shards: %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s was created", missing)
	}
	// Devices compare by device number: /dev/null through a link is /dev/null.
	nullLink := filepath.Join(dir, "null")
	if err := os.Symlink("/dev/null", nullLink); err != nil {
		t.Fatal(err)
	}
	if err := devices.Distinct([]string{"/dev/null", nullLink}); !errors.Is(err, devices.ErrSameDevice) || !strings.Contains(err.Error(), "character device 1:3") {
		t.Errorf("/dev/null twice: %v", err)
	}
	if err := devices.Distinct([]string{"/dev/null", "/dev/zero", a, missing}); err != nil {
		t.Errorf("distinct devices: %v", err)
	}
	if err := devices.Distinct([]string{"mem:8M", "mem:8M", "emu:mem?size=8M", "emu:mem?size=8M", a}); err != nil {
		t.Errorf("memory devices are new on every open: %v", err)
	}
}

// A device whose writes fail once format has begun is half-formatted; the others are
// formatted all the same.
func TestFormatAllHalfFormatted(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")
	opts := shardOpts(8<<20, a, b)
	opts[1].Open = func() (blockdev.Device, error) {
		d, err := blockdev.OpenFile(b, blockdev.FileOptions{})
		if err != nil {
			return nil, err
		}
		return faultdev.New(d, 1, faultdev.Rule{Name: "eio", Class: faultdev.ClassWrite, After: 1, Fault: faultdev.Fault{Kind: faultdev.FaultEIO}}), nil
	}
	rep, err := FormatAll(context.Background(), opts)
	if !errors.Is(err, faultdev.ErrInjected) || rep == nil {
		t.Fatalf("FormatAll = %v, %v", rep, err)
	}
	if d := rep.Devices[1]; d.State != cachereport.HalfFormatted || !strings.Contains(d.Error, "half-formatted") || d.Layout != nil {
		t.Errorf("failing device: %+v", d)
	}
	if rep.Devices[0].State != cachereport.Formatted || rep.Total.Formatted != 1 || rep.Interrupted {
		t.Errorf("report %+v", rep)
	}
	detected(t, a)
	var de *cachereport.DevicesError
	if !errors.As(err, &de) || de.Of != 2 || len(de.Errs) != 1 || !strings.Contains(err.Error(), "1 of 2 devices failed: format "+b) {
		t.Errorf("error %v", err)
	}
}

// Interrupted before the writes: nothing is formatted, and the report says so per device;
// the files the format created are removed again, a file that was there is untouched.
func TestFormatAllInterrupted(t *testing.T) {
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img"), filepath.Join(dir, "c.img")
	if err := os.WriteFile(c, make([]byte, 8<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	opts := shardOpts(8<<20, a, b, c)
	opts[1].Open = func() (blockdev.Device, error) { cancel(); return blockdev.OpenFile(b, blockdev.FileOptions{}) }
	rep, err := FormatAll(ctx, opts)
	if !errors.Is(err, context.Canceled) || rep == nil || !rep.Interrupted || rep.Total.Formatted != 0 {
		t.Fatalf("FormatAll = %+v, %v", rep, err)
	}
	for _, d := range rep.Devices {
		if d.State != cachereport.NotFormatted || !strings.Contains(d.Error, "interrupted before its turn") {
			t.Errorf("%+v", d)
		}
	}
	for _, p := range []string{a, b} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s, created by the interrupted format, left behind: %v", filepath.Base(p), err)
		}
	}
	if got, _ := os.ReadFile(c); !bytes.Equal(got, make([]byte, 8<<20)) {
		t.Errorf("c.img was written")
	}
	var text bytes.Buffer
	_ = rep.WriteText(&text)
	if !strings.Contains(text.String(), "interrupted: 0 of 3 devices formatted") {
		t.Errorf("text:\n%s", text.String())
	}
}

// A format refused after files were created (here: a missing node under /dev, refused at
// preflight, and a device too small, refused once opened) leaves no file it created.
func TestFormatAllRemovesFilesItCreatedWhenNothingIsFormatted(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.img")
	if _, err := FormatAll(context.Background(), shardOpts(8<<20, a, "/dev/rbctl-test-no-such-device")); err == nil {
		t.Fatal("format with a missing /dev node succeeded")
	}
	if _, err := os.Stat(a); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a.img left behind after a refused format: %v", err)
	}
	opts := shardOpts(8<<20, a, filepath.Join(dir, "b.img"))
	opts[1].Create = 4096 // too small for any layout: refused after both files exist
	if _, err := FormatAll(context.Background(), opts); err == nil {
		t.Fatal("format onto a 4 KiB file succeeded")
	}
	for _, p := range []string{a, filepath.Join(dir, "b.img")} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind after a refused format: %v", filepath.Base(p), err)
		}
	}
}

// An emu: device FormatAll made is removed again when nothing is formatted (its data and
// state files); one that existed before is left alone (third hostile battery 3).
func TestFormatAllRemovesAnEmuDeviceItMade(t *testing.T) {
	dir := t.TempDir()
	spec := "emu:" + filepath.Join(dir, "e.img") + "?size=16M&ru=1M&ruhs=4"
	failing := []FormatOptions{{Path: spec, Config: shardCfg(), Open: func() (blockdev.Device, error) { return nil, errors.New("cannot open") }}}
	if _, err := FormatAll(context.Background(), failing); err == nil {
		t.Fatal("format with a failing open succeeded")
	}
	for _, f := range emu.Files(spec) {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind after a failed format: %v", filepath.Base(f), err)
		}
	}
	if made, err := emu.Create(spec); err != nil || !made {
		t.Fatalf("emu.Create: %v %v", made, err)
	}
	if _, err := FormatAll(context.Background(), failing); err == nil {
		t.Fatal("format with a failing open succeeded")
	}
	if _, err := os.Stat(emu.Files(spec)[0]); err != nil {
		t.Errorf("an emulated device that existed before was removed: %v", err)
	}
}
