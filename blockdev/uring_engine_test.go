package blockdev_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/engine/enginetest"
	"github.com/rbctl/rbctl/internal/looptest"
	"github.com/rbctl/rbctl/internal/uring"
)

// TestEngineSuiteOnUring runs the engine's behaviour suite on the io_uring backend
// (O_DIRECT file, two rings, registered buffers when the engine registers its pool).
func TestEngineSuiteOnUring(t *testing.T) {
	if testing.Short() {
		t.Skip("-short (the QEMU VM run): the full unit run covers the suite on io_uring")
	}
	enginetest.RunEngineSuite(t, func(t *testing.T) blockdev.Device {
		d, err := blockdev.OpenUring(suiteFile(t), blockdev.UringOptions{QueueDepth: 16, Rings: 2})
		if errors.Is(err, uring.ErrNotSupported) {
			t.Skipf("kernel lacks io_uring: %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
}

// TestEnginePutLoadOnUringLoopDevice stores and loads through the engine on a real loop
// device with the io_uring backend, closes, reopens from the checkpoint and loads again.
func TestEnginePutLoadOnUringLoopDevice(t *testing.T) {
	if testing.Short() {
		t.Skip("-short (the QEMU VM run): the full unit run on the root CI host covers it")
	}
	dev := looptest.New(t, 64<<20, looptest.Options{DirectIO: true})

	open := func() blockdev.Device {
		d, err := blockdev.OpenUring(dev, blockdev.UringOptions{QueueDepth: 32, Rings: 2, Exclusive: true})
		if err != nil {
			t.Fatalf("OpenUring(%s): %v", dev, err)
		}
		return d
	}
	cfg := enginetest.Config()
	const n = 300
	keys := make([]engine.Key, n)
	payloads := make([][]byte, n)
	for i := range keys {
		keys[i] = enginetest.K(i, "")
		payloads[i] = enginetest.Payload(i, 20<<10+i*97)
	}
	d := open()
	e, err := engine.Format(d, cfg)
	if err != nil {
		t.Fatalf("Format on %s: %v", dev, err)
	}
	if _, err := e.PutMany(keys, payloads); err != nil {
		t.Fatalf("PutMany: %v", err)
	}
	check := func(e *engine.Engine, when string) {
		bufs := make([][]byte, n)
		for i := range bufs {
			bufs[i] = make([]byte, len(payloads[i]))
		}
		ok, err := e.LoadManyInto(keys, bufs)
		if err != nil {
			t.Fatalf("%s: LoadManyInto: %v", when, err)
		}
		for i := range keys {
			if !ok[i] || !bytes.Equal(bufs[i], payloads[i]) {
				t.Fatalf("%s: key %d: hit=%v, bytes equal=%v", when, i, ok[i], bytes.Equal(bufs[i], payloads[i]))
			}
		}
	}
	check(e, "after put")
	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	e, err = engine.Open(open(), cfg)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer e.Close()
	check(e, "after reopen")
}

// TestEngineSuiteOnAio runs the engine's behaviour suite on the native AIO backend (O_DIRECT
// file, a context of 16 events: the suite's larger batches wait for slots).
func TestEngineSuiteOnAio(t *testing.T) {
	if testing.Short() {
		t.Skip("-short (the QEMU VM run): the full unit run covers the suite on aio")
	}
	enginetest.RunEngineSuite(t, func(t *testing.T) blockdev.Device {
		d, err := blockdev.OpenAio(suiteFile(t), blockdev.FileOptions{Direct: true, QueueDepth: 16})
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
}

// suiteFile is a sparse file of the suite's device size.
func suiteFile(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "engine.img")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, enginetest.MinDeviceBytes); err != nil {
		t.Fatal(err)
	}
	return p
}
