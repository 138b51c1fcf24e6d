package engine_test

// Fuzzing of the whole recovery path from device bytes. The engine's own fuzz targets
// (fuzz_test.go) cover each decoder alone (slot header, container header, v1 JSON and
// compact checkpoints, key codec); these feed arbitrary checkpoint payloads — with a valid
// container header and CRC, so the fuzzer gets past the checksum — and arbitrary slot
// headers through Open, and require that recovery never panics and never serves wrong
// bytes, double-books a slot or loses count of one.

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
)

const (
	fzSlots = 6
	fzMeta  = 64 << 10
)

func fuzzConfig(format engine.CheckpointFormat) engine.Config {
	c := relConfig()
	c.MetaTotalBytes = fzMeta
	c.CheckpointFormat = format
	c.RecoveryReaders = 1
	return c
}

// fuzzImage is a formatted cache holding keys 0..3 (key 3 deleted after the checkpoint
// that holds it, its slot reused by key 4), closed cleanly.
func fuzzImage(tb testing.TB, format engine.CheckpointFormat) []byte {
	mem := blockdev.NewMem(fzMeta+fzSlots*relSlot, 0)
	e, err := engine.Format(mem, fuzzConfig(format))
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		r, err := e.PutManyMeta([]engine.Key{relKey(i)}, [][]byte{relPayload(i)}, []*engine.ObjMeta{{Shape: []int{i, 2}, Dtype: "bfloat16", Fmt: "KV_2LTD", CachedPositions: []int{i}}})
		if err != nil || len(r.Stored) != 1 {
			tb.Fatalf("put %d: %v", i, err)
		}
	}
	if err := e.CheckpointNow(); err != nil {
		tb.Fatal(err)
	}
	e.DeleteMany([]engine.Key{relKey(3)}, true)
	if r, err := e.PutMany([]engine.Key{relKey(4)}, [][]byte{relPayload(4)}); err != nil || len(r.Stored) != 1 {
		tb.Fatal("put 4", err)
	}
	if err := e.CloseNoCheckpoint(); err != nil {
		tb.Fatal(err)
	}
	return mem.Bytes()
}

// containerPayload returns the payload of the newest valid container of img.
func containerPayload(tb testing.TB, img []byte, format engine.CheckpointFormat) []byte {
	mem := blockdev.NewMem(int64(len(img)), 0)
	copy(mem.Bytes(), img)
	cs, err := engine.ReadContainers(mem, fuzzConfig(format))
	if err != nil {
		tb.Fatal(err)
	}
	c := cs[0]
	if !c.Valid || (cs[1].Valid && cs[1].Seq > c.Seq) {
		c = cs[1]
	}
	off := c.Offset + 4096
	return append([]byte(nil), img[off:off+int64(c.PayloadLen)]...)
}

// writeContainer writes payload into container idx of img under a valid header with seq.
func writeContainer(img []byte, idx int, seq uint64, payload []byte) {
	cbytes := int64(fzMeta / 2)
	off := int64(idx) * cbytes
	clear(img[off : off+cbytes])
	hdr := img[off : off+32]
	copy(hdr, "LMCIDX01")
	binary.LittleEndian.PutUint32(hdr[8:], 1)
	binary.LittleEndian.PutUint64(hdr[12:], seq)
	binary.LittleEndian.PutUint64(hdr[20:], uint64(len(payload)))
	binary.LittleEndian.PutUint32(hdr[28:], crc32.ChecksumIEEE(payload))
	copy(img[off+4096:off+cbytes], payload)
}

func FuzzRecoverImage(f *testing.F) {
	compact := fuzzImage(f, engine.CheckpointCompact)
	v1 := fuzzImage(f, engine.CheckpointLMCacheV1)
	f.Add(containerPayload(f, compact, engine.CheckpointCompact), []byte(nil), uint8(0))
	f.Add(containerPayload(f, v1, engine.CheckpointLMCacheV1), []byte(nil), uint8(1))
	f.Add(containerPayload(f, v1, engine.CheckpointLMCacheV1), []byte("LMCBLK01\x00\x00\x00\x00\x00\x00\x00\x00\x10"), uint8(3))
	f.Add([]byte(`{"version":1,"entries":{}}`), []byte{}, uint8(1))
	maxPayload := fzMeta/2 - 4096
	f.Fuzz(func(t *testing.T, payload, slotHdr []byte, which uint8) {
		if len(payload) == 0 || len(payload) > maxPayload {
			return
		}
		base := compact
		if which&1 == 1 {
			base = v1
		}
		mem := blockdev.NewMem(int64(len(base)), 0)
		img := mem.Bytes()
		copy(img, base)
		// The fuzzed checkpoint is the newest; the other container keeps the real one.
		writeContainer(img, int(which>>1)&1, 1<<40, payload)
		if len(slotHdr) > 0 { // overwrite the start of one slot's header
			s := int64(which>>2) % fzSlots
			copy(img[fzMeta+s*relSlot:fzMeta+s*relSlot+min(int64(len(slotHdr)), 4096)], slotHdr)
		}
		// The fuzzed seq 2^40 is far from the real one: selection may be in doubt, which a
		// writable Open refuses; accept the choice so the fuzzer reaches the rest.
		e, err := engine.OpenWith(mem, fuzzConfig(engine.CheckpointCompact), engine.OpenOptions{AcceptDoubt: true})
		if err != nil {
			return
		}
		defer e.CloseNoCheckpoint()
		if lay := e.Layout(); lay.MaxSlots != fzSlots {
			t.Fatalf("layout changed: %d slots", lay.MaxSlots)
		}
		r := audit(t, e, false)
		if r.wrong > 0 || r.dup > 0 || r.accountingErr != "" {
			t.Fatalf("recovered a fuzzed checkpoint into a bad state: %s", r.bad())
		}
	})
}

// FuzzSelectImage damages both container header blocks (seq, seal, and whatever else the
// fuzzer writes in their first 48 bytes) of a real two-checkpoint history, in either
// format: selection must not panic, must pick a usable container or refuse, must never
// pick one whose checkpoint is not on the device, and must keep what it serves correct.
func FuzzSelectImage(f *testing.F) {
	compact := fuzzImage(f, engine.CheckpointCompact)
	v1 := fuzzImage(f, engine.CheckpointLMCacheV1)
	f.Add(compact[:48], compact[fzMeta/2:fzMeta/2+48], false)
	f.Add(v1[:48], v1[fzMeta/2:fzMeta/2+48], true)
	f.Add(make([]byte, 48), v1[fzMeta/2:fzMeta/2+48], true)
	f.Fuzz(func(t *testing.T, h0, h1 []byte, useV1 bool) {
		base, format := compact, engine.CheckpointCompact
		if useV1 {
			base, format = v1, engine.CheckpointLMCacheV1
		}
		mem := blockdev.NewMem(int64(len(base)), 0)
		img := mem.Bytes()
		copy(img, base)
		copy(img[:min(len(h0), 48)], h0)
		copy(img[fzMeta/2:fzMeta/2+min(len(h1), 48)], h1)
		if d, err := engine.Detect(mem); err == nil {
			if err := d.Config.Validate(); err != nil {
				t.Fatalf("Detect returned an invalid config: %v", err)
			}
			if c := d.Selection.Container; c >= 0 && !d.Selection.Candidates[c].Usable {
				t.Fatalf("chose unusable container %d: %+v", c, d.Selection)
			}
		}
		e, err := engine.OpenWith(mem, fuzzConfig(format), engine.OpenOptions{AcceptDoubt: true})
		if err != nil {
			return
		}
		defer e.CloseNoCheckpoint()
		sel := e.Stats().Recovery.Selection
		if sel.Container < 0 || !sel.Candidates[sel.Container].Usable {
			t.Fatalf("opened from container %d: %+v", sel.Container, sel)
		}
		if r := audit(t, e, false); r.wrong > 0 || r.dup > 0 || r.accountingErr != "" {
			t.Fatalf("recovered into a bad state: %s", r.bad())
		}
	})
}

// FuzzDetectConfigImage: DetectConfig reads arbitrary device bytes (inspect runs it on
// devices it did not format); it must not panic, and what it returns must validate.
func FuzzDetectConfigImage(f *testing.F) {
	f.Add(fuzzImage(f, engine.CheckpointCompact)[:8192])
	f.Add(make([]byte, 4096))
	f.Add([]byte("LMCIDX01"))
	f.Fuzz(func(t *testing.T, head []byte) {
		mem := blockdev.NewMem(1<<20, 0)
		copy(mem.Bytes(), head)
		cfg, err := engine.DetectConfig(mem)
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("DetectConfig returned an invalid config: %v", err)
		}
	})
}

// TestDecoderFuzzCoverage checks that every decoder of device bytes has a fuzz target:
// the engine's decode functions by name, and the NVMe/FDP decoders of their packages.
func TestDecoderFuzzCoverage(t *testing.T) {
	want := map[string][]string{ // package dir → fuzz targets that must exist
		".": {"FuzzSlotHeader", "FuzzContainerHeader", "FuzzContainerSeal", "FuzzV1Checkpoint", "FuzzCompactCheckpoint", "FuzzKeyCodec", "FuzzRecoverImage", "FuzzSelectImage"},
	}
	fuzzRe := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(f \*testing\.F\)`)
	have := map[string]bool{}
	for dir := range want {
		files, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
		for _, fn := range files {
			b, err := os.ReadFile(fn)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range fuzzRe.FindAllStringSubmatch(string(b), -1) {
				have[m[1]] = true
			}
		}
	}
	for dir, names := range want {
		for _, n := range names {
			if !have[n] {
				t.Errorf("%s: fuzz target %s is missing", dir, n)
			}
		}
	}
	// Every decode function over bytes in the engine must be named by some fuzz target's
	// body (directly, or through Open/ReadContainers/DetectConfig for the recovery path).
	decRe := regexp.MustCompile(`(?m)^func (decode\w+)\(b \[\]byte`)
	srcs, _ := filepath.Glob("*.go")
	var tests strings.Builder
	for _, fn := range srcs {
		if strings.HasSuffix(fn, "_test.go") {
			b, _ := os.ReadFile(fn)
			tests.Write(b)
		}
	}
	for _, fn := range srcs {
		if strings.HasSuffix(fn, "_test.go") {
			continue
		}
		b, _ := os.ReadFile(fn)
		for _, m := range decRe.FindAllStringSubmatch(string(b), -1) {
			if !strings.Contains(tests.String(), m[1]+"(") {
				t.Errorf("%s: decoder %s has no test or fuzz target calling it", fn, m[1])
			}
		}
	}
	// The NVMe and FDP decoders belong to their packages' owners: report (not fail) any
	// exported DecodeXxx over bytes that no fuzz target of its package calls.
	exported := regexp.MustCompile(`(?m)^func (Decode\w+)\((?:b|buf|d|data) \[\]byte`)
	for _, dir := range []string{"../nvme", "../fdp", "../tools/vmtest/probe"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		var fuzzBodies strings.Builder
		for _, fn := range files {
			if b, err := os.ReadFile(fn); err == nil && strings.HasSuffix(fn, "_test.go") {
				for _, chunk := range strings.Split(string(b), "\nfunc ")[1:] {
					if strings.HasPrefix(chunk, "Fuzz") {
						fuzzBodies.WriteString(chunk)
					}
				}
			}
		}
		for _, fn := range files {
			if strings.HasSuffix(fn, "_test.go") {
				continue
			}
			b, _ := os.ReadFile(fn)
			for _, m := range exported.FindAllStringSubmatch(string(b), -1) {
				if !strings.Contains(fuzzBodies.String(), m[1]+"(") {
					t.Logf("note: %s: %s has no fuzz target (owner's package)", fn, m[1])
				}
			}
		}
	}
}
