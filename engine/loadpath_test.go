package engine_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/blockdev/faultdev"
	"github.com/rbctl/rbctl/engine"
)

// The load fast path (reads straight into aligned caller buffers, chunked checksums) must
// return exactly the stored bytes and catch every damaged payload, whichever way a load
// goes: into an aligned caller buffer (no copy), an unaligned one or one too short for the
// rounded-up read (through a staging buffer), on a memory device and an O_DIRECT file.

// loadPathPayloads are sizes around the checksum's 32 KiB chunks and the 4 KiB block.
var loadPathPayloads = []int{1, 4095, 4096, 32<<10 + 1, 96 << 10, 124<<10 - 3, 124 << 10}

const loadPathSlot = 128 << 10

func loadPathEngine(t *testing.T, dev blockdev.Device) (*engine.Engine, *faultdev.Device, []engine.Key, [][]byte) {
	t.Helper()
	fd := faultdev.New(dev, 1)
	c := engine.DefaultConfig()
	c.SlotBytes, c.MetaTotalBytes, c.Periodic, c.QueueDepth = loadPathSlot, 1<<20, false, 8
	e, err := engine.Format(fd, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	keys := make([]engine.Key, len(loadPathPayloads))
	pay := make([][]byte, len(keys))
	for i, n := range loadPathPayloads {
		keys[i] = engine.ObjectKey("loadpath", 0, []byte(fmt.Sprintf("k%d", i)), "")
		pay[i] = make([]byte, n)
		for j := range pay[i] {
			pay[i][j] = byte(i*131 + j*17 + j>>9)
		}
	}
	if r, err := e.PutMany(keys, pay); err != nil || len(r.Stored) != len(keys) {
		t.Fatalf("PutMany: stored %d of %d, %v", len(r.Stored), len(keys), err)
	}
	return e, fd, keys, pay
}

// loadBufs returns one destination per payload of the given kind, each with a guard byte
// pattern after the payload.
func loadBufs(t *testing.T, kind string) [][]byte {
	t.Helper()
	out := make([][]byte, len(loadPathPayloads))
	for i, n := range loadPathPayloads {
		rounded := (n + 4095) &^ 4095
		var b []byte
		switch kind {
		case "aligned": // room for the rounded-up read: read into directly
			m, err := blockdev.Alloc(rounded + 4096)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { blockdev.Free(m) })
			b = m[:rounded]
		case "aligned-short": // aligned but only n bytes: the read bounces
			m, err := blockdev.Alloc(rounded + 4096)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { blockdev.Free(m) })
			b = m[:n]
		case "unaligned":
			b = make([]byte, rounded+1)[1:]
		}
		for j := range b {
			b[j] = 0xEE
		}
		out[i] = b
	}
	return out
}

func loadPathDevices(t *testing.T) map[string]func() blockdev.Device {
	return map[string]func() blockdev.Device{
		"mem": func() blockdev.Device { return blockdev.NewMem(1<<20+16*loadPathSlot, 4096) },
		"uring": func() blockdev.Device {
			return openUringFile(t, filepath.Join(t.TempDir(), "loadpath.img"), 1<<20+16*loadPathSlot)
		},
	}
}

func TestLoadPathBytesAndChecksums(t *testing.T) {
	for dname, open := range loadPathDevices(t) {
		for _, kind := range []string{"aligned", "aligned-short", "unaligned"} {
			t.Run(dname+"/"+kind, func(t *testing.T) {
				e, fd, keys, pay := loadPathEngine(t, open())
				bufs := loadBufs(t, kind)
				ok, err := e.LoadManyInto(keys, bufs)
				if err != nil {
					t.Fatal(err)
				}
				for i := range keys {
					if !ok[i] || !bytes.Equal(bufs[i][:len(pay[i])], pay[i]) {
						t.Fatalf("payload %d (%d bytes): ok=%v, equal=%v", i, len(pay[i]), ok[i], bytes.Equal(bufs[i][:len(pay[i])], pay[i]))
					}
					if kind != "aligned" { // a bounced load copies the payload only
						for j, c := range bufs[i][len(pay[i]):] {
							if c != 0xEE {
								t.Fatalf("payload %d: byte %d past the payload overwritten", i, len(pay[i])+j)
							}
						}
					}
				}
				// One flipped byte in each payload, in a different 32 KiB chunk each time
				// (first byte, last byte, middle): every load must fail its checksum.
				before := e.Stats().ChecksumErrors
				for i, k := range keys {
					m, _ := e.Lookup(k)
					at := []int{1, len(pay[i]), len(pay[i])/2 + 1}[i%3]
					fd.Add(faultdev.Rule{Name: fmt.Sprintf("rot%d", i), Class: faultdev.ClassRead,
						OffLo: m.Offset, OffHi: m.Offset + loadPathSlot, Times: 1,
						Fault: faultdev.Fault{Kind: faultdev.FaultCorrupt, At: at}})
				}
				ok, _ = e.LoadManyInto(keys, loadBufs(t, kind))
				for i := range keys {
					if ok[i] {
						t.Errorf("payload %d: corrupted read accepted", i)
					}
				}
				if d := e.Stats().ChecksumErrors - before; d != int64(len(keys)) {
					t.Errorf("ChecksumErrors grew by %d, want %d", d, len(keys))
				}
				// The rules fired once each: the next load is clean again.
				fd.Clear()
				bufs = loadBufs(t, kind)
				if ok, err := e.LoadManyInto(keys, bufs); err != nil || !ok[len(keys)-1] || !bytes.Equal(bufs[2][:len(pay[2])], pay[2]) {
					t.Fatalf("load after the damage passed: ok=%v err=%v", ok, err)
				}
			})
		}
	}
}

// A short read (fewer bytes than asked, error set) must never be reported as a hit, and
// the other loads of its batch still succeed.
func TestLoadPathShortRead(t *testing.T) {
	for dname, open := range loadPathDevices(t) {
		for _, kind := range []string{"aligned", "unaligned"} {
			t.Run(dname+"/"+kind, func(t *testing.T) {
				e, fd, keys, pay := loadPathEngine(t, open())
				victim := len(keys) - 2 // 124 KiB - 3: several blocks, so half of it is short
				m, _ := e.Lookup(keys[victim])
				fd.Add(faultdev.Rule{Name: "short", Class: faultdev.ClassRead, OffLo: m.Offset, OffHi: m.Offset + loadPathSlot,
					Fault: faultdev.Fault{Kind: faultdev.FaultShort}})
				bufs := loadBufs(t, kind)
				ok, err := e.LoadManyInto(keys, bufs)
				if err == nil {
					t.Fatal("LoadManyInto hid a short read")
				}
				for i := range keys {
					switch {
					case i == victim && ok[i]:
						t.Fatal("short read reported as a hit")
					case i != victim && (!ok[i] || !bytes.Equal(bufs[i][:len(pay[i])], pay[i])):
						t.Fatalf("payload %d beside the short read: ok=%v", i, ok[i])
					}
				}
			})
		}
	}
}

// A batch of 1 MiB slots with failures in the middle: every key must land in its own slot
// and come back intact; a failed write, a damaged or a short read fails exactly its key.
func TestLargeBatchFaults(t *testing.T) {
	const slot, n = 1 << 20, 16
	for dname, open := range map[string]func() blockdev.Device{
		"mem": func() blockdev.Device { return blockdev.NewMem(2<<20+(n+2)*slot, 4096) },
		"uring": func() blockdev.Device {
			return openUringFile(t, filepath.Join(t.TempDir(), "large.img"), 2<<20+(n+2)*slot)
		},
	} {
		for _, kind := range []string{"aligned", "unaligned"} {
			t.Run(dname+"/"+kind, func(t *testing.T) {
				fd := faultdev.New(open(), 1)
				c := engine.DefaultConfig()
				c.SlotBytes, c.MetaTotalBytes, c.Periodic, c.QueueDepth = slot, 1<<20, false, 32
				e, err := engine.Format(fd, c)
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				keys := make([]engine.Key, n)
				pay := make([][]byte, n)
				for i := range keys {
					keys[i] = engine.ObjectKey("large", 0, []byte(fmt.Sprintf("k%02d", i)), "")
					pay[i] = make([]byte, slot-4096-i*4096-3) // key i writes slot - i*4 KiB bytes
					for j := range pay[i] {
						pay[i][j] = byte(i*7 + j*13 + j>>11)
					}
				}
				// The write of key 6, told by its length, fails.
				fd.Add(faultdev.Rule{Name: "eio", Class: faultdev.ClassWrite, Times: 1,
					Pred: func(o faultdev.OpInfo) bool { return o.Len == slot-6*4096 }, Fault: faultdev.Fault{Kind: faultdev.FaultEIO}})
				res, err := e.PutMany(keys, pay)
				if err == nil || len(res.Stored) != n-1 || res.Results[6] {
					t.Fatalf("PutMany with one failed write: err %v, stored %d, key 6 %v", err, len(res.Stored), res.Results[6])
				}
				fd.Clear()
				bufs := make([][]byte, n)
				for i := range bufs {
					if kind == "aligned" {
						m, err := blockdev.Alloc(slot)
						if err != nil {
							t.Fatal(err)
						}
						defer blockdev.Free(m)
						bufs[i] = m
					} else {
						bufs[i] = make([]byte, slot+1)[1:]
					}
				}
				// Damage keys 1 and 14; cut key 9's read short.
				for _, i := range []int{1, 14} {
					m, _ := e.Lookup(keys[i])
					fd.Add(faultdev.Rule{Name: fmt.Sprintf("rot%d", i), Class: faultdev.ClassRead, OffLo: m.Offset, OffHi: m.Offset + slot,
						Times: 1, Fault: faultdev.Fault{Kind: faultdev.FaultCorrupt, At: len(pay[i]) - 100*i}})
				}
				m9, _ := e.Lookup(keys[9])
				fd.Add(faultdev.Rule{Name: "short", Class: faultdev.ClassRead, OffLo: m9.Offset, OffHi: m9.Offset + slot, Times: 1,
					Fault: faultdev.Fault{Kind: faultdev.FaultShort}})
				before := e.Stats().ChecksumErrors
				ok, err := e.LoadManyInto(keys, bufs)
				if err == nil {
					t.Error("LoadManyInto hid the short read")
				}
				for i := range keys {
					want := i != 1 && i != 6 && i != 9 && i != 14
					if ok[i] != want || want && !bytes.Equal(bufs[i][:len(pay[i])], pay[i]) {
						t.Errorf("key %d: ok=%v (want %v), bytes equal %v", i, ok[i], want, bytes.Equal(bufs[i][:len(pay[i])], pay[i]))
					}
				}
				if d := e.Stats().ChecksumErrors - before; d != 2 {
					t.Errorf("ChecksumErrors grew by %d, want 2", d)
				}
			})
		}
	}
}

// TestLoadManyPinsAndUnpins: LoadMany returns each hit's exact bytes in a buffer of its size,
// nil for misses, holds a pin only while it reads (a delete during the read is refused, one
// after succeeds) and leaves no pin behind.
func TestLoadManyPinsAndUnpins(t *testing.T) {
	c := engine.DefaultConfig()
	c.SlotBytes, c.MetaTotalBytes, c.Periodic = 64<<10, 1<<20, false
	e, err := engine.Format(blockdev.NewMem(1<<20+16*(64<<10), 0), c)
	if err != nil {
		t.Fatal(err)
	}
	defer e.CloseNoCheckpoint()
	keys := []engine.Key{engine.ObjectKey("m", 0, []byte{1}, ""), engine.ObjectKey("m", 0, []byte{2}, ""), engine.ObjectKey("m", 0, []byte{3}, "")}
	vals := [][]byte{bytes.Repeat([]byte{7}, 5000), nil, bytes.Repeat([]byte{9}, 60000)}
	if _, err := e.PutMany([]engine.Key{keys[0], keys[2]}, [][]byte{vals[0], vals[2]}); err != nil {
		t.Fatal(err)
	}
	var deleted []bool
	calls := 0
	got, err := e.LoadMany(keys, func(n int) []byte {
		calls++
		if calls == 1 {
			deleted = e.DeleteMany(keys[:1], false) // pinned: refused
		}
		return make([]byte, n+4096) // longer than asked: out is cut to the payload
	})
	if err != nil {
		t.Fatal(err)
	}
	if deleted[0] {
		t.Fatal("a key was deleted while LoadMany read it")
	}
	for i, want := range vals {
		if !bytes.Equal(got[i], want) || (want == nil) != (got[i] == nil) {
			t.Fatalf("key %d: %d bytes, want %d", i, len(got[i]), len(want))
		}
	}
	for _, k := range []engine.Key{keys[0], keys[2]} {
		if m, _ := e.Lookup(k); m.Locks != 0 {
			t.Fatalf("%s still pinned %d times", k, m.Locks)
		}
	}
	if d := e.DeleteMany(keys[:1], false); !d[0] {
		t.Fatal("delete after the load refused: a pin was left")
	}
}
