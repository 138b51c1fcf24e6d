package cache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
)

func TestFormatCreatesAndLaysOut(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.img")
	cfg := engine.DefaultConfig()
	cfg.SlotBytes, cfg.MetaTotalBytes = 64<<10, 0 // auto
	lay, info, err := Format(FormatOptions{Path: p, Create: 8 << 20, Config: cfg,
		Open: func() (blockdev.Device, error) { return blockdev.OpenFile(p, blockdev.FileOptions{}) }})
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != 8<<20 || lay.DeviceSize != 8<<20 || lay.MetaTotalBytes != 1<<20 || lay.SlotBytes != 64<<10 || lay.MaxSlots != 112 {
		t.Errorf("layout %+v, info %+v", lay, info)
	}
	d, err := blockdev.OpenFile(p, blockdev.FileOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	det, err := engine.Detect(d)
	if err != nil || det.Config.SlotBytes != 64<<10 {
		t.Errorf("detect after format: %v, %+v", err, det.Config)
	}
	// A second format of the same file is refused by the gate: it holds a cache now.
	if _, _, err := Format(FormatOptions{Path: p, Config: cfg, Open: func() (blockdev.Device, error) { t.Fatal("opened"); return nil, nil }}); err == nil {
		t.Error("formatting over a cache passed the gate")
	}
}

func TestConfigAutoMeta(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.SlotBytes, cfg.MetaTotalBytes = 1<<20, 0
	got, err := Config(cfg, 1<<40)
	if err != nil || got.MetaTotalBytes != engine.MetaBytesFor(1<<40, 1<<20, cfg.BlockAlign, cfg.CheckpointFormat) {
		t.Errorf("auto meta %d, %v", got.MetaTotalBytes, err)
	}
	cfg.CapacityBytes = 1 << 30
	if small, _ := Config(cfg, 1<<40); small.MetaTotalBytes >= got.MetaTotalBytes {
		t.Errorf("capacity does not bound the auto meta: %d >= %d", small.MetaTotalBytes, got.MetaTotalBytes)
	}
}

func TestCheckCreate(t *testing.T) {
	if err := CheckCreate("/dev/null"); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "/dev/null: a character device, not a regular file") {
		t.Errorf("/dev/null: %v", err)
	}
	if d := t.TempDir(); !strings.Contains(fmt.Sprint(CheckCreate(d)), d+": a directory, not a regular file") { // it said d---------
		t.Errorf("a directory: %v", CheckCreate(d))
	}
	if err := CheckCreate("emu:/tmp/x.img?size=1G"); !errors.Is(err, ErrNotRegular) {
		t.Errorf("emu: %v", err)
	}
	p := filepath.Join(t.TempDir(), "f")
	if err := CheckCreate(p); err != nil {
		t.Errorf("missing file: %v", err)
	}
	if err := CreateFile(p, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := CreateFile(p, 4096); err == nil {
		t.Error("shrank a file")
	}
	if st, _ := os.Stat(p); st.Size() != 1<<20 || st.Mode().Perm() != blockdev.DataFileMode {
		t.Errorf("file %v %v", st.Size(), st.Mode())
	}
}
