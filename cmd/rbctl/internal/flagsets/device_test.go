package flagsets

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/internal/looptest"
)

// TestDevFlagsDefaultUring: left at its default, --io-engine opens files through io_uring,
// read-only too (inspect, get); an explicit --io-engine posix gets the posix engine.
func TestDevFlagsDefaultUring(t *testing.T) {
	file := imageFile(t)
	for _, c := range []struct {
		engine   string // "" keeps the default
		readOnly bool
		uring    bool
	}{{"", false, true}, {"", true, true}, {"posix", true, false}, {"uring", true, true}} {
		cmd := &cobra.Command{Use: "x"}
		var f Device
		f.Add(cmd)
		if c.engine != "" {
			if err := cmd.Flags().Set("io-engine", c.engine); err != nil {
				t.Fatal(err)
			}
		}
		dev, err := f.Open(file, c.readOnly)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		_, isUring := dev.(*blockdev.UringDevice)
		if isUring != c.uring && !(c.engine == "" && !isUring && uringMissing(t, file)) {
			t.Errorf("%+v: opened %T", c, dev)
		}
		if dev.Info().Kind != blockdev.KindFile || !dev.Info().Direct {
			t.Errorf("%+v: info %+v", c, dev.Info())
		}
		dev.Close()
	}
}

// imageFile is an empty 4 MiB file to open.
func imageFile(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file, 4<<20); err != nil {
		t.Fatal(err)
	}
	return file
}

// uringMissing reports whether io_uring refuses to open file here (the default engine then
// falls back to posix).
func uringMissing(t *testing.T, file string) bool {
	d, err := blockdev.OpenUring(file, blockdev.UringOptions{ReadOnly: true})
	if err == nil {
		d.Close()
	}
	return err != nil
}

// TestDevFlagsEngine: --io-engine aio opens the native AIO engine; a name of no engine is
// refused by Options, before any device is opened, with the flag and the choices.
func TestDevFlagsEngine(t *testing.T) {
	file := imageFile(t)
	set := func(engine string) *Device {
		cmd := &cobra.Command{Use: "x"}
		f := &Device{}
		f.Add(cmd)
		if err := cmd.Flags().Set("io-engine", engine); err != nil {
			t.Fatal(err)
		}
		return f
	}
	dev, err := set("aio").Open(file, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := dev.(*blockdev.AioDevice); !ok {
		t.Errorf("--io-engine aio opened %T", dev)
	}
	dev.Close()
	for _, bad := range []string{"aoi", "", "URING"} {
		if _, err := set(bad).Options(false); err == nil || !strings.Contains(err.Error(), "--io-engine") || !strings.Contains(err.Error(), "aio") {
			t.Errorf("--io-engine %q: %v", bad, err)
		}
	}
}

// TestDevFlagsServeDefault: with AutoFile aio (serve's flags), --io-engine left at its
// default or given as auto opens a regular file with native AIO and a block device with
// io_uring (its write streams); an explicit engine is kept; the help names the default.
// Without AutoFile, auto is the uring default spelled out.
func TestDevFlagsServeDefault(t *testing.T) {
	file := imageFile(t)
	open := func(autoFile, engine, path string) blockdev.Device {
		t.Helper()
		cmd := &cobra.Command{Use: "x"}
		f := &Device{AutoFile: autoFile}
		f.Add(cmd)
		if engine != "" {
			if err := cmd.Flags().Set("io-engine", engine); err != nil {
				t.Fatal(err)
			}
		}
		dev, err := f.Open(path, false)
		if err != nil {
			t.Fatalf("AutoFile %q --io-engine %q: %v", autoFile, engine, err)
		}
		return dev // the caller closes it (the next open of the file takes its lock)
	}
	for _, engine := range []string{"", "auto"} {
		d := open(devices.PathAio, engine, file)
		if devices.EngineOf(d) != devices.PathAio {
			t.Errorf("serve, --io-engine %q, a regular file: opened %T", engine, d)
		}
		d.Close()
		d = open("", engine, file)
		if got := devices.EngineOf(d); got != devices.PathUring && !(got == devices.PathPosix && uringMissing(t, file)) {
			t.Errorf("no AutoFile, --io-engine %q: opened %T, want the uring default", engine, d)
		}
		d.Close()
	}
	for engine, want := range map[string]string{"posix": devices.PathPosix, "uring": devices.PathUring} {
		d := open(devices.PathAio, engine, file)
		if got := devices.EngineOf(d); got != want && !(want == devices.PathUring && uringMissing(t, file)) {
			t.Errorf("serve, --io-engine %s: opened %s", engine, got)
		}
		d.Close()
	}
	cmd := &cobra.Command{Use: "x"}
	(&Device{AutoFile: devices.PathAio}).Add(cmd)
	if fl := cmd.Flags().Lookup("io-engine"); fl.DefValue != "auto" || !strings.Contains(fl.Usage, "aio for a regular file") {
		t.Errorf("serve's --io-engine: default %q, help %q", fl.DefValue, fl.Usage)
	}

	// A block device keeps io_uring.
	img := filepath.Join(t.TempDir(), "loop.img")
	if err := os.WriteFile(img, make([]byte, 8<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	loop := looptest.Attach(t, img, looptest.Options{})
	d := open(devices.PathAio, "", loop)
	got := devices.EngineOf(d)
	d.Close()
	if got != devices.PathUring && !uringMissing(t, loop) {
		t.Errorf("serve, a block device: opened %s, want io_uring", got)
	}
}
