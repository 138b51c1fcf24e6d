package enginetest

import (
	"bytes"
	"testing"

	"github.com/rbctl/rbctl/blockdev"
	"github.com/rbctl/rbctl/engine"
)

// Zero-copy puts on the backend: payloads of whole blocks in aligned memory are written
// from the caller's memory where the device takes vectored writes (Stats.PutsVectored),
// mixed in one batch with payloads that are copied; all of them load back, after slot
// reuse and after recovery.

var zeroCopyCases = []suiteCase{
	{"zero-copy puts: mixed batch, reuse, recovery", func(t *testing.T, v *env) {
		c := Config()
		e := v.format(c)
		defer func() { e.Close() }()
		maxPayload := int(e.Layout().PayloadBytes())
		mem, err := blockdev.Alloc(4 * maxPayload)
		if err != nil {
			t.Fatal(err)
		}
		defer blockdev.Free(mem)
		fill := func(b []byte, seed int) []byte { copy(b, Payload(seed, len(b))); return b }
		pay := [][]byte{
			fill(mem[:maxPayload], 1),                 // the slot's whole payload
			fill(mem[maxPayload:maxPayload+4096], 2),  // one block
			Payload(3, 5000),                          // an odd length: copied
			fill(make([]byte, 32<<10), 4),             // Go heap, whole blocks
			fill(mem[2*maxPayload+512:][:8192], 5),    // whole blocks off a 4 KiB boundary
			fill(mem[3*maxPayload:3*maxPayload+1], 6), // one byte: copied
		}
		keys := make([]engine.Key, len(pay))
		for i := range keys {
			keys[i] = K(100+i, "")
		}
		// What the engine's contract says goes out in place (engine.PutMany's doc).
		info := v.dev.Info()
		inPlace := int64(0)
		for _, p := range pay {
			if blockdev.WritesTail(v.dev) && len(p)%c.BlockAlign == 0 && (!info.Direct || blockdev.Aligned(p, c.BlockAlign)) {
				inPlace++
			}
		}
		if r := mustPut(t, e, keys, pay); len(r.Stored) != len(keys) {
			t.Fatalf("%d of %d stored", len(r.Stored), len(keys))
		}
		t.Logf("%d of %d payloads written in place (vectored writes: %v, logical block %d)", inPlace, len(pay), blockdev.WritesTail(v.dev), info.LogicalBlock)
		if st := e.Stats(); st.PutsVectored != inPlace {
			t.Fatalf("PutsVectored %d, want %d (device takes vectored writes: %v)", st.PutsVectored, inPlace, blockdev.WritesTail(v.dev))
		}
		check := func(what string) {
			t.Helper()
			for i, k := range keys {
				got, ok := load(t, e, k, len(pay[i]))
				if !ok || !bytes.Equal(got, pay[i]) {
					t.Fatalf("%s: key %d (%d bytes): ok=%v equal=%v", what, i, len(pay[i]), ok, bytes.Equal(got, pay[i]))
				}
			}
			if st := e.Stats(); st.ChecksumErrors != 0 {
				t.Fatalf("%s: %d checksum errors", what, st.ChecksumErrors)
			}
		}
		check("after the puts")
		// Delete the in-place ones and put them again under new keys: the freed slots are
		// written again, header and payload.
		e.DeleteMany([]engine.Key{keys[0], keys[1]}, false)
		keys[0], keys[1] = K(200, ""), K(201, "")
		fill(pay[0], 7)
		fill(pay[1], 8)
		if r := mustPut(t, e, keys[:2], pay[:2]); len(r.Stored) != 2 {
			t.Fatalf("re-put: %d of 2 stored", len(r.Stored))
		}
		check("after slot reuse")
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		e = v.open(c)
		check("after recovery")
	}},
}
