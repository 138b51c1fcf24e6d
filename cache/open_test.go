package cache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/devices"
	"github.com/rbctl/rbctl/engine"
	"github.com/rbctl/rbctl/placement"
)

// memCache formats a 4 MiB memory cache (mutate adjusts the config) holding keys puts, a
// checkpoint after each, and returns the device and its layout.
func memCache(t *testing.T, mutate func(*engine.Config), keys int) (*blockdev.Mem, engine.Layout) {
	t.Helper()
	mem := blockdev.NewMem(4<<20, 4096)
	cfg := engine.DefaultConfig()
	cfg.SlotBytes, cfg.MetaTotalBytes, cfg.Periodic = 64<<10, 1<<20, false
	if mutate != nil {
		mutate(&cfg)
	}
	e, err := engine.Format(mem.Reopen(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		k := engine.ObjectKey("m", 0, []byte{byte(i + 1)}, "s")
		if res, err := e.PutMany([]engine.Key{k}, [][]byte{bytes.Repeat([]byte{byte(i)}, 100)}); err != nil || len(res.Stored) != 1 {
			t.Fatalf("put %d: %v %+v", i, err, res)
		}
		if err := e.CheckpointNow(); err != nil {
			t.Fatal(err)
		}
	}
	lay := e.Layout()
	if err := e.CloseNoCheckpoint(); err != nil {
		t.Fatal(err)
	}
	return mem, lay
}

func TestOpenRecoversWithTheDetectedLayoutAndTweak(t *testing.T) {
	mem, _ := memCache(t, nil, 2)
	e, err := OpenDevice(mem.Reopen(), "mem", OpenOptions{Tweak: func(_ blockdev.Device, c *engine.Config) { c.VerifyOnLoad = true }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.CloseNoCheckpoint()
	if c := e.Config(); c.SlotBytes != 64<<10 || c.Namespace != engine.NamespaceObject || !c.VerifyOnLoad || c.ReadOnly || c.Periodic {
		t.Errorf("config %+v", c)
	}
	if n := e.Usage().SlotsUsed; n != 2 {
		t.Errorf("%d entries, want 2", n)
	}
}

// The policy is built for the device's handles and seeded from the entries: a salt keeps
// the handle it was written with although a fresh policy would hand out handles anew.
func TestOpenPlacementSeeded(t *testing.T) {
	mem, _ := memCache(t, func(c *engine.Config) {
		c.Placer, _ = placement.Parse("cache-salt", 8)
	}, 0)
	e, err := OpenDevice(mem.Reopen(), "mem", OpenOptions{Placement: "cache-salt"})
	if err != nil {
		t.Fatal(err)
	}
	for i, salt := range []string{"a", "b"} { // handles 0 and 1, first seen first
		k := engine.ObjectKey("m", 0, []byte{byte(i)}, salt)
		if res, err := e.PutMany([]engine.Key{k}, [][]byte{{1}}); err != nil || len(res.Stored) != 1 {
			t.Fatalf("put %s: %v", salt, err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e, err = OpenDevice(mem.Reopen(), "mem", OpenOptions{Placement: "cache-salt"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.CloseNoCheckpoint()
	pol := e.Config().Placer
	if pol == nil || pol.Name() != "cache-salt" {
		t.Fatalf("placer %v", pol)
	}
	if h := pol.Place(placement.Write{CacheSalt: "b"}); h != 1 {
		t.Errorf("salt b after reopen on handle %d, want 1 (seeded)", h)
	}
	if _, err := OpenDevice(mem.Reopen(), "mem", OpenOptions{Placement: "no-such-policy"}); err == nil || !strings.Contains(err.Error(), "placement no-such-policy on ") {
		t.Errorf("unknown policy: %v", err)
	}
}

func TestOpenNamespaceRules(t *testing.T) {
	withKeys, _ := memCache(t, nil, 1)
	emptyV1 := lmcacheEmptyV1(t)
	var ne *NamespaceError
	for _, tc := range []struct {
		name string
		mem  *blockdev.Mem
		o    OpenOptions
		ok   func(error) bool
		ns   engine.Namespace // when it opens
	}{
		{"not a namespace", withKeys, OpenOptions{Namespace: "objects"}, func(err error) bool { return errors.Is(err, ErrBadNamespace) }, ""},
		{"disagrees with the keys", withKeys, OpenOptions{Namespace: engine.NamespaceLegacy}, func(err error) bool { return errors.As(err, &ne) && ne.Found == engine.NamespaceObject }, ""},
		{"disagrees, read-only too", withKeys, OpenOptions{Namespace: engine.NamespaceLegacy, ReadOnly: true}, func(err error) bool { return errors.As(err, &ne) }, ""},
		{"agrees", withKeys, OpenOptions{Namespace: engine.NamespaceObject}, nil, engine.NamespaceObject},
		{"unknown: a writer is refused", emptyV1, OpenOptions{}, func(err error) bool { return errors.Is(err, ErrNamespaceUnknown) }, ""},
		{"unknown: a reader opens", emptyV1, OpenOptions{ReadOnly: true}, nil, engine.NamespaceObject},
		{"unknown: given", emptyV1, OpenOptions{Namespace: engine.NamespaceLegacy}, nil, engine.NamespaceLegacy},
	} {
		e, err := OpenDevice(tc.mem.Reopen(), "mem", tc.o)
		if tc.ok == nil {
			if err != nil || e.Config().Namespace != tc.ns {
				t.Errorf("%s: %v", tc.name, err)
			}
		} else if e != nil || !tc.ok(err) {
			t.Errorf("%s: %v", tc.name, err)
		}
		if e != nil {
			e.CloseNoCheckpoint()
		}
	}
}

// A writer does not silently replace a newer checkpoint it cannot use; a reader, or a
// caller that takes the choice upon itself (recover), opens.
func TestOpenRefusesAWriterOverAFallback(t *testing.T) {
	mem, lay := memCache(t, nil, 2)
	d, err := engine.Detect(mem.Reopen())
	if err != nil {
		t.Fatal(err)
	}
	newer := d.Selection.Container
	mem.Bytes()[lay.ContainerOffset[newer]+int64(lay.BlockAlign)+40] ^= 0x10
	var fe *FallbackError
	if _, err := OpenDevice(mem.Reopen(), "mem", OpenOptions{}); !errors.As(err, &fe) || fe.Selection.Container == newer {
		t.Fatalf("writer over a fallback: %v", err)
	}
	for _, o := range []OpenOptions{{ReadOnly: true}, {Accept: true}} {
		e, err := OpenDevice(mem.Reopen(), "mem", o)
		if err != nil || e.Stats().Recovery.Selection.Container == newer || !e.Stats().Recovery.Selection.Fallback {
			t.Fatalf("%+v: %v", o, err)
		}
		e.CloseNoCheckpoint()
	}
}

func TestOpenScanModes(t *testing.T) {
	mem, lay := memCache(t, nil, 2)
	for i := range 2 {
		mem.Bytes()[lay.ContainerOffset[i]+int64(lay.BlockAlign)+40] ^= 0x10
	}
	if _, err := OpenDevice(mem.Reopen(), "mem", OpenOptions{ReadOnly: true}); !errors.Is(err, engine.ErrNoCheckpoint) {
		t.Fatalf("no scan: %v", err)
	}
	e, err := OpenDevice(mem.Reopen(), "mem", OpenOptions{ReadOnly: true, Scan: ScanDamaged})
	if err != nil {
		t.Fatalf("scan of damaged checkpoints: %v", err)
	}
	if st := e.Stats().Recovery; st.Scan == nil || st.Kept != 2 {
		t.Errorf("scan kept %d (%+v)", st.Kept, st.Scan)
	}
	e.CloseNoCheckpoint()
	blank := blockdev.NewMem(4<<20, 4096)
	if _, err := OpenDevice(blank.Reopen(), "blank", OpenOptions{ReadOnly: true, Scan: ScanDamaged}); !errors.Is(err, engine.ErrNoCheckpoint) || errors.Is(err, engine.ErrScanLayout) {
		t.Errorf("a never formatted device is not scanned for damage: %v", err)
	}
	if _, err := OpenDevice(blank.Reopen(), "blank", OpenOptions{ReadOnly: true, Scan: ScanAlways}); !errors.Is(err, engine.ErrScanLayout) {
		t.Errorf("scan always on a blank device: %v", err)
	}
}

// lmcacheEmptyV1 is a 16 MiB device as LMCache leaves it after formatting: one v1 JSON
// checkpoint without entries (the engine's golden engine/testdata/lmcache/empty.json) in
// container 0, which records no key namespace.
func lmcacheEmptyV1(t *testing.T) *blockdev.Mem {
	t.Helper()
	js, err := os.ReadFile(filepath.Join("..", "engine", "testdata", "lmcache", "empty.json"))
	if err != nil {
		t.Fatal(err)
	}
	mem := blockdev.NewMem(16<<20, 4096)
	b := mem.Bytes()
	copy(b, "LMCIDX01")
	binary.LittleEndian.PutUint32(b[8:], 1)  // version
	binary.LittleEndian.PutUint64(b[12:], 1) // seq
	binary.LittleEndian.PutUint64(b[20:], uint64(len(js)))
	binary.LittleEndian.PutUint32(b[28:], crc32.ChecksumIEEE(js))
	copy(b[4096:], js)
	return mem
}

// TestOpenTellsWhatItOpened: Opened is called once, before recovery, with the engine the
// device options chose (a file through native AIO with AutoFile, as serve opens it).
func TestOpenTellsWhatItOpened(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.img")
	cfg := engine.DefaultConfig()
	cfg.SlotBytes, cfg.MetaTotalBytes = 64<<10, 0
	if _, _, err := Format(FormatOptions{Path: p, Create: 8 << 20, Config: cfg,
		Open: func() (blockdev.Device, error) { return blockdev.OpenFile(p, blockdev.FileOptions{}) }}); err != nil {
		t.Fatal(err)
	}
	var got []string
	e, err := Open(p, OpenOptions{
		Device: devices.Options{IOPath: devices.PathAuto, AutoFile: devices.PathAio, Direct: true, QueueDepth: 8},
		Opened: func(od *devices.Opened) { got = append(got, od.IOPath) },
		Tweak:  func(blockdev.Device, *engine.Config) { got = append(got, "tweak") },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if strings.Join(got, ",") != "aio,tweak" || devices.EngineOf(e.Device()) != devices.PathAio {
		t.Errorf("calls %q, engine %s; want aio before tweak, and aio", got, devices.EngineOf(e.Device()))
	}
}
