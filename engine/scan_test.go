package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
)

// scanImage is a cache with n keys checkpointed in both containers (seq 1 empty from
// Format, then two checkpoints), the payload of key i being i+1 repeated 100+i times.
func scanImage(t testing.TB, c Config, n int) (*blockdev.Mem, []Key, [][]byte) {
	t.Helper()
	m := blockdev.NewMem(32<<20, 0)
	e, err := Format(m, c)
	if err != nil {
		t.Fatal(err)
	}
	var keys []Key
	var pl [][]byte
	for i := 0; i < n; i++ {
		k := ObjectKey("m/odel", uint32(i%2), []byte{byte(i), byte(i >> 8), 7}, []string{"", "tenant"}[i%2])
		if c.Namespace == NamespaceLegacy {
			k = LegacyKey(fmt.Sprintf("vllm@1@0@%x@half", 0x1000+i), uint64(0x1000+i))
		}
		keys, pl = append(keys, k), append(pl, bytes.Repeat([]byte{byte(i + 1)}, 100+i))
	}
	if _, err := e.PutMany(keys[:n/2], pl[:n/2]); err != nil {
		t.Fatal(err)
	}
	if err := e.CheckpointNow(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.PutMany(keys[n/2:], pl[n/2:]); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil { // a final checkpoint: the other container
		t.Fatal(err)
	}
	return m, keys, pl
}

// flipPayload flips one bit in the checkpoint payload of container i.
func flipPayload(t *testing.T, m *blockdev.Mem, lay Layout, i int, at int64) {
	t.Helper()
	m.Bytes()[lay.ContainerOffset[i]+int64(lay.BlockAlign)+at] ^= 0x10
}

// bothDamaged is scanImage's 12 keys with a bit flipped in both checkpoint payloads: no
// checkpoint is usable, and a scan has to rebuild the index.
func bothDamaged(t *testing.T, c Config) (*blockdev.Mem, []Key, [][]byte, Layout) {
	t.Helper()
	m, keys, pl := scanImage(t, c, 12)
	lay, _ := computeLayout(c, m.Info().Size)
	flipPayload(t, m, lay, 0, 200)
	flipPayload(t, m, lay, 1, 300)
	return m, keys, pl, lay
}

// mustServe opens the rebuilt cache again (from its new checkpoint) and loads every key.
func mustServe(t *testing.T, m *blockdev.Mem, c Config, keys []Key, pl [][]byte) {
	t.Helper()
	e, err := Open(m.Reopen(), c)
	if err != nil {
		t.Fatalf("open after the rebuild: %v", err)
	}
	defer e.CloseNoCheckpoint()
	for i, k := range keys {
		buf := make([]byte, len(pl[i]))
		ok, err := e.LoadManyInto([]Key{k}, [][]byte{buf})
		if err != nil || !ok[0] || !bytes.Equal(buf, pl[i]) {
			t.Fatalf("key %d: loaded %v %v, bytes equal %v", i, ok, err, bytes.Equal(buf, pl[i]))
		}
	}
}

func TestScanRebuildsWhenBothContainersAreDamaged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config func(*Config)
		damage func(t *testing.T, m *blockdev.Mem, lay Layout)
	}{
		{"bit flip in both payloads", nil, func(t *testing.T, m *blockdev.Mem, lay Layout) {
			flipPayload(t, m, lay, 0, 200)
			flipPayload(t, m, lay, 1, 300)
		}},
		{"one torn, one flipped", nil, func(t *testing.T, m *blockdev.Mem, lay Layout) {
			flipPayload(t, m, lay, 0, 150)
			p := lay.ContainerOffset[1] + int64(lay.BlockAlign)
			clear(m.Bytes()[p+200 : p+int64(lay.BlockAlign)]) // a write cut after 200 bytes
		}},
		{"lmcache-v1 checkpoints, legacy keys", func(c *Config) {
			c.CheckpointFormat, c.Namespace = CheckpointLMCacheV1, NamespaceLegacy
		}, func(t *testing.T, m *blockdev.Mem, lay Layout) {
			flipPayload(t, m, lay, 0, 400) // inside the entries, after the layout fields
			flipPayload(t, m, lay, 1, 500)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := compatConfig()
			if tc.config != nil {
				tc.config(&c)
			}
			m, keys, pl := scanImage(t, c, 12)
			lay, _ := computeLayout(c, m.Info().Size)
			tc.damage(t, m, lay)
			_, err := Open(m.Reopen(), c)
			if !errors.Is(err, ErrNoCheckpoint) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("open of the damaged cache: %v", err)
			}
			if _, err := Detect(m.Reopen()); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Detect says %v, want the damage named", err)
			}
			d, err := DetectScan(m.Reopen(), ScanHint{})
			if err != nil {
				t.Fatal(err)
			}
			if d.Config.SlotBytes != c.SlotBytes || d.Config.MetaTotalBytes != c.MetaTotalBytes || d.Config.Namespace != c.Namespace ||
				d.Config.CheckpointFormat != c.CheckpointFormat || d.Config.DevicePath != c.DevicePath {
				t.Fatalf("layout from %s: %+v", d.LayoutSource, d.Config)
			}
			// A read-only scan (dry run) reports the rebuild and writes nothing.
			before := append([]byte(nil), m.Bytes()...)
			ro := d.Config
			ro.ReadOnly = true
			e, err := OpenWith(m.Reopen(), ro, OpenOptions{Scan: true})
			if err != nil {
				t.Fatal(err)
			}
			r := e.Stats().Recovery
			if r.Scan == nil || r.Scan.Rebuilt != len(keys) || r.Kept != len(keys) || r.Scan.Failed != 0 || r.Container != -1 {
				t.Fatalf("scan %+v, kept %d", r.Scan, r.Kept)
			}
			e.CloseNoCheckpoint()
			if !bytes.Equal(before, m.Bytes()) {
				t.Fatal("a read-only scan changed the device")
			}
			e, err = OpenWith(m.Reopen(), d.Config, OpenOptions{Scan: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.RepairCheckpoints(); err != nil {
				t.Fatal(err)
			}
			e.CloseNoCheckpoint()
			for i := 0; i < 2; i++ { // a fresh pair: both containers valid
				if ci, _ := readContainers(m.Reopen(), c); !ci[i].Valid {
					t.Fatalf("container %d after the rebuild: %s", i, ci[i].Problem)
				}
			}
			mustServe(t, m, c, keys, pl)
		})
	}
}

// Of two slots holding one key, the later put wins; a torn payload and a damaged key record
// are dropped; a slot without a key record (LMCache's header) is counted, not taken.
func TestScanChoosesTheLatestVersionAndDropsWhatFails(t *testing.T) {
	c := compatConfig()
	m := blockdev.NewMem(32<<20, 0)
	e, err := Format(m, c)
	if err != nil {
		t.Fatal(err)
	}
	keys := []Key{K(1), K(2), K(3), K(4)}
	pl := [][]byte{[]byte("the later version"), {2, 2}, {3, 3, 3}, {4, 4, 4, 4}}
	if _, err := e.PutMany(keys, pl); err != nil {
		t.Fatal(err)
	}
	slotOf := map[string]int64{}
	e.Entries(func(k Key, m EntryMeta) bool { slotOf[k.String()] = int64(m.Slot); return true })
	e.CloseNoCheckpoint()
	lay, _ := computeLayout(c, m.Info().Size)
	img := m.Bytes()
	hdr := func(k Key) []byte { o := lay.SlotOffset(slotOf[k.String()]); return img[o : o+int64(c.HeaderBytes)] }
	// An earlier put of key 0 left in slot 20 (a delete keeps the header; the slot was
	// never reused): a lower generation, other bytes.
	old := []byte("the earlier version")
	o := lay.SlotOffset(20)
	encodeSlotHeader(img[o:o+int64(c.HeaderBytes)], slotHeader{Identity: keys[0].Identity(), Len: uint64(len(old)), HasCRC: true,
		CRC: payloadCRC(old), HasKey: true, Key: keys[0].String(), Gen: 1})
	copy(img[o+int64(c.HeaderBytes):], old)
	hdr(keys[1])[slotKeyOff] ^= 1                                           // key record damaged
	img[lay.SlotOffset(slotOf[keys[2].String()])+int64(c.HeaderBytes)] ^= 1 // payload torn
	clear(hdr(keys[3])[slotCRCTagOff:])                                     // LMCache's header: no checksum, no key record
	clear(img[:lay.DataBase])                                               // no container at all
	if _, err := DetectScan(m.Reopen(), ScanHint{}); !errors.Is(err, ErrScanLayout) {
		t.Fatalf("no container and no hint: %v", err)
	}
	d, err := DetectScan(m.Reopen(), ScanHint{SlotBytes: c.SlotBytes})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DetectScan(m.Reopen(), ScanHint{SlotBytes: c.SlotBytes / 2}); err == nil {
		t.Fatal("half the slot size was accepted")
	}
	e, err = OpenWith(m.Reopen(), d.Config, OpenOptions{Scan: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.CloseNoCheckpoint()
	r := e.Stats().Recovery.Scan
	if r.Rebuilt != 1 || r.Superseded != 1 || r.Failed != 2 || r.NoKey != 1 {
		t.Fatalf("scan %+v, dropped %+v", r, e.Stats().Recovery.Dropped)
	}
	buf := make([]byte, len(pl[0]))
	if ok, _ := e.LoadManyInto(keys[:1], [][]byte{buf}); !ok[0] || !bytes.Equal(buf, pl[0]) {
		t.Fatalf("key 1 after the scan: %v %q", ok, buf)
	}
	// New puts go above every generation found.
	if g := e.nextGen(); g <= e.gen.Load()-1 {
		t.Fatalf("generation %d", g)
	}
}

// Ctrl-C stops a scan: the error says so and nothing is written.
func TestScanStopsOnCancel(t *testing.T) {
	c := compatConfig()
	m, _, _ := scanImage(t, c, 8)
	lay, _ := computeLayout(c, m.Info().Size)
	flipPayload(t, m, lay, 0, 200)
	flipPayload(t, m, lay, 1, 200)
	before := append([]byte(nil), m.Bytes()...)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := OpenWith(m.Reopen(), c, OpenOptions{Scan: true, Context: ctx})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled scan: %v", err)
	}
	if !bytes.Equal(before, m.Bytes()) {
		t.Fatal("a cancelled scan changed the device")
	}
}

// The layout fields of a damaged payload are read without a CRC: any bytes give a valid
// config or none, never a panic.
func FuzzLenientLayout(f *testing.F) {
	m, _, _ := scanImage(f, compatConfig(), 2)
	lay, _ := computeLayout(compatConfig(), m.Info().Size)
	p := m.Bytes()[lay.ContainerOffset[0]+int64(lay.BlockAlign):]
	f.Add(append([]byte(nil), p[:256]...))
	f.Add([]byte(`{"version":1,"device_path":"/d","capacity_bytes":0,"block_align":4096,"header_bytes":4096,"slot_bytes":65536,"meta_total_bytes":1048576,"meta_magic":"LMCIDX01","meta_version":1,"entries":{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if c, ok := lenientLayout(b, 1<<40); ok && c.validate() != nil {
			t.Fatalf("accepted an invalid layout %+v", c)
		}
	})
}

// A scan over slot headers and payloads of any bytes rebuilds only what verifies: every key
// it serves loads its own payload.
func FuzzScanImage(f *testing.F) {
	c := compatConfig()
	m, keys, pl := scanImage(f, c, 6)
	lay, _ := computeLayout(c, m.Info().Size)
	img := append([]byte(nil), m.Bytes()...)
	f.Add(uint8(2), img[lay.SlotOffset(2):lay.SlotOffset(2)+128], uint16(0))
	f.Add(uint8(7), img[lay.SlotOffset(1):lay.SlotOffset(1)+4200], uint16(4100))
	f.Fuzz(func(t *testing.T, slot uint8, b []byte, at uint16) {
		m := blockdev.NewMem(int64(len(img)), 0)
		copy(m.Bytes(), img)
		o := lay.SlotOffset(int64(slot % 16))
		copy(m.Bytes()[o+int64(at)%lay.SlotBytes:min(o+lay.SlotBytes, o+int64(at)%lay.SlotBytes+int64(len(b)))], b)
		for _, co := range lay.ContainerOffset {
			m.Bytes()[co+int64(lay.BlockAlign)+100] ^= 0x10
		}
		e, err := OpenWith(m, c, OpenOptions{Scan: true})
		if err != nil {
			return
		}
		defer e.CloseNoCheckpoint()
		for i, k := range keys {
			buf := make([]byte, len(pl[i]))
			ok, _ := e.LoadManyInto([]Key{k}, [][]byte{buf})
			if ok[0] && !bytes.Equal(buf, pl[i]) {
				t.Fatalf("key %d served wrong bytes", i)
			}
		}
	})
}

// TestScanSurvivesADamagedHeader: with both checkpoints damaged and no layout given, one
// slot header whose payload_len is damaged — with a key record (whose checksum then fails)
// or without one (LMCache's header) — no longer hides the layout: the others are rebuilt
// and the damaged slot alone is dropped (the battery's case: one flipped bit in slot 1's
// payload_len stopped recover --scan, even with --slot-bytes).
func TestScanSurvivesADamagedHeader(t *testing.T) {
	for _, keyRecord := range []bool{true, false} {
		t.Run(fmt.Sprintf("key record %v", keyRecord), func(t *testing.T) {
			c := compatConfig()
			m, keys, pl, lay := bothDamaged(t, c)
			img := m.Bytes()
			h := img[lay.SlotOffset(1) : lay.SlotOffset(1)+int64(c.HeaderBytes)]
			if !keyRecord {
				clear(h[slotCRCTagOff:]) // LMCache's header: no checksum, no key record
			}
			h[slotLenOff+3] ^= 1 // payload_len + 16 MiB
			for _, hint := range []ScanHint{{}, {SlotBytes: c.SlotBytes}} {
				d, err := DetectScan(m.Reopen(), hint)
				if err != nil {
					t.Fatalf("hint %+v: %v", hint, err)
				}
				if d.Config.SlotBytes != c.SlotBytes || d.Config.MetaTotalBytes != c.MetaTotalBytes {
					t.Fatalf("hint %+v: layout %+v from %s", hint, d.Config, d.LayoutSource)
				}
			}
			d, _ := DetectScan(m.Reopen(), ScanHint{})
			e, err := OpenWith(m.Reopen(), d.Config, OpenOptions{Scan: true})
			if err != nil {
				t.Fatal(err)
			}
			r := e.Stats().Recovery.Scan
			if err := e.RepairCheckpoints(); err != nil {
				t.Fatal(err)
			}
			e.CloseNoCheckpoint()
			var lost []int
			var kept []Key
			var kpl [][]byte
			probe, err := Open(m.Reopen(), d.Config)
			if err != nil {
				t.Fatal(err)
			}
			for i, k := range keys {
				if _, ok := probe.Lookup(k); ok {
					kept, kpl = append(kept, k), append(kpl, pl[i])
				} else {
					lost = append(lost, i)
				}
			}
			probe.CloseNoCheckpoint()
			if len(lost) != 1 || r.Rebuilt != len(keys)-1 {
				t.Fatalf("scan %+v; keys not rebuilt %v, want only the damaged slot's", r, lost)
			}
			mustServe(t, m, d.Config, kept, kpl)
		})
	}
}

// TestScanLeavesOutKeysNoWriterStores: a slot header whose key record (checksum and
// identity right) holds a key that is not text — invalid UTF-8, a control character — is
// left out of a rebuild and of a checkpoint's index, with why: no writer stores such a key,
// and no command could name it to read or remove it (third hostile battery 6).
func TestScanLeavesOutKeysNoWriterStores(t *testing.T) {
	c := compatConfig()
	m, keys, _, lay := bothDamaged(t, c)
	img := m.Bytes()
	for i, bad := range []string{"m@0x00000000@\xff\xfe", "m@0x00000000@\x1b[31mEVIL"} {
		k := RawKey(bad)
		o := lay.SlotOffset(int64(20 + i))
		encodeSlotHeader(img[o:o+int64(c.HeaderBytes)], slotHeader{Identity: k.Identity(), Len: 3, HasCRC: true,
			CRC: payloadCRC([]byte{1, 2, 3}), HasKey: true, Key: bad, Gen: 1})
		copy(img[o+int64(c.HeaderBytes):], []byte{1, 2, 3})
	}
	d, err := DetectScan(m.Reopen(), ScanHint{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := OpenWith(m.Reopen(), d.Config, OpenOptions{Scan: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.CloseNoCheckpoint()
	st := e.Stats().Recovery
	if st.Scan.Rebuilt != len(keys) || st.Scan.Failed != 2 {
		t.Fatalf("scan %+v, dropped %+v", st.Scan, st.Dropped)
	}
	for _, dr := range st.Dropped {
		if !strings.Contains(dr.Reason, "a key no writer stores") {
			t.Fatalf("dropped %q: %s", dr.Key, dr.Reason)
		}
	}
}

// TestDetectNamesATruncatedImage: a cache whose device is now smaller than its checkpoint's
// layout (a truncated image) is reported as such, not only as a layout that does not fit
// (third hostile battery, doubt: the messages suggested reformatting).
func TestDetectNamesATruncatedImage(t *testing.T) {
	c := compatConfig()
	m, _, _ := scanImage(t, c, 2)
	small := blockdev.NewMem(700<<10, 0)
	copy(small.Bytes(), m.Bytes())
	if _, err := Detect(small); err == nil || !strings.Contains(err.Error(), "a truncated image") {
		t.Fatalf("Detect on a truncated copy: %v", err)
	}
}
