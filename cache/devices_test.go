package cache

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/engine"
)

// shardWithKeys formats an 8 MiB file at p and stores n keys in it.
func shardWithKeys(t *testing.T, p string, n int) {
	t.Helper()
	if _, err := FormatAll(context.Background(), shardOpts(8<<20, p)); err != nil {
		t.Fatal(err)
	}
	cfg := detected(t, p)
	cfg.Periodic = false
	d, err := blockdev.OpenFile(p, blockdev.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		k := engine.ObjectKey("m", uint32(i), []byte{byte(i + 1)}, "s")
		if res, err := e.PutMany([]engine.Key{k}, [][]byte{bytes.Repeat([]byte{byte(i)}, 1000)}); err != nil || len(res.Stored) != 1 {
			t.Fatalf("put: %v %+v", err, res)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

func openRO(p string) (blockdev.Device, error) {
	return blockdev.OpenFile(p, blockdev.FileOptions{ReadOnly: true})
}

func TestInspectAllRowsAndTotal(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")
	shardWithKeys(t, a, 2)
	shardWithKeys(t, b, 3)
	rep, err := InspectAll([]string{a, b}, openRO, InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slots := rep.Devices[0].Layout.MaxSlots + rep.Devices[1].Layout.MaxSlots
	if tot := rep.Total; tot.Devices != 2 || tot.Failed != 0 || tot.Entries != 5 || tot.BytesUsed != 5*64<<10 || tot.Slots != slots || tot.FreeSlots != slots-5 {
		t.Errorf("total %+v (slots %d)", tot, slots)
	}
	if rep.Output(true) != rep {
		t.Error("two devices: JSON is not the whole report")
	}

	// A missing device and one that holds no cache: each its own error, the other rows
	// still there; exit code 3 (fs.ErrNotExist) only while every failure is a missing device.
	missing, junk := filepath.Join(dir, "missing.img"), filepath.Join(dir, "junk.img")
	rep, err = InspectAll([]string{a, missing}, openRO, InspectOptions{})
	if !errors.Is(err, fs.ErrNotExist) || rep.Total.Failed != 1 || rep.Total.Entries != 2 || rep.Devices[0].Inspection == nil || rep.Devices[1].Error == "" {
		t.Fatalf("with a missing device: %v %+v", err, rep.Total)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{a + "\n", missing + ": error: ", "| total ", "1 of 2 ok"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if err := os.WriteFile(junk, bytes.Repeat([]byte{0xa5}, 8<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = InspectAll([]string{missing, junk, a}, openRO, InspectOptions{})
	if errors.Is(err, fs.ErrNotExist) || !errors.Is(err, engine.ErrNoCheckpoint) || !strings.Contains(err.Error(), "2 of 3 devices failed") {
		t.Errorf("missing + junk: %v", err)
	}
	if _, err := InspectAll([]string{a, a}, openRO, InspectOptions{}); !errors.Is(err, devices.ErrSameDevice) {
		t.Errorf("same device twice: %v", err)
	}
}

func TestRecoverAllRepairsEachDevice(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")
	shardWithKeys(t, a, 2)
	shardWithKeys(t, b, 3)
	// A stale entry on b: its slot header's magic is damaged.
	img, _ := os.ReadFile(b)
	lay := detected(t, b)
	l, err := engine.ComputeLayout(lay, int64(len(img)))
	if err != nil {
		t.Fatal(err)
	}
	img[l.DataBase] ^= 0xff
	if err := os.WriteFile(b, img, 0o600); err != nil {
		t.Fatal(err)
	}
	var calls, lastDone, lastTotal int
	o := RecoverOptions{Paths: []string{a, b},
		Open: func(p string, readOnly bool, tweak func(*engine.Config)) (*engine.Engine, error) {
			d, err := blockdev.OpenFile(p, blockdev.FileOptions{ReadOnly: readOnly})
			if err != nil {
				return nil, err
			}
			det, err := engine.Detect(d)
			if err != nil {
				d.Close()
				return nil, err
			}
			cfg := det.Config
			cfg.Periodic, cfg.ReadOnly = false, readOnly
			tweak(&cfg)
			return engine.Open(d, cfg)
		},
		Progress: func(done, total int) { calls, lastDone, lastTotal = calls+1, done, total }}
	o.Repair.DryRun = true
	rep, err := RecoverAll(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if tot := rep.Total; tot.Loaded != 5 || tot.Kept != 4 || tot.Dropped != 1 || tot.Written != 0 || tot.Failed != 0 {
		t.Errorf("dry run total %+v", tot)
	}
	if calls == 0 || lastDone != 5 || lastTotal != 5 {
		t.Errorf("progress: %d calls, last %d of %d; want 5 of 5 over both devices", calls, lastDone, lastTotal)
	}
	if got, _ := os.ReadFile(b); !bytes.Equal(got, img) {
		t.Fatal("a dry run wrote")
	}
	o.Repair.DryRun, o.Progress = false, nil
	rep, err = RecoverAll(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total.Written != 1 || rep.Devices[0].Written || !rep.Devices[1].Written || rep.Total.Kept != 4 {
		t.Errorf("repair: %+v; a %+v", rep.Total, rep.Devices[0].Recovery)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"nothing to repair", "written (seq ", "2 of 2 ok, 1 written"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	// One device gone: its error row, the other recovered.
	rep, err = RecoverAll(context.Background(), RecoverOptions{Paths: []string{a, filepath.Join(dir, "gone.img")}, Open: o.Open})
	if !errors.Is(err, fs.ErrNotExist) || rep.Devices[0].Recovery == nil || rep.Devices[1].Recovery != nil || rep.Total.Failed != 1 {
		t.Errorf("with a missing device: %v %+v", err, rep.Total)
	}
}
