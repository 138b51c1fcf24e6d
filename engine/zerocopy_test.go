package engine_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/blockdev/faultdev"
	"github.com/rbctl/rbctl/engine"
)

// Zero-copy puts: a payload of whole block_align units in suitably aligned memory goes out
// from the caller's buffer behind a header-only staging buffer (blockdev.Op.Tail); the
// others are copied behind the header as before. Both must leave the same bytes on the
// device, and a fault on a vectored write must fail the put like any other.

// copyingMem is a Mem that hides VectoredWrites: the engine copies every payload.
type copyingMem struct{ *blockdev.Mem }

func (copyingMem) VectoredWrites() bool { return false }

func zcConfig() engine.Config {
	c := engine.DefaultConfig()
	c.SlotBytes = 64 << 10
	c.MetaTotalBytes = 1 << 20
	c.Periodic = false
	return c
}

// zcPayloads: lengths that are whole 4 KiB blocks (vectored when aligned) and lengths that
// are not (always copied), in Alloc'd memory so the address never decides.
func zcPayloads(t *testing.T, lens []int) [][]byte {
	t.Helper()
	out := make([][]byte, len(lens))
	for i, n := range lens {
		b, err := blockdev.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { blockdev.Free(b) })
		for j := range b {
			b[j] = byte(i*131 + j*7 + j>>12)
		}
		out[i] = b
	}
	return out
}

func zcKeys(n int) []engine.Key {
	ks := make([]engine.Key, n)
	for i := range ks {
		ks[i] = engine.ObjectKey("zc/model", uint32(i%3), []byte(fmt.Sprintf("chunk-%04d", i)), "")
	}
	return ks
}

func TestZeroCopyPutsWriteTheSameBytes(t *testing.T) {
	cfg := zcConfig()
	cfg.Now = func() time.Time { return time.Unix(1e9, 0) } // the same put generations in both images
	lens := []int{4096, 60 << 10, 8192, 100, 5000, 60<<10 - 1, 12288, 1}
	aligned := 4 // whole blocks: 4096, 60 KiB (the slot's whole payload), 8192, 12288
	pay := zcPayloads(t, lens)
	keys := zcKeys(len(lens))
	const size = 4 << 20
	images := map[bool][]byte{}
	for _, vectored := range []bool{true, false} {
		mem := blockdev.NewMem(size, 4096)
		var dev blockdev.Device = mem
		if !vectored {
			dev = copyingMem{mem}
		}
		e, err := engine.Format(dev, cfg)
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.PutMany(keys, pay)
		if err != nil || len(res.Stored) != len(keys) {
			t.Fatalf("vectored=%v: PutMany: %v, %d of %d stored", vectored, err, len(res.Stored), len(keys))
		}
		want := int64(0)
		if vectored {
			want = int64(aligned)
		}
		if st := e.Stats(); st.PutsVectored != want || st.Puts != int64(len(keys)) {
			t.Fatalf("vectored=%v: %d puts, %d vectored; want %d, %d", vectored, st.Puts, st.PutsVectored, len(keys), want)
		}
		checkLoads(t, e, keys, pay, fmt.Sprintf("vectored=%v", vectored))
		lay := e.Layout()
		images[vectored] = append([]byte(nil), mem.Bytes()[lay.DataBase:]...)
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		// Recovery reads what the vectored writes left: every key loads, its CRC checked.
		e, err = engine.Open(mem.Reopen(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		checkLoads(t, e, keys, pay, fmt.Sprintf("vectored=%v, reopened", vectored))
		e.Close()
	}
	if !bytes.Equal(images[true], images[false]) {
		t.Fatal("vectored and copied puts left different bytes in the data region")
	}
}

func checkLoads(t *testing.T, e *engine.Engine, keys []engine.Key, pay [][]byte, what string) {
	t.Helper()
	bufs := make([][]byte, len(keys))
	for i := range bufs {
		bufs[i] = make([]byte, len(pay[i]))
	}
	ok, err := e.LoadManyInto(keys, bufs)
	if err != nil {
		t.Fatalf("%s: LoadManyInto: %v", what, err)
	}
	for i := range keys {
		if !ok[i] || !bytes.Equal(bufs[i], pay[i]) {
			t.Fatalf("%s: key %d (%d bytes): loaded %v, bytes equal %v", what, i, len(pay[i]), ok[i], bytes.Equal(bufs[i], pay[i]))
		}
	}
	if st := e.Stats(); st.ChecksumErrors != 0 {
		t.Fatalf("%s: %d checksum errors", what, st.ChecksumErrors)
	}
}

// TestZeroCopyPutsOnUring: on an O_DIRECT io_uring file, aligned payloads go out as one
// WRITEV each; a payload of whole blocks at an unaligned address, or one in Go heap memory
// of an odd length, is copied (a fixed write from the registered arena).
func TestZeroCopyPutsOnUring(t *testing.T) {
	cfg := zcConfig()
	dev := openUringFile(t, filepath.Join(t.TempDir(), "zc.img"), 4<<20)
	e, err := engine.Format(dev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	const n = 20
	pay := zcPayloads(t, func() []int {
		l := make([]int, n)
		for i := range l {
			l[i] = 4096 * (1 + i%15) // 4 KiB .. 60 KiB, whole blocks
		}
		return l
	}())
	keys := zcKeys(n)
	s0 := dev.Stats()
	if res, err := e.PutMany(keys, pay); err != nil || len(res.Stored) != n {
		t.Fatalf("PutMany: %v, %d stored", err, len(res.Stored))
	}
	s1 := dev.Stats()
	if st := e.Stats(); st.PutsVectored != n || s1.VectoredOps-s0.VectoredOps != n || s1.FixedOps != s0.FixedOps {
		t.Fatalf("PutsVectored %d, WRITEV %d, fixed %d; want %d, %d, 0",
			st.PutsVectored, s1.VectoredOps-s0.VectoredOps, s1.FixedOps-s0.FixedOps, n, n)
	}
	checkLoads(t, e, keys, pay, "aligned payloads")

	// Whole blocks at an address off the logical block, and an odd length on the Go heap.
	off, err := blockdev.Alloc(8192 + 256)
	if err != nil {
		t.Fatal(err)
	}
	defer blockdev.Free(off)
	copied := [][]byte{off[256 : 256+8192], make([]byte, 7000)}
	for i := range copied {
		for j := range copied[i] {
			copied[i][j] = byte(i + j*3)
		}
	}
	ck := []engine.Key{engine.ObjectKey("zc/model", 9, []byte("misaligned"), ""), engine.ObjectKey("zc/model", 9, []byte("odd"), "")}
	s0 = dev.Stats()
	if res, err := e.PutMany(ck, copied); err != nil || len(res.Stored) != 2 {
		t.Fatalf("PutMany: %v, %d stored", err, len(res.Stored))
	}
	s1 = dev.Stats()
	if st := e.Stats(); st.PutsVectored != n || s1.VectoredOps != s0.VectoredOps || s1.FixedOps-s0.FixedOps != 2 {
		t.Fatalf("PutsVectored %d, WRITEV %d, fixed %d; want %d, 0, 2 (copied through the arena)",
			st.PutsVectored, s1.VectoredOps-s0.VectoredOps, s1.FixedOps-s0.FixedOps, n)
	}
	checkLoads(t, e, ck, copied, "copied payloads")
}

// TestZeroCopyPutFaults: a vectored put whose write fails, is torn or is short is not
// stored, leaves no key behind (before and after recovery), and its slot is reused.
func TestZeroCopyPutFaults(t *testing.T) {
	for _, flt := range []faultdev.Fault{
		{Kind: faultdev.FaultEIO},
		{Kind: faultdev.FaultTorn, Fraction: 0.5},
		{Kind: faultdev.FaultShort, Fraction: 0.03}, // inside the header
	} {
		t.Run(flt.Kind.String(), func(t *testing.T) {
			cfg := zcConfig()
			mem := blockdev.NewMem(4<<20, 4096)
			f := faultdev.New(mem, 1)
			e, err := engine.Format(f, cfg)
			if err != nil {
				t.Fatal(err)
			}
			lay := e.Layout()
			pay := zcPayloads(t, []int{60 << 10, 32 << 10})
			keys := zcKeys(2)
			f.Add(faultdev.Rule{Name: "data", Class: faultdev.ClassWrite, OffLo: lay.DataBase, Nth: 1, Fault: flt})
			res, _ := e.PutMany(keys[:1], pay[:1])
			if res.Results[0] || e.Stats().PutFailed != 1 {
				t.Fatalf("a faulted vectored put: stored=%v, PutFailed %d", res.Results[0], e.Stats().PutFailed)
			}
			if e.ExistsMany(keys[:1], false)[0] {
				t.Fatal("the faulted key is indexed")
			}
			if res, err := e.PutMany(keys, pay); err != nil || len(res.Stored) != 2 {
				t.Fatalf("after the fault: %v, %d stored", err, len(res.Stored))
			}
			if st := e.Stats(); st.PutsVectored != 2 {
				t.Fatalf("PutsVectored %d, want 2 (the faulted one is not counted)", st.PutsVectored)
			}
			checkLoads(t, e, keys, pay, "after the fault")
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			e, err = engine.Open(mem.Reopen(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			checkLoads(t, e, keys, pay, "reopened")
		})
	}
}

// TestZeroCopyPutsThroughNVMeDevice: over the passthrough device a vectored put is a header
// command from the arena and payload commands from the caller's memory. With that memory
// registered (RegisterMemory) every command carries a buffer index, and each carries the
// placement the policy chose for its key.
func TestZeroCopyPutsThroughNVMeDevice(t *testing.T) {
	e, rt := placedEngine(t, zcConfig())
	defer e.Close()
	const n = 8
	pool, err := blockdev.Alloc(n * (60 << 10))
	if err != nil {
		t.Fatal(err)
	}
	defer blockdev.Free(pool)
	pay := make([][]byte, n)
	for i := range pay {
		pay[i] = pool[i*(60<<10) : (i+1)*(60<<10)]
		for j := range pay[i] {
			pay[i][j] = byte(i*17 + j*5)
		}
	}
	if err := e.RegisterMemory([][]byte{pool}); err != nil {
		t.Fatal(err)
	}
	keys := zcKeys(n)
	for i := range keys { // kv ranks alternate 0, 1: handles 0, 1
		keys[i] = engine.ObjectKey("zc/model", uint32(i%2), []byte(fmt.Sprintf("chunk-%04d", i)), "")
	}
	rt.mu.Lock()
	rt.writes = nil
	rt.mu.Unlock()
	if res, err := e.PutMany(keys, pay); err != nil || len(res.Stored) != n {
		t.Fatalf("PutMany: %v, %d stored", err, len(res.Stored))
	}
	if st := e.Stats(); st.PutsVectored != n {
		t.Fatalf("PutsVectored %d, want %d", st.PutsVectored, n)
	}
	rt.mu.Lock()
	specs := map[uint32]int{}
	for _, w := range rt.writes {
		if !w.fixed || w.dtype != 2 {
			t.Fatalf("write fixed=%v DTYPE=%d, want a registered-buffer write with DTYPE=2", w.fixed, w.dtype)
		}
		specs[w.spec]++
	}
	nw := len(rt.writes)
	rt.mu.Unlock()
	// 4 KiB header + 60 KiB payload per key, the emulator's transfer limit decides the split:
	// at least two commands per key, half of the keys on each PID.
	if nw < 2*n || specs[0] != specs[1] || specs[0]+specs[1] != nw {
		t.Fatalf("%d writes, by PID %v; want >= %d, evenly on PIDs 0 and 1", nw, specs, 2*n)
	}
	checkLoads(t, e, keys, pay, "through the NVMe device")
}
