package enginetest

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/rbctl/rbctl/engine"
)

// Layout checks, recovery from the checkpoint, slot-header verification and the alternation
// of the two checkpoint containers.
var recoveryCases = []suiteCase{
	{"LayoutMismatchRejected", func(t *testing.T, v *env) {
		e := v.format(Config())
		e.Close()
		for _, c := range []struct {
			name string
			mod  func(*engine.Config)
		}{
			{"header_bytes 8192", func(c *engine.Config) { c.HeaderBytes = 8192 }},
			{"block_align 8192", func(c *engine.Config) { c.BlockAlign = 8192; c.HeaderBytes = 8192 }},
			{"slot_bytes", func(c *engine.Config) { c.SlotBytes = 128 << 10 }},
			{"namespace", func(c *engine.Config) { c.Namespace = engine.NamespaceLegacy }},
		} {
			cfg := Config()
			c.mod(&cfg)
			if _, err := engine.Open(keepOpen{v.dev}, cfg); !errors.Is(err, engine.ErrLayoutMismatch) {
				t.Errorf("%s: err = %v, want ErrLayoutMismatch", c.name, err)
			}
		}
	}},
	{"OpenUnformattedFailsClearly", func(t *testing.T, v *env) {
		if _, err := engine.Open(keepOpen{v.dev}, Config()); !errors.Is(err, engine.ErrNoCheckpoint) {
			t.Fatalf("err = %v, want ErrNoCheckpoint", err)
		}
	}},
	{"FreeSlotsRebuiltFromCheckpoint", func(t *testing.T, v *env) {
		e := v.format(Config())
		mustPut(t, e, []engine.Key{K(1, ""), K(2, ""), K(3, "")}, [][]byte{Payload(1, 10), Payload(2, 10), Payload(3, 10)})
		m2, _ := e.Lookup(K(2, ""))
		e.DeleteMany([]engine.Key{K(2, "")}, false)
		if err := e.CheckpointNow(); err != nil {
			t.Fatal(err)
		}
		e.CloseNoCheckpoint()
		e = v.open(Config())
		defer e.Close()
		if u := e.Usage(); u.SlotsFree != 1 || u.SlotsUsed != 2 || u.NextSlot != 3 {
			t.Fatalf("usage after reopen = %+v, want 1 free of next_slot 3", u)
		}
		mustPut(t, e, []engine.Key{K(9, "")}, [][]byte{Payload(9, 10)})
		if m, _ := e.Lookup(K(9, "")); m.Slot != m2.Slot {
			t.Fatalf("new key got slot %d, want the freed slot %d", m.Slot, m2.Slot)
		}
	}},
	{"ScanRebuildsWhenBothContainersAreDamaged", func(t *testing.T, v *env) {
		e := v.format(Config())
		var keys []engine.Key
		var pl [][]byte
		for i := 0; i < 6; i++ {
			keys, pl = append(keys, K(i, "")), append(pl, Payload(i, 1000*(i+1)))
		}
		mustPut(t, e, keys[:3], pl[:3])
		if err := e.CheckpointNow(); err != nil {
			t.Fatal(err)
		}
		mustPut(t, e, keys[3:], pl[3:])
		e.Close() // the other container
		lay := e.Layout()
		for _, c := range lay.ContainerOffset {
			writeRaw(t, v.dev, c+int64(lay.BlockAlign)+100, []byte{0xa5}) // one byte of each payload
		}
		if _, err := engine.Open(keepOpen{v.dev}, Config()); !errors.Is(err, engine.ErrNoCheckpoint) || !errors.Is(err, engine.ErrCorrupt) {
			t.Fatalf("open with both containers damaged: %v", err)
		}
		d, err := engine.DetectScan(keepOpen{v.dev}, engine.ScanHint{})
		if err != nil {
			t.Fatal(err)
		}
		e, err = engine.OpenWith(keepOpen{v.dev}, d.Config, engine.OpenOptions{Scan: true})
		if err != nil {
			t.Fatal(err)
		}
		if r := e.Stats().Recovery; r.Scan == nil || r.Scan.Rebuilt != len(keys) || r.Kept != len(keys) {
			t.Fatalf("scan %+v, kept %d", r.Scan, r.Kept)
		}
		if err := e.RepairCheckpoints(); err != nil {
			t.Fatal(err)
		}
		e.CloseNoCheckpoint()
		e = v.open(Config())
		defer e.Close()
		for i, k := range keys {
			buf := make([]byte, len(pl[i]))
			if ok, err := e.LoadManyInto([]engine.Key{k}, [][]byte{buf}); err != nil || !ok[0] || !bytes.Equal(buf, pl[i]) {
				t.Fatalf("key %d after the rebuild: %v %v", i, ok, err)
			}
		}
	}},
	{"StaleSlotHeaderDroppedOnRecovery", func(t *testing.T, v *env) {
		e := v.format(Config())
		mustPut(t, e, []engine.Key{K(1, ""), K(2, "")}, [][]byte{Payload(1, 10), Payload(2, 10)})
		m, _ := e.Lookup(K(1, ""))
		e.Close()
		writeRaw(t, v.dev, m.Offset+8, []byte{0xde, 0xad}) // identity no longer matches the key
		e = v.open(Config())
		defer e.Close()
		rep := e.Stats().Recovery
		if rep.Kept != 1 || len(rep.Dropped) != 1 || rep.Dropped[0].Key != K(1, "").String() {
			t.Fatalf("recovery = %+v", rep)
		}
		if got := e.ExistsMany([]engine.Key{K(1, ""), K(2, "")}, false); got[0] || !got[1] {
			t.Fatalf("exists = %v", got)
		}
	}},
	{"PayloadChecksumMismatchDetectedOnLoad", func(t *testing.T, v *env) {
		c := Config()
		e := v.format(c)
		defer e.Close()
		k := K(1, "")
		mustPut(t, e, []engine.Key{k}, [][]byte{Payload(1, 300)})
		m, _ := e.Lookup(k)
		writeRaw(t, v.dev, m.Offset+int64(c.HeaderBytes)+100, []byte{0x55})
		if _, ok := load(t, e, k, 300); ok {
			t.Fatal("corrupt payload loaded")
		}
		if s := e.Stats(); s.ChecksumErrors != 1 {
			t.Fatalf("ChecksumErrors = %d", s.ChecksumErrors)
		}
		// Unchecked hands the bytes over as read, for a receiver that checks the stored
		// CRC itself; the stored CRC then tells them apart.
		buf := make([]byte, 300)
		got, err := e.LoadManyIntoWith([]engine.Key{k}, [][]byte{buf}, engine.LoadOptions{Unchecked: true})
		if err != nil || !got[0] {
			t.Fatalf("unchecked load = %v, %v", got, err)
		}
		if bytes.Equal(buf, Payload(1, 300)) || buf[100] != 0x55 || crc32.Checksum(buf, crc32.MakeTable(crc32.Castagnoli)) == m.Checksum {
			t.Fatal("unchecked load did not return the corrupt bytes as they are on the device")
		}
		if s := e.Stats(); s.ChecksumErrors != 1 {
			t.Fatalf("ChecksumErrors = %d after an unchecked load", s.ChecksumErrors)
		}
	}},
	{"CorruptPayloadDroppedByPayloadVerify", func(t *testing.T, v *env) {
		c := Config()
		e := v.format(c)
		mustPut(t, e, []engine.Key{K(1, ""), K(2, "")}, [][]byte{Payload(1, 300), Payload(2, 300)})
		m, _ := e.Lookup(K(2, ""))
		e.Close()
		writeRaw(t, v.dev, m.Offset+int64(c.HeaderBytes)+5, []byte{0xaa})
		c.VerifyPayloadOnRecover = true
		e = v.open(c)
		defer e.Close()
		if rep := e.Stats().Recovery; len(rep.Dropped) != 1 || rep.Dropped[0].Key != K(2, "").String() {
			t.Fatalf("dropped = %+v", rep.Dropped)
		}
	}},
	{"RestartThousandKeysByteExact", func(t *testing.T, v *env) {
		c := Config()
		c.SlotBytes = 8 << 10
		e := v.format(c)
		const n = 1000
		keys := make([]engine.Key, n)
		p := make([][]byte, n)
		for i := range keys {
			keys[i], p[i] = K(i, fmt.Sprintf("t%d", i%3)), Payload(i, 1+i*37%4096)
		}
		for lo := 0; lo < n; lo += 100 {
			if r := mustPut(t, e, keys[lo:lo+100], p[lo:lo+100]); len(r.Stored) != 100 {
				t.Fatalf("stored %d of 100", len(r.Stored))
			}
		}
		if err := e.CheckpointNow(); err != nil {
			t.Fatal(err)
		}
		if err := e.CloseNoCheckpoint(); err != nil {
			t.Fatal(err)
		}
		e = v.open(c)
		defer e.Close()
		if rep := e.Stats().Recovery; rep.Kept != n || len(rep.Dropped) != 0 {
			t.Fatalf("recovery kept %d dropped %v", rep.Kept, rep.Dropped)
		}
		bufs := make([][]byte, n)
		for i := range bufs {
			bufs[i] = make([]byte, len(p[i]))
		}
		ok, err := e.LoadManyInto(keys, bufs)
		if err != nil {
			t.Fatal(err)
		}
		for i := range keys {
			if !ok[i] || !bytes.Equal(bufs[i], p[i]) {
				t.Fatalf("key %d: ok=%v bytes equal=%v", i, ok[i], bytes.Equal(bufs[i], p[i]))
			}
		}
	}},
	{"PutsAfterLastCheckpointAreLostWithoutFinal", func(t *testing.T, v *env) {
		e := v.format(Config())
		mustPut(t, e, []engine.Key{K(1, "")}, [][]byte{Payload(1, 10)})
		e.CheckpointNow()
		mustPut(t, e, []engine.Key{K(2, "")}, [][]byte{Payload(2, 10)})
		e.CloseNoCheckpoint()
		e = v.open(Config())
		if got := e.ExistsMany([]engine.Key{K(1, ""), K(2, "")}, false); !got[0] || got[1] {
			t.Fatalf("after crash: %v, want [true false]", got)
		}
		mustPut(t, e, []engine.Key{K(3, "")}, [][]byte{Payload(3, 10)})
		e.Close() // final checkpoint
		e = v.open(Config())
		defer e.Close()
		if got := e.ExistsMany([]engine.Key{K(3, "")}, false); !got[0] {
			t.Fatal("final checkpoint on Close lost a key")
		}
	}},
	{"ContainersAlternateAndRecoveryPicksHighestValid", func(t *testing.T, v *env) {
		c := Config()
		e := v.format(c) // seq 1 → container 0
		mustPut(t, e, []engine.Key{K(1, "")}, [][]byte{Payload(1, 10)})
		e.CheckpointNow() // seq 2 → container 1
		mustPut(t, e, []engine.Key{K(2, "")}, [][]byte{Payload(2, 10)})
		e.CheckpointNow() // seq 3 → container 0
		e.CloseNoCheckpoint()
		infos, err := engine.ReadContainers(v.dev, c)
		if err != nil {
			t.Fatal(err)
		}
		if !infos[0].Valid || infos[0].Seq != 3 || !infos[1].Valid || infos[1].Seq != 2 {
			t.Fatalf("containers = %+v", infos)
		}
		writeRaw(t, v.dev, infos[0].Offset+int64(c.BlockAlign)+20, []byte{0xff}) // corrupt seq 3's payload
		e = v.open(c)
		defer e.Close()
		rep := e.Stats().Recovery
		if rep.Container != 1 || rep.Seq != 2 {
			t.Fatalf("recovered from container %d seq %d, want 1/2", rep.Container, rep.Seq)
		}
		// K(2), which only the corrupt seq 3 lists, is taken back: its slot verifies.
		if got := e.ExistsMany([]engine.Key{K(1, ""), K(2, "")}, false); !got[0] || !got[1] || len(rep.Rescued) != 1 {
			t.Fatalf("exists = %v, rescued %q", got, rep.Rescued)
		}
		// The rescue left the index to persist: the next checkpoint (seq 3) overwrites the
		// corrupt container 0, never the valid one.
		if err := e.CheckpointNow(); err != nil {
			t.Fatal(err)
		}
		if s := e.Stats(); s.CheckpointSeq != 3 {
			t.Fatalf("next seq = %d, want 3", s.CheckpointSeq)
		}
		infos, _ = engine.ReadContainers(v.dev, c)
		if !infos[0].Valid || infos[0].Seq != 3 || !infos[1].Valid || infos[1].Seq != 2 {
			t.Fatalf("containers after repair = %+v", infos)
		}
	}},
}
