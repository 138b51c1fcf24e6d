package blockdev

import (
	"bytes"
	"errors"
	"testing"

	"github.com/rbctl/rbctl/placement"
)

// TestUringStart starts batches one after another before waiting for any (the second
// longer than a ring's depth, so it is spread over both rings), then checks that each Wait
// returns with its ops done, that an op the device refuses fails through Wait, and that a
// Start on a closed device reports it.
func TestUringStart(t *testing.T) {
	d := openUringOrSkip(t, uringTestFile(t, 16<<20), UringOptions{QueueDepth: 4, Rings: 2})
	const bs = 64 << 10
	mem := uringAlloc(t, 16*bs)
	uringPattern(mem, 3)
	writes := func(lo, hi int) []Op {
		var ops []Op
		for i := lo; i < hi; i++ {
			ops = append(ops, Op{Write: true, Off: int64(i) * bs, Buf: mem[i*bs : (i+1)*bs], Handle: placement.None})
		}
		return ops
	}
	a, b := writes(0, 3), writes(3, 16)
	sa, sb := d.Start(a), d.Start(b)
	for name, w := range map[string]struct {
		s   Started
		ops []Op
	}{"first": {sa, a}, "second": {sb, b}} {
		if err := w.s.Wait(); err != nil {
			t.Fatalf("%s batch: %v", name, err)
		}
		for i, op := range w.ops {
			if op.Err != nil || op.N != bs {
				t.Fatalf("%s batch op %d: N %d, Err %v after Wait", name, i, op.N, op.Err)
			}
		}
	}
	got := uringAlloc(t, 16*bs)
	if err := d.Submit([]Op{{Off: 0, Buf: got, Handle: placement.None}}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, mem) {
		t.Fatal("read back differs from the started writes")
	}

	bad := []Op{{Off: 0, Buf: got[:bs], Handle: placement.None}, {Off: 1 << 40, Buf: got[bs : 2*bs], Handle: placement.None}}
	if err := d.Start(bad).Wait(); !errors.Is(err, ErrOutOfRange) || bad[0].Err != nil || bad[1].Err == nil {
		t.Fatalf("Wait = %v (op errors %v, %v), want the out-of-range op's error alone", err, bad[0].Err, bad[1].Err)
	}

	d.Close()
	if err := d.Start(writes(0, 1)).Wait(); err == nil {
		t.Fatal("Start on a closed device: Wait returned nil")
	}
}
