package engine

import (
	"errors"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/placement"
)

// Every decoder failure on damaged bytes is ErrCorrupt and still its own sentinel; a
// never-written container and a layout mismatch are not corruption.
func TestCorruptionMarker(t *testing.T) {
	slot := make([]byte, 32)
	encodeSlotHeader(slot, slotHeader{Identity: 1, Len: 2})
	badSlot := append([]byte(nil), slot...)
	badSlot[0] ^= 0xff

	cont := make([]byte, 32)
	var ch containerHeader
	copy(ch.Magic[:], "LMCIDX01")
	ch.Version, ch.Seq, ch.Len = 1, 2, 100
	encodeContainerHeader(cont, ch)
	withVersion := func(v uint32) []byte {
		h := ch
		h.Version = v
		b := make([]byte, 32)
		encodeContainerHeader(b, h)
		return b
	}
	withLen := func(n uint64) []byte {
		h := ch
		h.Len = n
		b := make([]byte, 32)
		encodeContainerHeader(b, h)
		return b
	}
	badMagic := append([]byte(nil), cont...)
	badMagic[1] = 'X'

	e, err := Format(memDev(), compatConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.PutMany([]Key{K(1), K(2)}, [][]byte{{1}, {2}}); err != nil {
		t.Fatal(err)
	}
	compact := e.encodeCompact(e.takeSnapshot())
	e.CloseNoCheckpoint()
	compactVersion := append([]byte(nil), compact...)
	compactVersion[8] = 9

	decodeCont := func(b []byte) error {
		_, err := decodeContainerHeader(b, "LMCIDX01", 1, 1<<20)
		return err
	}
	decodeSlot := func(b []byte) error { _, err := decodeSlotHeader(b); return err }
	decodeCkpt := func(b []byte) error { _, err := decodeCheckpoint(b); return err }
	for _, tc := range []struct {
		name     string
		err      error
		specific error // nil: ErrCorrupt itself
	}{
		{"slot header short", decodeSlot(slot[:10]), ErrTruncated},
		{"slot header magic", decodeSlot(badSlot), ErrBadMagic},
		{"container header short", decodeCont(cont[:20]), ErrTruncated},
		{"container magic", decodeCont(badMagic), ErrBadMagic},
		{"container version", decodeCont(withVersion(7)), ErrBadVersion},
		{"container payload_len 0", decodeCont(withLen(0)), nil},
		{"container payload_len beyond the container", decodeCont(withLen(2 << 20)), nil},
		{"compact truncated", decodeCkpt(compact[:len(compact)-3]), nil},
		{"compact header only", decodeCkpt(compact[:10]), ErrTruncated},
		{"compact version", decodeCkpt(compactVersion), ErrBadVersion},
		{"compact trailing bytes", decodeCkpt(append(append([]byte(nil), compact...), 0)), nil},
		{"neither format", decodeCkpt([]byte("garbage")), nil},
		{"v1 not JSON", decodeCkpt([]byte("{not json")), nil},
		{"v1 no entries", decodeCkpt([]byte(`{"version":1,"meta_magic":"LMCIDX01"}`)), nil},
		{"v1 state version", decodeCkpt([]byte(`{"version":2}`)), ErrBadVersion},
	} {
		if tc.err == nil {
			t.Errorf("%s: decoded without error", tc.name)
			continue
		}
		if !errors.Is(tc.err, ErrCorrupt) {
			t.Errorf("%s: %v is not ErrCorrupt", tc.name, tc.err)
		}
		if tc.specific != nil && !errors.Is(tc.err, tc.specific) {
			t.Errorf("%s: %v is not %v", tc.name, tc.err, tc.specific)
		}
	}
	for _, s := range []error{ErrBadMagic, ErrBadVersion, ErrChecksum, ErrTruncated} {
		if !errors.Is(s, ErrCorrupt) || errors.Is(ErrCorrupt, s) || errors.Is(s, ErrLayoutMismatch) {
			t.Errorf("%v: marker relation wrong", s)
		}
	}
	// Not corruption: a never-written container, a different layout.
	if err := decodeCont(make([]byte, 32)); !errors.Is(err, ErrNoCheckpoint) || errors.Is(err, ErrCorrupt) {
		t.Errorf("empty container: %v", err)
	}
	if err := layoutDiff(Config{BlockAlign: 4096, HeaderBytes: 4096, SlotBytes: 8192, MetaTotalBytes: 1 << 20, MetaMagic: "LMCIDX01", MetaVersion: 1},
		Config{BlockAlign: 4096, HeaderBytes: 4096, SlotBytes: 16384, MetaTotalBytes: 1 << 20, MetaMagic: "LMCIDX01", MetaVersion: 1}); !errors.Is(err, ErrLayoutMismatch) || errors.Is(err, ErrCorrupt) {
		t.Errorf("layout mismatch: %v", err)
	}
}

// Open on a device whose containers were both damaged says so (ErrNoCheckpoint and
// ErrCorrupt); on a device never formatted it is ErrNoCheckpoint alone.
func TestOpenDamagedIsCorrupt(t *testing.T) {
	cfg := compatConfig()
	cfg.FinalCheckpoint = false
	blank := memDev()
	if _, err := Open(blank, cfg); !errors.Is(err, ErrNoCheckpoint) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("blank device: %v", err)
	}
	dev := memDev()
	e, err := Format(unclosed{dev}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.PutMany([]Key{K(1)}, [][]byte{{1}}); err != nil {
		t.Fatal(err)
	}
	if err := e.CheckpointNow(); err != nil {
		t.Fatal(err)
	}
	e.CloseNoCheckpoint()
	lay, _ := computeLayout(cfg, dev.Info().Size)
	for _, off := range lay.ContainerOffset { // flip a byte of each payload: CRC mismatch
		b := make([]byte, 1)
		if err := blockdev.ReadAt(dev, b, off+int64(cfg.BlockAlign)); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0x40
		if err := blockdev.WriteAt(dev, b, off+int64(cfg.BlockAlign), placement.None); err != nil {
			t.Fatal(err)
		}
	}
	_, err = Open(dev, cfg)
	if !errors.Is(err, ErrNoCheckpoint) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged containers: %v, want ErrNoCheckpoint and ErrCorrupt", err)
	}
}

// unclosed keeps a device's contents across an engine's Close.
type unclosed struct{ blockdev.Device }

func (unclosed) Close() error { return nil }
